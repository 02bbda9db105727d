"""The pixel benchmark's verdicts (``python benchmarks/spatial_maps.py``), from its CSVs.

``spatial-verdict docs/spatial_maps``: per checkpoint, how often the exact maps are better than, tie with or are
worse than the CAM anchors over every layer and metric, Holm-corrected over that checkpoint's comparisons.
"""

from __future__ import annotations

import csv

from claims.common import ROOT, holm, holm_verdict

BETTER = {"deletion": "lower", "insertion": "higher", "road": "higher"}  # benchmarks/spatial_maps.py METRICS


def spatial_verdict(arg: str) -> str:
    rows = [r for path in sorted((ROOT / arg).glob("*.csv")) for r in csv.DictReader(path.open())
            if r["metric"] in BETTER and r.get("diff") and "CAM" in r["method"] and not r.get("class")]  # fmt: skip
    parts = []
    for name in dict.fromkeys(r["checkpoint"] for r in rows):
        mine = [r for r in rows if r["checkpoint"] == name]
        tally = {"better": 0, "tie": 0, "worse": 0}
        for r, p in zip(mine, holm([float(r["p"]) for r in mine])):
            direction = holm_verdict(float(r["diff_low"]), float(r["diff_high"]), p)
            if direction == "tie":
                tally["tie"] += 1
            else:
                tally["better" if (direction == "lower") == (BETTER[r["metric"]] == "lower") else "worse"] += 1
        parts.append(f"{name} {tally['better']} better / {tally['tie']} tied / {tally['worse']} worse of {len(mine)}")
    return ("Exact maps against Grad-CAM, HiResCAM and LayerCAM on pixel deletion, insertion and ROAD, every layer "
            "(paired bootstrap over images, Holm-corrected per checkpoint): " + "; ".join(parts) + ".\n")  # fmt: skip


CLAIMS = {"spatial-verdict": spatial_verdict}
