"""Markdown cards of depth analytics for the docs: tables over the bundled checkpoints' ``depth.json``
(``python -m laya depth``) and ``exits.json`` (``python -m laya exits``).

``scripts/prose_claims.py`` places them as generated blocks (``depth-card``, ``depth-table NAME``, ``exit-card``,
``exit-curves``, ``truncation-card``, ``alpha-card``) and checks that the pages hold what they print now; the
reports' numbers and verdicts come from :mod:`laya.analysis.depth.report` and :mod:`laya.analysis.depth.measured`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from laya.analysis.depth.exits_record import load_exits
from laya.analysis.depth.measured import best_exit, saving_noise, saving_text, signed_percent, timing_conditions
from laya.analysis.depth.report import DepthReport


def _ci(estimate: float | None, low: float | None, high: float | None, spec: str = ".3f") -> str:
    if estimate is None:
        return "–"
    return f"{estimate:{spec}} [{low:{spec}}, {high:{spec}}]" if low is not None else f"{estimate:{spec}}"


def _column(task: str) -> str:
    """Depth-analytics table column of a detection task: the other dataset's OOD tasks share one."""
    return "OOD: other dataset" if task.startswith("OOD:") and "noise" not in task else task


def _reports(directories: Sequence[str | Path]) -> list[tuple[str, DepthReport]]:
    """``("<setting> | <head>", report)`` of every directory in ``directories`` that has a ``depth.json``."""
    reports = [(Path(d), DepthReport.load(d)) for d in directories]
    return [(f"{d.parent.name} | {d.name}", r) for d, r in reports if r is not None]


