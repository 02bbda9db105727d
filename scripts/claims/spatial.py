"""The pixel benchmark's verdicts (``python benchmarks/spatial_maps.py``), from its CSVs.

``spatial-verdict docs/spatial_maps``: per checkpoint, how often the exact maps are better than, tie with or are
worse than the CAM anchors over every layer and metric. The family is every pooled comparison of one checkpoint
(each layer and the all-layer map, each metric, each anchor and the random map): Holm-corrected together
(:func:`holm_words`), and ``scripts/spatial_facts.py`` states the same corrected words.
"""

from __future__ import annotations

import csv
import sys

from claims.common import ROOT, holm, holm_verdict

sys.path.insert(0, str(ROOT / "benchmarks"))
from spatial_maps import METRICS as BETTER  # noqa: E402  (metric -> which direction is better)


def holm_words(rows: list[dict]) -> list[str]:
    """``"better"``, ``"tie"`` or ``"worse"`` (exact against that map) for each of one checkpoint's pooled comparison
    rows (``diff`` and ``p`` set), Holm-corrected over all of them: a tie where the CI covers 0 or the adjusted
    p exceeds 0.05."""
    words = []
    for r, p in zip(rows, holm([float(r["p"]) for r in rows])):
        direction = holm_verdict(float(r["diff_low"]), float(r["diff_high"]), p)
        words.append("tie" if direction == "tie" else
                     "better" if (direction == "lower") == (BETTER[r["metric"]] == "lower") else "worse")  # fmt: skip
    return words


def spatial_verdict(arg: str) -> str:
    rows = [r for path in sorted((ROOT / arg).glob("*.csv")) for r in csv.DictReader(path.open())
            if r["metric"] in BETTER and r.get("diff") and not r.get("class")]  # fmt: skip
    parts = []
    for name in dict.fromkeys(r["checkpoint"] for r in rows):
        mine = [r for r in rows if r["checkpoint"] == name]
        words = [w for r, w in zip(mine, holm_words(mine)) if "CAM" in r["method"]]
        tally = {w: words.count(w) for w in ("better", "tie", "worse")}
        parts.append(f"{name} {tally['better']} better / {tally['tie']} tied / {tally['worse']} worse of {len(words)}")
    return ("Exact maps against Grad-CAM, HiResCAM and LayerCAM on pixel deletion, insertion and ROAD, every layer "
            "(paired bootstrap over images, Holm-corrected over each checkpoint's comparisons): " + "; ".join(parts) + ".\n")  # fmt: skip


CLAIMS = {"spatial-verdict": spatial_verdict}
