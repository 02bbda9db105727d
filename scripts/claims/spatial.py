"""The pixel benchmark's verdicts (``python benchmarks/spatial_maps.py``), from its CSVs.

``spatial-verdict docs/spatial_maps``: per checkpoint, how often the exact maps are better than, tie with or are
worse than the CAM anchors over every layer, on the metrics that discriminate there (the occlusion reference beats
a random map: ``spatial_maps.discriminating``); the others are named and count nothing. The family is every pooled comparison of one checkpoint
(each layer and the all-layer map, each metric that discriminates, each anchor and the references): Holm-corrected together
(:func:`holm_words`), and ``scripts/spatial_facts.py`` states the same corrected words.
"""

from __future__ import annotations

import csv
import sys

from claims.common import ROOT, holm, holm_verdict

sys.path.insert(0, str(ROOT / "benchmarks"))
from spatial_maps import CHECK, discriminating  # noqa: E402
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
    """Per checkpoint, the exact maps' wins / ties / losses against the CAM anchors on the metrics that discriminate
    there (``spatial_maps.discriminating``), which it names; a metric that does not, or a CSV with no check, counts
    nothing and is named too."""
    every = [r for path in sorted((ROOT / arg).glob("*.csv")) for r in csv.DictReader(path.open())
             if r["metric"] in BETTER and not r.get("class")]  # fmt: skip
    works = discriminating(every)
    rows = [r for r in every if r.get("diff") and r["method"] != CHECK]
    names = {"deletion": "deletion", "insertion": "insertion", "road": "ROAD"}
    parts, silent = [], []
    for name in dict.fromkeys(r["checkpoint"] for r in every):
        used = [m for m in BETTER if works.get((name, m))]
        if not any((name, m) in works for m in BETTER):
            silent.append(f"{name} (no metric check in its CSV)")
            continue
        if not used:
            silent.append(f"{name} (no metric discriminates)")
            continue
        mine = [r for r in rows if r["checkpoint"] == name and r["metric"] in used]
        words = [w for r, w in zip(mine, holm_words(mine)) if "CAM" in r["method"]]
        tally = {w: words.count(w) for w in ("better", "tie", "worse")}
        off = [names[m] for m in BETTER if m not in used]
        scope = ", ".join(names[m] for m in used) + (f"; {', '.join(off)} {'does' if len(off) == 1 else 'do'} not discriminate here" if off else "")
        parts.append(f"{name} ({scope}) {tally['better']} better / {tally['tie']} tied / {tally['worse']} worse of "
                     f"{len(words)}")  # fmt: skip
    text = ("Exact maps against Grad-CAM, HiResCAM and LayerCAM, every layer, on the pixel metrics that discriminate on "
            "each checkpoint (the model's own occlusion map beats a random map, paired bootstrap, CI excluding 0; "
            "paired bootstrap over images, Holm-corrected over each checkpoint's comparisons on those metrics): "
            + ("; ".join(parts) if parts else "no metric is known to discriminate on any checkpoint") + ".")  # fmt: skip
    if silent:
        text += f" Not counted: {'; '.join(silent)}."
    return text + "\n"


CLAIMS = {"spatial-verdict": spatial_verdict}