def prediction_depth_card(directories: Sequence[str | Path]) -> str:
    """Markdown: prediction depth and overthinking of every checkpoint in ``directories`` (fitted probes, and
    LAYA/ScalarMix's own classifier, or an attached network's probes ending at its classifier, where they have
    one)."""
    reports = _reports(directories)
    lines = [("Prediction depth and overthinking: readouts through linear probes fitted on the training split for "
              "every head (the same kind of readout, so heads compare); the last column reads LAYA/ScalarMix through "
              "their own classifier instead, and an attached network's own classifier through probes that end at "
              "that classifier (depth; overthinking rate), where they have one."), "",
             ("| setting | head | test / train inputs | accuracy | prediction depth (of L), fitted probes | overthinking "
              "rate, fitted probes | overthought errors, fitted probes | own classifier: depth; overthinking |"), "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, r in reports:
        kind = r.data.get("readout_kind", "own classifier" if r.data["readout_source"] == "the head's classifier"
                          else "fitted probe")  # fmt: skip
        own_kind = kind != "fitted probe"  # a classifier of its own in the readouts: LAYA's, a network's at the end
        own = r.table("prediction_depth").set_index("class").loc["all"]
        own_cell = f"{own['prediction_depth']:.2f}; {own['overthinking_rate']:.3f}" if own_kind else "–"
        if "prediction_depth_probes" not in r.data and own_kind:  # older report: no same-kind readouts
            lines.append(f"| {name} | {r.data['n_test']} / {r.data['n_train']} | {r.data['accuracy']:.3f} | – (rerun "
                         f"`python -m laya depth`) | – | – | {own_cell} |")  # fmt: skip
            continue
        overall = r.table("prediction_depth_probes" if own_kind else "prediction_depth").set_index("class").loc["all"]
        lines.append(
            f"| {name} | {r.data['n_test']} / {r.data['n_train']} | {r.data['accuracy']:.3f} | "
            f"{_ci(overall['prediction_depth'], overall['prediction_depth_low'], overall['prediction_depth_high'], '.2f')} "
            f"(L = {len(r.data['layer_names'])}) | "
            f"{_ci(overall['overthinking_rate'], overall['overthinking_rate_low'], overall['overthinking_rate_high'])} | "
            f"{_ci(overall['overthought_errors'], overall['overthought_errors_low'], overall['overthought_errors_high'], '.2f')} | "
            f"{own_cell} |"
        )
    return "\n".join(lines) + "\n"


def pruning_card(directories: Sequence[str | Path]) -> str:
    """Markdown: accuracy of every checkpoint in ``directories`` with half its layers kept, by criterion."""
    lines = [("Pruning: accuracy with half the layers kept (as pruned / classifier re-fit); the truncated model's "
              "measured speed-ups are `python -m laya exits`' (the truncation table)."), "",
             "| setting | head | layers kept | head weight | LOO drop | random (mean of orders) |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name, r in _reports(directories):
        table = r.table("pruning")
        kept = max(1, len(r.data["layer_names"]) // 2)
        half = table[table["layers_kept"] == kept].set_index("criterion")
        cells = [f"{half.loc[c, 'accuracy']:.3f} / {half.loc[c, 'refit_accuracy']:.3f}" if c in half.index else "–"
                 for c in ("head weight", "LOO drop", "random")]  # fmt: skip
        lines.append(f"| {name} | {kept} of {len(r.data['layer_names'])} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def detection_card(directories: Sequence[str | Path]) -> str:
    """Markdown: detection AUROC of every checkpoint in ``directories``, MSP against the best other signal."""
    reports = _reports(directories)
    tasks = list(dict.fromkeys(_column(t) for _, r in reports for t in r.table("detection")["task"]))
    sets = sorted({f"{k.removeprefix('OOD: ')}: {v}" for _, r in reports
                   for k, v in (r.data["detection"].get("ood_descriptions") or {}).items()})  # fmt: skip
    lines = [("Detection AUROC [95 % CI]: max softmax (MSP) and the best other signal among all scores (energy, "
              "α-div: α divergence, disagree: readout disagreement, depth: prediction depth, Maha: multi-layer "
              "Mahalanobis); (+)/(−)/tie and 'above MSP': paired bootstrap of the AUROC difference against MSP (95 % CI "
              "excludes 0). OOD sets: " + ("; ".join(sets) if sets else "CIFAR-10 test images (grey, 28 px) for "
              "Fashion-MNIST models, Fashion-MNIST test images (RGB, 32 px) for CIFAR-10 models") + "."), "",
              "| setting | head | " + " | ".join(tasks) + " |",
              "|---|---|" + "---|" * len(tasks)]  # fmt: skip
    for name, r in reports:
        table = r.table("detection")
        cells = []
        for task in tasks:
            rows = table[table["task"].map(_column) == task].set_index("score")
            if rows.empty or rows["auroc"].isna().all():  # e.g. no errors to detect
                cells.append("–")
                continue
            msp = rows.loc["msp"]
            depth_rows = rows.drop(index=["msp"])  # every other score, energy included
            best = depth_rows.loc[depth_rows["auroc"].idxmax()]
            mark = "tie" if "tie" in str(best["verdict"]) else ("+" if best["vs_msp"] > 0 else "−")
            better = [SHORT[k] for k, v in depth_rows.iterrows() if "tie" not in str(v["verdict"]) and v["vs_msp"] > 0]
            cells.append(
                f"MSP {_ci(msp['auroc'], msp['auroc_low'], msp['auroc_high'], '.2f')}; best {SHORT[best.name]} "
                f"{_ci(best['auroc'], best['auroc_low'], best['auroc_high'], '.2f')} ({mark}); "
                f"above MSP: {', '.join(better) or 'none'}"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


DEPTH_TABLES = {"prediction-depth": prediction_depth_card, "pruning": pruning_card, "detection": detection_card}


def depth_card(directories: Sequence[str | Path]) -> str:
    """The three tables of :data:`DEPTH_TABLES` over the checkpoints in ``directories`` that have a ``depth.json``.
    Early-exit savings and truncation speed-ups are not here: ``depth.json``'s are estimates; the measured ones are
    :mod:`laya.analysis.depth.measured`'s."""
    return "\n".join(table(directories) for table in DEPTH_TABLES.values())


SHORT = {"alpha_divergence": "α-div", "readout_disagreement": "disagree", "prediction_depth": "depth",
         "mahalanobis": "Maha", "energy": "energy", "msp": "MSP"}  # fmt: skip




def exit_card(directories: list[str | Path], tolerance: float = 0.01) -> str:
    """Markdown: per checkpoint with an ``exits.json`` and per exit kind, the measured run at the cheapest
    confidence threshold (by MACs) whose accuracy is within ``tolerance`` of the full model's, else at the highest
    threshold run; accuracy [95 % CI], share exited, MACs saved and wall-clock saved at each batch size
    (negative: slower than plain inference; "within the noise" where it does not exceed the noise of that exit
    kind's own timings, :func:`saving_noise`), that noise at each batch size and how it was timed
    (:func:`timing_conditions`)."""
    reports = [(Path(d), load_exits(d)) for d in directories]
    reports = [(d, r) for d, r in reports if r is not None]
    batches = sorted({int(k.split("_b")[1]) for _, r in reports for k in r["runs"][0] if k.startswith("saved_b")})
    lines = ["| setting | head | exits | threshold | accuracy [95 % CI] (full model) | exited | MACs saved | "
             + " | ".join(f"time saved, batch {b:,}" for b in batches) + " | noise of a saving (2 × plain timings' spread) | timed with |",
             "|---|---|---|---|---|---|---|" + "---|" * len(batches) + "---|---|"]  # fmt: skip
    for directory, report in reports:
        runs = pd.DataFrame(report["runs"])
        for kind, part in runs.groupby("exits", sort=False):
            full = part[part["policy"] == "full model"].iloc[0]
            row, within = best_exit(part, tolerance)
            mark = "" if within else " (none within 1 pt)"
            noise = {b: saving_noise(part, b) for b in batches}
            times = " | ".join(saving_text(row[f"saved_b{b}"], noise[b]) for b in batches)
            lines.append(
                f"| {directory.parent.name} | {directory.name} | {kind} | {row['parameter']:g}{mark} | "
                f"{row['accuracy']:.3f} [{row['accuracy_low']:.3f}, {row['accuracy_high']:.3f}] ({full['accuracy']:.3f}) | "
                f"{row['exited']:.0%} | {signed_percent(row['macs_saved'])} | {times} | "
                + " / ".join(f"±{noise[b]:.0%}" for b in batches) + f" | {timing_conditions(report, kind)} |"
            )
    return "\n".join(lines) + "\n"


def exit_curves_card(directories: list[str | Path]) -> str:
    """Markdown: per checkpoint, every measured confidence threshold with the readouts and the trained exits side
    by side (accuracy, MACs saved, wall clock saved at batch 64 where it exceeds that kind's timing noise, else
    "within the noise"): the two accuracy-vs-cost curves."""
    lines = []
    for directory in map(Path, directories):
        report = load_exits(directory)
        if report is None:
            continue
        runs = pd.DataFrame(report["runs"])
        kinds = list(dict.fromkeys(runs["exits"]))
        lines += [f"**{directory.parent.name} / {directory.name}** (full model {runs['accuracy'].iloc[0]:.3f}; "
                  "accuracy, MACs saved, time saved at batch 64)", "",
                  "| threshold | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]  # fmt: skip
        noise = {kind: saving_noise(part, 64) if "plain_ms_b64" in part else float("nan")
                 for kind, part in runs.groupby("exits", sort=False)}  # fmt: skip
        confidence = runs[runs["policy"].str.startswith("confidence")]
        for t, part in confidence.groupby("parameter", sort=True):
            cells = []
            for kind in kinds:
                row = part[part["exits"] == kind]
                cells.append("–" if row.empty else f"{row['accuracy'].iloc[0]:.3f}, {signed_percent(row['macs_saved'].iloc[0])}, "
                             f"{saving_text(row['saved_b64'].iloc[0], noise[kind]) if 'saved_b64' in row else '–'}")  # fmt: skip
            lines.append(f"| {t:g} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def truncation_card(directories: list[str | Path], tolerance: float = 0.01) -> str:
    """Markdown: per checkpoint, each truncation (deepest layers removed) with its better variant (as pruned or
    re-fit): accuracy [95 % CI] against the full model's, and its measured speed-up (MACs, wall clock per batch
    size) stated only where the truncated model stays within ``tolerance`` (1 point) of the full model, a wall-clock
    speed-up only where it exceeds the full-model timings' noise (else "within the noise")."""
    reports = [(Path(d), load_exits(d)) for d in directories]
    reports = [(d, r) for d, r in reports if r is not None and r.get("truncation")]
    batches = sorted({int(k.split("_b")[1]) for _, r in reports for k in r["truncation"][0] if k.startswith("speedup_b")})
    lines = ["| setting | head | layers kept | variant | accuracy [95 % CI] (full model) | MACs speed-up | "
             + " | ".join(f"speed-up, batch {b:,}" for b in batches) + " | noise of a speed-up (2 × full-model timings' spread) |",
             "|---|---|---|---|---|---|" + "---|" * len(batches) + "---|"]  # fmt: skip
    for directory, report in reports:
        table = pd.DataFrame(report["truncation"])
        L = len(report["layer_names"])
        spread = {b: saving_noise(table, b, "full_ms") for b in batches}
        noise = " / ".join(f"±{spread[b]:.0%}" for b in batches)
        for kept, part in table.groupby("layers_kept", sort=False):
            row = part.loc[part["accuracy"].idxmax()]
            within = row["accuracy"] >= row["full_accuracy"] - tolerance
            speed = [f"{row['macs_speedup']:.2f}×",
                     *(saving_text(row[f"speedup_b{b}"] - 1, spread[b], speedup=True) for b in batches)]
            if not within:
                speed = ["– (more than 1 pt lost)"] + ["–"] * len(batches)
            lines.append(
                f"| {directory.parent.name} | {directory.name} | {kept} of {L} | {row['variant']} | "
                f"{row['accuracy']:.3f} [{row['accuracy_low']:.3f}, {row['accuracy_high']:.3f}] ({row['full_accuracy']:.3f}) | "
                + " | ".join(speed) + f" | {noise} |"
            )
    return "\n".join(lines) + "\n"


def alpha_card(directories: list[str | Path]) -> str:
    """Markdown: LAYA's α-profile exit policy against the confidence threshold of nearest MACs (paired bootstrap)."""
    lines = ["| setting | head | α level | vs | MACs per input (α / confidence) | accuracy difference [95 % CI] | verdict |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for directory in map(Path, directories):
        report = load_exits(directory)
        for row in (report or {}).get("alpha_vs_confidence") or []:
            p = "p < 1/resamples" if row["p_value"] == 0 else f"p = {row['p_value']:.2g}"
            verdict = "tie" if row["difference_low"] <= 0 <= row["difference_high"] else (
                "α better" if row["accuracy_difference"] > 0 else "confidence better")  # fmt: skip
            lines.append(
                f"| {directory.parent.name} | {directory.name} | {row['policy'].split()[-1]} | {row['versus']} | "
                f"{row['macs']:,.0f} / {row['versus_macs']:,.0f} | "
                + f"{row['accuracy_difference']:+.3f} [{row['difference_low']:+.3f}, {row['difference_high']:+.3f}]".replace("-", "−")
                + f" | {verdict} (paired bootstrap, {p}) |"
            )
    return "\n".join(lines) + "\n"


__all__ = ["DEPTH_TABLES", "SHORT", "alpha_card", "depth_card", "detection_card", "exit_card", "exit_curves_card",
           "prediction_depth_card", "pruning_card", "truncation_card"]  # fmt: skip
