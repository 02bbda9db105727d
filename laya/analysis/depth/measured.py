"""Measured early exit and truncation of a checkpoint (``python -m laya exits``), end to end on the device.

Data flow: test images (the seeded ``--limit`` subset of :mod:`laya.analysis.depth.data`) -> preprocessed once ->
real runs. Training hidden states (the ``--train-limit`` subset) fit the exit classifiers and the re-fit heads.

* **readout exits**: the readouts of the depth analytics (LAYA/ScalarMix: the head's classifier on each adapted
  layer; Concat/LastLayer: the stored linear probes of ``depth_fit.safetensors``);
* **trained exits**: small per-layer classifiers trained for exiting on the frozen model's hidden states, the head
  fixed (:meth:`laya.analysis.depth.exits.ExitHeads.fit`), the Shallow-Deep Networks comparison;
* **α-profile exits** (heads whose α varies per input): the class-level α of
  :func:`~laya.analysis.depth.exits.alpha_profile_policy`, compared with the confidence threshold of nearest MACs by
  a paired bootstrap over inputs;
* **truncation**: :func:`laya.analysis.depth.pruning.truncation_runs`.

Writes ``exits.json`` + ``exits_runs.csv``, ``exits_alpha.csv``, ``exits_truncation.csv`` beside the checkpoint;
:mod:`laya.analysis.depth.exits_record` reads ``exits.json`` back, as untrusted input.
A report of :data:`EXITS_FORMAT` 2 reuses the adapters' outputs ``z_k`` at the head (format 1 recomputed them);
:func:`merge_exits` re-measures the readout exits of an older report and keeps its other runs.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from laya import __version__
from laya.analysis.depth.data import limit_flag, split_subset
from laya.analysis.depth.exits import (
    ExitHeads,
    ExitRunOptions,
    alpha_profile_policy,
    compare_policies,
    confidence_policy,
    exit_runs,
)
from laya.analysis.depth.exits_record import EXITS_FILE
from laya.analysis.depth.fit import DepthFit, fit_depth
from laya.analysis.depth.pruning import truncation_runs
from laya.analysis.statistics import saving_verdict
from laya.analysis.strict_json import json_safe
from laya.data.datasets import batch_indices
from laya.data.features import cached_hidden_states, hidden_states
from laya.model.checkpoint import Checkpoint, atomic_write_json
from laya.model.heads import MixHead

EXITS_FORMAT = 2  # 2: inputs that reach the head reuse the exits' z_k (1, unrecorded: adapters run again at the head)
EXIT_THRESHOLDS: tuple[float, ...] = (0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.99, 0.999)
ALPHA_LEVELS: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)


@dataclass
class MeasureOptions:
    """Inputs, thresholds, the trained exits' kind and how the runs are timed."""

    limit: int | None = 2000
    train_limit: int | None = 3000
    seed: int = 0
    thresholds: tuple[float, ...] = EXIT_THRESHOLDS
    alpha_levels: tuple[float, ...] = ALPHA_LEVELS
    trained: str | None = "mlp"  # None | "linear" | "mlp"
    truncation: bool = True
    refit_steps: int = 30
    runs: ExitRunOptions = field(default_factory=ExitRunOptions)


