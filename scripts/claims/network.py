"""Claims from a stored network report (``<setting>/own/network.json``): which unit's Grad-CAM to use on that
network, every unit's difference to a random map of its grid on each pixel metric."""

from __future__ import annotations

import json

from claims.common import ROOT, wrapped

from laya.analysis.network.gradcam_choice import METRICS
from laya.analysis.network.report_record import gradcam_record
from laya.analysis.statistics import format_diff

WORDS = {True: "better than random", False: "not better than random"}


def gradcam_choice(arg: str) -> str:
    """``arg``: an own head's folder. The unit its report says to use, then per unit and metric its map minus the
    random map's mean with the paired CI and whether it is better than random (Holm-corrected over every unit and
    metric), and the seconds per image of its map alone."""
    record = json.loads((ROOT / arg / "network.json").read_text())
    choice = gradcam_record(record.get("gradcam"), record["units"])
    if choice is None:
        return (f"The stored report of `{arg}` predates the Grad-CAM test: `laya network --checkpoint {arg}` "
                "computes it.\n")
    chosen = choice.chosen
    head = (f"On `{arg}` ({choice.n:,} test images, class-balanced, seed {choice.seed}; each unit's Grad-CAM of the "
            "predicted class minus a random map of its grid, paired bootstrap, 95 % CI, Holm-corrected over every "
            "unit and metric): " + (f"use `{chosen}`." if chosen else "no unit's map is better than random on any "
                                    "metric."))  # fmt: skip
    table = choice.rows.assign(beats=choice.beats)
    lines = [wrapped(head), "", "| unit | grid | " + " | ".join(METRICS) + " | s / image (× forward) |",
             "|---|---|" + "---|" * len(METRICS) + "---|"]  # fmt: skip
    for cost in choice.units.itertuples():
        mine = table[table["unit"] == cost.unit].set_index("metric")
        cells = [f"{format_diff(mine.at[m, 'diff'], mine.at[m, 'diff_low'], mine.at[m, 'diff_high'])} "
                 f"{WORDS[bool(mine.at[m, 'beats'])]}" if m in mine.index else "" for m in METRICS]  # fmt: skip
        lines.append(f"| `{cost.unit}` | {cost.h}×{cost.w} | " + " | ".join(cells)
                     + f" | {cost.seconds:.4f} ({cost.x_forward:.1f}×) |")
    return "\n".join(lines) + "\n"


CLAIMS = {"gradcam-choice": gradcam_choice}
