"""Claims from a stored network report: which unit's Grad-CAM to use on that network (every unit's difference to a
random map of its grid on each pixel metric), and which units it can lose (its lesion study).

Each generator's argument is an own head's folder (its ``network.json``) or a check file that keeps the report's
``units``, ``residual``, ``gradcam`` and ``lesion`` sections, at its top level (``docs/veit/<name>.json`` of
``scripts/veit_lesion.py``) or under ``network_report`` (``docs/own-networks/<name>.json`` of
``scripts/own_networks.py``): the networks trained here are not shipped whole."""

from __future__ import annotations

import json

from claims.common import ROOT, wrapped

from laya.analysis.network.gradcam_choice import METRICS
from laya.analysis.network.report_record import gradcam_record, lesion_record
from laya.analysis.statistics import format_diff

WORDS = {True: "better than random", False: "not better than random"}


def _record(arg: str) -> dict:
    """The stored report ``arg`` names: an own head's folder (its ``network.json``) or a check file."""
    path = ROOT / arg
    record = json.loads((path / "network.json" if path.is_dir() else path).read_text())
    return record.get("network_report", record)


def _missing(arg: str, what: str) -> str:
    again = f"`laya network --checkpoint {arg}`" if (ROOT / arg).is_dir() else "rerunning the check that wrote it"
    return f"The stored report of `{arg}` predates {what}: {again} computes it.\n"


def gradcam_choice(arg: str) -> str:
    """``arg``: a stored report (module docstring). The unit its report says to use, then per unit and metric its map
    minus the random map's mean with the paired CI and whether it is better than random (Holm-corrected over every
    unit and metric), and the seconds per image of its map alone."""
    record = _record(arg)
    choice = gradcam_record(record.get("gradcam"), record["units"])
    if choice is None:
        return _missing(arg, "the Grad-CAM test")
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


def lesion(arg: str) -> str:
    """``arg``: a stored report (module docstring). Its lesion study: the intact accuracy, then per unit the accuracy
    with it skipped and with it resampled alone, each with its bootstrap CI and its paired drop from intact [CI] (what
    each unit got where it differs from the intervention's name: a plain block passed on, the resample fallback of a
    unit that cannot be skipped), then accuracy over ``k`` units skipped at once."""
    record = _record(arg)
    study = lesion_record(record.get("lesion"), record["units"])
    if study is None:
        return _missing(arg, "the lesion study")
    estimate, low, high = study.intact
    single = study.single.set_index(["intervention", "unit"])
    kinds = [k for k in ("skip", "resample") if k in single.index.get_level_values(0)]
    head = (f"On `{arg}` ({study.n:,} test inputs; 95 % bootstrap CI, drops paired with the intact network): intact "
            f"accuracy {estimate:.3f} [{low:.3f}, {high:.3f}].")
    lines = [wrapped(head), "", "| unit | keeps the input | " + " | ".join(f"{k}: accuracy · drop" for k in kinds) + " |",
             "|---|---|" + "---|" * len(kinds)]  # fmt: skip
    for unit, keeps in zip(record["units"], record.get("residual", [None] * len(record["units"]))):
        cells = []
        for kind in kinds:
            if (kind, unit) not in single.index:  # a unit the study did not reach: an empty cell
                cells.append("")
                continue
            r = single.loc[(kind, unit)]
            how = "" if r["method"] == kind else f" ({r['method']})"
            cells.append(f"{r['accuracy']:.3f} [{r['low']:.3f}, {r['high']:.3f}] · "
                         f"{format_diff(r['drop'], r['drop_low'], r['drop_high'])}{how}")  # fmt: skip
        lines.append(f"| `{unit}` | {'–' if keeps is None else 'yes' if keeps else 'no'} | " + " | ".join(cells) + " |")
    if len(study.curve):
        lines += ["", "| k units skipped at once | draws | accuracy mean (sd; min–max) |", "|---|---|---|"]
        lines += [f"| {int(c.k)} | {int(c.draws)} | {c.mean:.3f} ({c.sd:.3f}; {c.min:.3f}–{c.max:.3f}) |"
                  for c in study.curve.itertuples()]  # fmt: skip
    return "\n".join(lines) + "\n"


CLAIMS = {"gradcam-choice": gradcam_choice, "network-lesion": lesion}