def measure(checkpoint: Checkpoint, options: MeasureOptions | None = None, log=print) -> dict[str, Any]:
    """Every measured run of ``checkpoint`` (see the module docstring) as one JSON-safe report."""
    options = options or MeasureOptions()
    model, meta = checkpoint.model, checkpoint.meta
    device = next(model.parameters()).device
    extract = cached_hidden_states if meta.backbone.freeze else hidden_states
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    train = split_subset(checkpoint, "train", options.train_limit, options.seed)
    train_hidden = [h.to(device) for h in extract(model.backbone, checkpoint.preprocess, train, 256, "train")]
    train_labels = train.labels.to(device)
    fit = DepthFit.load(checkpoint.path, checkpoint)
    if fit is None or fit.info.get("n_train") != len(train_labels):
        fit = fit_depth(checkpoint, train_hidden, train_labels)
    test = split_subset(checkpoint, "test", options.limit, options.seed)
    x = torch.cat([checkpoint.preprocess(b.to(device)) for b in test.iter_batches(batch_indices(len(test), 256))])
    labels = test.labels.to(device)

    readouts = ExitHeads.own(model.head) if isinstance(model.head, MixHead) else ExitHeads.from_probes(fit.probes)
    policies = {f"confidence {t}": (t, confidence_policy(t)) for t in options.thresholds}
    alpha = {}
    if fit.alpha_profile is not None:
        alpha = {f"α profile {q}": (q, alpha_profile_policy(fit.alpha_profile, q)) for q in options.alpha_levels}
    log(f"readout exits: {len(policies) + len(alpha)} policies")
    runs, correct = exit_runs(model, readouts, policies | alpha, x, labels, options.runs)
    tables = [runs]
    alpha_table = compare_policies(runs, correct, list(alpha), options.runs.resamples, options.seed) if alpha else None
    if options.trained:
        log(f"trained exits ({options.trained})")
        trained = ExitHeads.fit(train_hidden, train_labels, len(meta.classes), options.trained, seed=options.seed)
        trained_runs, _ = exit_runs(model, trained.to(device), policies, x, labels, options.runs)
        tables.append(trained_runs)
    truncation = None
    if options.truncation:
        log("truncation")
        truncation = truncation_runs(model, (train_hidden, train_labels), x, labels, options.refit_steps, options.runs)
    report = {
        "format": EXITS_FORMAT,
        "laya_version": __version__,
        "checkpoint": {"path": str(checkpoint.path), "head": meta.head.name, "dataset": meta.dataset, "seed": meta.seed},
        "command": (f"python -m laya --threads {torch.get_num_threads()} exits --checkpoint {checkpoint.path} "
                    f"--limit {limit_flag(options.limit)} --train-limit {limit_flag(options.train_limit)} --repeats {options.runs.repeats} "
                    f"--min-seconds {options.runs.min_seconds:g} "
                    f"--thresholds {','.join(map(str, options.thresholds))} "
                    f"--alpha-levels {','.join(map(str, options.alpha_levels))}"),  # fmt: skip
        "options": asdict(options),
        "machine": {"device": str(device), "torch_threads": torch.get_num_threads(), "processor": platform.processor()
                    or platform.machine(), "torch": torch.__version__, "cpus": os.cpu_count(),
                    "load_average": [load_before, os.getloadavg()[0]]},  # fmt: skip
        "n_test": len(labels),
        "n_train": len(train_labels),
        "layer_names": list(checkpoint.layer_names),
        "runs": pd.concat(tables, ignore_index=True).to_dict("records"),
        "alpha_vs_confidence": alpha_table.to_dict("records") if alpha_table is not None else None,
        "truncation": truncation.to_dict("records") if truncation is not None else None,
        "seconds": time.perf_counter() - started,
    }
    return json_safe(report)


def write_exits(report: dict[str, Any], out: str | Path) -> Path:
    """``exits.json`` and its tables as CSVs in ``out``."""
    out = Path(out)
    atomic_write_json(out / EXITS_FILE, report)
    pd.DataFrame(report["runs"]).to_csv(out / "exits_runs.csv", index=False)
    for key, name in (("alpha_vs_confidence", "exits_alpha.csv"), ("truncation", "exits_truncation.csv")):
        if report.get(key):
            pd.DataFrame(report[key]).to_csv(out / name, index=False)
    return out


def merge_exits(report: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """``report``'s runs in place of ``previous``'s runs of the same exit kinds; ``previous``'s other runs and its
    truncation kept, with the command, machine and version that measured them under ``"kept"`` (e.g. the readout
    exits re-measured after a change that leaves trained exits and truncation as they were)."""
    kinds = {r["exits"] for r in report["runs"]}
    kept = [r for r in previous["runs"] if r["exits"] not in kinds]
    truncation = report.get("truncation") or previous.get("truncation")
    source = previous.get("kept") or {key: previous.get(key) for key in ("command", "machine", "laya_version")}
    return report | {"runs": report["runs"] + kept, "truncation": truncation,
                     "kept": source | {"kinds": list(dict.fromkeys(r["exits"] for r in kept)),
                                       "truncation": truncation is not None and not report.get("truncation")}}  # fmt: skip


def best_exit(runs: pd.DataFrame, tolerance: float = 0.01) -> tuple[pd.Series, bool]:
    """Of one exit kind's measured runs: the confidence run with the fewest MACs whose accuracy is within
    ``tolerance`` of the full model's, and True; else the highest-threshold run, and False."""
    full = runs[runs["policy"] == "full model"].iloc[0]
    confidence = runs[runs["policy"].str.startswith("confidence")]
    ok = confidence[confidence["accuracy"] >= full["accuracy"] - tolerance]
    if len(ok):
        return ok.loc[ok["macs"].idxmin()], True
    return confidence.loc[confidence["parameter"].idxmax()], False


def signed_percent(value: float) -> str:
    """``+12%`` / ``−6%`` with a true minus; a value that rounds to zero is ``+0%``, never ``−0%``."""
    text = f"{value:+.0%}"
    return "+0%" if text == "-0%" else text.replace("-", "−")


def timing_conditions(report: dict[str, Any], kind: str | None = None) -> str:
    """How a report's wall clock (of exit ``kind``'s runs) was taken: device, torch threads, and the 1-minute load
    average before and after the runs (not recorded by reports older than this field)."""
    kept = report.get("kept") or {}
    machine = kept["machine"] if kind in kept.get("kinds", ()) else report["machine"]
    text = f"{machine['device']}, {machine['torch_threads']} thread{'s' if machine['torch_threads'] != 1 else ''}"
    if "load_average" in machine:
        text += ", load {:.1f}→{:.1f} on {} cores".format(*machine["load_average"], machine["cpus"])
    return text


def timing_spread(runs: pd.DataFrame, batch: int, column: str = "plain_ms") -> float:
    """The noise of a report's wall clock at one batch size: plain inference is timed once per policy (or per
    truncation, ``column="full_ms"``), paired with it, so the half-range of those timings over their median,
    ``(max - min) / (2 median)``, is how far two timings of the same work differ on that machine. A saving or
    speed-up smaller than it is indistinguishable from none."""
    rows = runs[runs["policy"] != "full model"] if "policy" in runs else runs
    plain = rows[f"{column}_b{batch}"].dropna()
    return float((plain.max() - plain.min()) / (2 * plain.median())) if len(plain) > 1 else float("nan")


def saving_noise(runs: pd.DataFrame, batch: int, column: str = "plain_ms") -> float:
    """The noise of a measured saving ``1 - exit / plain`` (or speed-up ``plain / truncated``) at one batch size:
    both timings of the ratio carry the spread ``n`` of :func:`timing_spread`, so the ratio is uncertain by about
    ``2 n``."""
    return 2 * timing_spread(runs, batch, column)


def saving_text(saving: float, noise: float, speedup: bool = False) -> str:
    """A measured wall-clock saving (or speed-up minus 1, written ``1.09×`` with ``speedup``) as the cards state
    it: its value only where it exceeds its own timing noise (:func:`~laya.analysis.statistics.saving_verdict`),
    else "within the noise"."""
    if saving_verdict(saving, noise) == "within the noise":
        return "within the noise"
    return f"{1 + saving:.2f}×" if speedup else signed_percent(saving)


__all__ = ["ALPHA_LEVELS", "EXITS_FORMAT", "EXIT_THRESHOLDS", "MeasureOptions", "best_exit", "measure", "merge_exits",
           "saving_noise", "saving_text", "signed_percent", "timing_conditions", "timing_spread", "write_exits"]
