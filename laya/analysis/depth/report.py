"""Depth analytics of a checkpoint: ``python -m laya depth`` (``depth.json``), ``python -m laya lens`` (``lens.csv``)
and the dashboard's Depth analytics page.

Data flows once: images -> hidden states (once per image set, :mod:`laya.analysis.depth.data`) -> one float64 head
pass (logits, layer weights, per-layer readouts; :func:`~laya.analysis.depth.fit.head_pass`) -> readouts, logit
attribution, early exit, pruning, detection.

What is fitted on the training split is :class:`~laya.analysis.depth.fit.DepthFit`, stored beside the checkpoint.
The results go to ``depth.json`` + CSVs beside the checkpoint's report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor

from laya import __version__
from laya.analysis.depth.data import hidden_states_of, limit_flag, split_subset
from laya.analysis.depth.detection import COVARIANCE, detection_table, flag_threshold, roc_curve
from laya.analysis.depth.exits import THRESHOLDS, compute_saved, exit_curve, layer_costs, timed_batch
from laya.analysis.depth.fit import DepthFit, HeadPass, current_fit, head_pass
from laya.analysis.depth.layer_lens import LENS_SOURCE, from_readouts, lens_summary, write_lens
from laya.analysis.depth.pruning import pruning_curves, removal_orders
from laya.analysis.depth.readouts import KINDS, LayerProbes, depth_summary, has_own_readouts
from laya.analysis.depth.report_record import DEPTH_FILE, MAX_DEPTH_JSON, TABLES, checked_depth
from laya.analysis.head.logit_attribution import class_mean_terms, logit_attribution
from laya.analysis.statistics import bootstrap_cis
from laya.analysis.strict_json import json_safe
from laya.data.datasets import Images
from laya.data.ood import ood_sets
from laya.model.attached_files import attached_file, field_error, read_json
from laya.model.checkpoint import Checkpoint, atomic_write_json

Progress = Callable[[float, str], None]


@dataclass
class DepthOptions:
    """How much data, and how many resamples. ``limit``: test inputs (and inputs per OOD set)."""

    limit: int | None = 2000
    train_limit: int | None = 3000
    batch_size: int = 256
    resamples: int = 1000
    seed: int = 0
    random_orders: int = 10
    refit_steps: int = 30
    timing_batch: int = 64  # at most: fewer where one forward of them would last over exits.TIMED_SECONDS
    timing_repeats: int = 7
    thresholds: tuple[float, ...] = THRESHOLDS
    # "own": LAYA/ScalarMix read each layer through their own classifier, Concat/LastLayer through fitted probes;
    # "probes": fitted probes for every head (the same kind of readout across heads). Either way the report
    # also holds ``prediction_depth_probes`` (fitted probes, every head) for cross-head comparisons.
    readout: str = "own"


def detection_block(
    checkpoint: Checkpoint,
    fit: DepthFit,
    passed: HeadPass,
    labels: Tensor,
    hidden_of: Callable[[Images | Tensor, str], list[Tensor]],
    options: DepthOptions,
    progress: Progress,
) -> dict[str, Any]:
    """The report's ``detection``: every score's AUROC table (misclassification of the ``passed`` test inputs,
    and each OOD set of the checkpoint's dataset against them), thinned ROC curves and 5 % flag thresholds."""
    own, final, n = options.readout == "own", passed.logits.argmax(-1), len(labels)
    in_scores = passed.scores(fit)
    tables = [detection_table(in_scores, final != labels, "misclassification", options.resamples, options.seed)]
    rocs = [roc_curve(s, final != labels).assign(task="misclassification", score=k) for k, s in in_scores.items()]
    ood_counts, ood_descriptions = {}, {}
    for name, ood in ood_sets(checkpoint.meta.dataset, checkpoint.meta.input, n, options.seed).items():
        progress(0.7, f"OOD: {name}")
        task = f"OOD: {name}"
        ood_descriptions[task] = ood.description
        ood_scores = head_pass(checkpoint, hidden_of(ood.images, name), fit.probes, own=own).scores(fit)
        both = {k: torch.cat([in_scores[k].cpu(), ood_scores[k].cpu()]) for k in in_scores}
        positive = torch.cat([torch.zeros(n, dtype=torch.bool), torch.ones(len(ood.images), dtype=torch.bool)])
        tables.append(detection_table(both, positive, task, options.resamples, options.seed))
        rocs += [roc_curve(s, positive).assign(task=task, score=k) for k, s in both.items()]
        ood_counts[task] = len(ood.images)
    return {
        "table": _records(pd.concat(tables, ignore_index=True)),
        "ood_sets": ood_counts,
        "ood_descriptions": ood_descriptions,
        "flag_rate": 0.05,
        "flag_thresholds": {k: flag_threshold(v) for k, v in in_scores.items()},
        "roc": _records(_thin(pd.concat(rocs, ignore_index=True))),
    }


_CLI_OPTIONS = ("resamples", "random_orders", "timing_batch", "timing_repeats")  # flags of `depth` beyond the limits


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.to_dict("records")


def depth_report(
    checkpoint: Checkpoint, options: DepthOptions | None = None, progress: Progress | None = None
) -> tuple[dict[str, Any], DepthFit]:
    """Every depth analysis of ``checkpoint`` on its test split (see the module docstring)."""
    options = options or DepthOptions()
    progress = progress or (lambda fraction, message: None)
    model, meta, layer_names, classes = checkpoint.model, checkpoint.meta, list(checkpoint.layer_names), list(checkpoint.meta.classes)  # fmt: skip
    device = next(model.parameters()).device
    hidden_of = hidden_states_of(checkpoint, options.batch_size)
    timing: dict[str, float] = {}
    started = time.perf_counter()

    progress(0.0, "training hidden states")
    train = split_subset(checkpoint, "train", options.train_limit, options.seed)
    train_hidden, train_labels = hidden_of(train, "train"), train.labels.to(device)
    if options.readout not in ("own", "probes"):
        raise ValueError(f"readout must be 'own' or 'probes', got {options.readout!r}")
    own = options.readout == "own"
    progress(0.1, "fitting probes and Mahalanobis")
    fit = current_fit(checkpoint, train_hidden, train_labels)
    timing["fit_s"] = time.perf_counter() - started

    progress(0.2, "test hidden states")
    test = split_subset(checkpoint, "test", options.limit, options.seed)
    labels = test.labels.to(device)
    passed = head_pass(checkpoint, hidden_of(test, "test"), fit.probes, own=own)
    readouts, final = passed.readouts, passed.logits.argmax(-1)
    correct = (final == labels).double()
    layer_correct = (readouts.classes == labels.unsqueeze(1)).double().cpu()

    progress(0.3, "logit attribution")
    attribution = logit_attribution(model.head, passed.hidden)

    progress(0.35, "early exit (timing the truncated backbone)")
    t = time.perf_counter()
    first = next(test.iter_batches([torch.arange(min(options.timing_batch, len(test)))]))
    x = timed_batch(model, checkpoint.preprocess(first.to(device)))
    cost = layer_costs(model, x, options.timing_repeats)
    curve = exit_curve(passed.readout_probs, final, labels, cost, options.thresholds, options.resamples, options.seed)
    full_accuracy = float(correct.mean())
    timing["exit_s"] = time.perf_counter() - t

    progress(0.45, "pruning")
    t = time.perf_counter()
    train_pass = head_pass(checkpoint, train_hidden, fit.probes, own=own)
    orders = removal_orders(model.head, train_hidden, train_pass.layer_scores, options.random_orders, options.seed)
    pruning = pruning_curves(model.head, (train_hidden, train_labels), (passed.hidden, labels), orders, layer_names,
                             cost, options.refit_steps, options.resamples, options.seed)  # fmt: skip
    timing["pruning_s"] = time.perf_counter() - t

    progress(0.65, "detection")
    t = time.perf_counter()
    detection = detection_block(checkpoint, fit, passed, labels, hidden_of, options, progress)
    timing["detection_s"] = time.perf_counter() - t
    timing["total_s"] = time.perf_counter() - started

    progress(0.95, "summaries")
    readout_cis = bootstrap_cis(layer_correct, resamples=options.resamples, seed=options.seed)
    kind = passed.readout_kind
    lens_ = from_readouts(passed.readout_probs, passed.logits, LENS_SOURCE[kind])
    lens_table = lens_summary(lens_, labels, classes, layer_names, f"python -m laya lens --checkpoint {checkpoint.path} "
                              f"--limit {limit_flag(options.limit)}" + (" --readout probes" if not own else ""),
                              options.resamples, options.seed)  # fmt: skip
    report = {
        "laya_version": __version__,
        "checkpoint": {
            "path": str(checkpoint.path),
            "head": meta.head.name,
            "dataset": meta.dataset,
            "backbone": meta.backbone.model or meta.backbone.name,
            "seed": meta.seed,
        },
        "options": {k: v for k, v in asdict(options).items() if k != "thresholds"},
        "command": (
            f"python -m laya depth --checkpoint {checkpoint.path} "
            f"--train-limit {limit_flag(options.train_limit)} --limit {limit_flag(options.limit)}"
            + "".join(f" --{k.replace('_', '-')} {getattr(options, k)}" for k in _CLI_OPTIONS
                      if getattr(options, k) != getattr(DepthOptions, k))
            + (" --readout probes" if not own else "")
        ),  # fmt: skip
        "n_test": len(test),
        "n_train": len(train_labels),
        "covariance": COVARIANCE,
        "classes": classes,
        "layer_names": layer_names,
        "accuracy": full_accuracy,
        "readout_kind": kind,
        "readout_source": KINDS[kind],
        "readout_accuracy": [ci.to_dict() for ci in readout_cis],
        "prediction_depth": _records(depth_summary(readouts, labels, classes, options.resamples, options.seed)),
        "prediction_depth_probes": _records(
            depth_summary(passed.probe_readouts(fit.probes), labels, classes, options.resamples, options.seed)
        ),  # fitted probes for every head: the cross-head comparison
        "logit_attribution": _records(class_mean_terms(attribution, final, classes, layer_names)),
        "early_exit": {
            "layer_cost_s": cost.tolist(),
            "device": str(device),
            "torch_threads": torch.get_num_threads(),
            "timing_batch": len(x),
            "curve": _records(curve),
            "at_1pt": compute_saved(curve, full_accuracy),
        },
        "pruning": _records(pruning),
        "detection": detection,
        "lens": _records(lens_table),
        "timing": timing,
    }
    progress(1.0, "done")
    return json_safe(report), fit


def _thin(roc: pd.DataFrame, points: int = 200) -> pd.DataFrame:
    """At most ``points`` points per ROC curve (evenly spaced along it, ends kept) for the report."""
    parts = []
    for _, curve in roc.groupby(["task", "score"], sort=False):
        step = max(1, len(curve) // points)
        parts.append(pd.concat([curve.iloc[::step], curve.iloc[-1:]]).drop_duplicates())
    return pd.concat(parts, ignore_index=True)


@dataclass
class DepthReport:
    """A parsed ``depth.json`` with DataFrame views (what the CSVs hold)."""

    data: dict[str, Any]

    @classmethod
    def load(cls, directory: str | Path) -> DepthReport | None:
        """The ``depth.json`` beside a checkpoint, or None where there is none. The file is untrusted
        (:mod:`laya.model.attached_files`): confined to the setting folder, at most
        :data:`~laya.analysis.depth.report_record.MAX_DEPTH_JSON` bytes, every field the pages read checked
        (:func:`~laya.analysis.depth.report_record.checked_depth`).

        Raises:
            AttachedFileError: a file that does not read or a field of the wrong kind (its message names both).
        """
        path = attached_file(Path(directory), DEPTH_FILE)
        return None if path is None else cls(checked_depth(read_json(path, DEPTH_FILE, MAX_DEPTH_JSON)))

    def table(self, key: str) -> pd.DataFrame:
        """``prediction_depth``, ``logit_attribution``, ``pruning``, ``exit_curve``, ``detection``, ``roc``
        or ``readout_accuracy``."""
        path = {"exit_curve": ("early_exit", "curve"), "detection": ("detection", "table"),
                "roc": ("detection", "roc")}.get(key, (key,))  # fmt: skip
        rows: Any = self.data
        for part in path:
            rows = rows[part]
        columns = TABLES[path]  # its numbers as floats (null: NaN), its columns there when it has no row
        table = pd.DataFrame(rows, columns=None if rows else list(columns))
        table = table.astype({c: float for c, kind in columns.items() if kind == "finite" and c in table})
        return table.assign(layer=self.data["layer_names"]) if key == "readout_accuracy" else table

    def auroc_table(self) -> pd.DataFrame:
        """Score x task: ``AUROC [95 % CI]`` strings, with ``*`` where the paired bootstrap against max
        softmax finds a difference (``+`` better, ``−`` worse)."""
        table = self.table("detection")

        def cell(row: pd.Series) -> str:
            mark = ""
            if isinstance(row.get("verdict"), str) and "tie" not in row["verdict"]:
                mark = " (+)" if row["vs_msp"] > 0 else " (−)"
            return f"{row['auroc']:.3f} [{row['auroc_low']:.3f}, {row['auroc_high']:.3f}]{mark}"

        table = table.assign(cell=table.apply(cell, axis=1))
        wide = table.pivot(index="label", columns="task", values="cell")
        order = list(dict.fromkeys(table["label"]))
        return wide.reindex(order)[list(dict.fromkeys(table["task"]))].reset_index().rename(columns={"label": "score"})

    @property
    def exit_threshold(self) -> float | None:
        """The cheapest threshold within 1 point of full accuracy (None if none qualifies)."""
        value = self.data["early_exit"]["at_1pt"]["threshold"]
        return None if value is None else float(value)


CSV_TABLES = ("prediction_depth", "prediction_depth_probes", "readout_accuracy", "logit_attribution", "exit_curve",
              "pruning", "detection", "roc")  # fmt: skip


def write_depth(report: dict[str, Any], out: str | Path) -> Path:
    """Write ``depth.json``, one ``depth_<table>.csv`` per table and the lens (``lens.csv``) to ``out``."""
    out = Path(out)
    atomic_write_json(out / DEPTH_FILE, report)
    view = DepthReport(report)
    for key in CSV_TABLES:
        view.table(key).to_csv(out / f"depth_{key}.csv", index=False)
    if "lens" in report:
        write_lens(pd.DataFrame(report["lens"]), out)
    return out


def refresh_detection(
    checkpoint: Checkpoint, out: str | Path | None = None, progress: Progress | None = None
) -> dict[str, Any]:
    """Recompute only the ``detection`` block of the ``depth.json`` in ``out`` (default: beside the checkpoint)
    with the options it was run with, after :func:`~laya.analysis.depth.fit.current_fit` (a Mahalanobis by an
    older estimator is refitted); every other block is kept as it is. Rewrites ``depth.json`` + CSVs and returns
    the report.

    Raises FileNotFoundError when there is no ``depth.json`` to refresh."""
    out = Path(out or checkpoint.path)
    path = attached_file(out, DEPTH_FILE)  # read as untrusted; only its options are used, its detection replaced
    if path is None:
        raise FileNotFoundError(f"no {DEPTH_FILE} in {out} to refresh; run `python -m laya depth --checkpoint "
                                f"{checkpoint.path}` for the whole report")  # fmt: skip
    progress = progress or (lambda fraction, message: None)
    report = read_json(path, DEPTH_FILE, MAX_DEPTH_JSON)
    if not isinstance(report, dict) or not isinstance(report.get("options"), dict):
        raise field_error(DEPTH_FILE, "options", report.get("options") if isinstance(report, dict) else report,
                          "must be a JSON object")  # fmt: skip
    options = DepthOptions(**{k: v for k, v in report["options"].items() if k in DepthOptions.__dataclass_fields__})
    hidden_of, started = hidden_states_of(checkpoint, options.batch_size), time.perf_counter()
    progress(0.0, "training hidden states")
    train = split_subset(checkpoint, "train", options.train_limit, options.seed)
    device = next(checkpoint.model.parameters()).device
    fit = current_fit(checkpoint, hidden_of(train, "train"), train.labels.to(device))
    progress(0.3, "test hidden states")
    test = split_subset(checkpoint, "test", options.limit, options.seed)
    passed = head_pass(checkpoint, hidden_of(test, "test"), fit.probes, own=options.readout == "own")
    progress(0.5, "detection")
    report["detection"] = detection_block(checkpoint, fit, passed, test.labels.to(device), hidden_of, options, progress)
    report["detection"]["refreshed"] = {
        "command": f"python -m laya depth --checkpoint {checkpoint.path} --only detection",
        "laya_version": __version__,
        "seconds": time.perf_counter() - started,
    }
    report["covariance"] = COVARIANCE
    write_depth(json_safe(report), out)
    progress(1.0, "done")
    return report


@dataclass
class LensOptions:
    """``python -m laya lens``: the test inputs (the first ``limit`` of depth's seeded permutation, so the
    same inputs as a ``depth`` run with that limit), probes fitted on ``train_limit`` training inputs only
    where no stored fit has them, and the readout kind as in :class:`DepthOptions`."""

    limit: int | None = 2000
    train_limit: int | None = 3000
    batch_size: int = 256
    resamples: int = 1000
    seed: int = 0
    readout: str = "own"


def lens_report(checkpoint: Checkpoint, options: LensOptions | None = None, progress: Progress | None = None) -> pd.DataFrame:
    """Only the lens of :func:`depth_report` (its ``lens.csv``): test hidden states once, one float64 head pass.
    Uses the stored :class:`~laya.analysis.depth.fit.DepthFit`'s probes; fits probes (not saved) where the
    readouts need them and there is no fit."""
    options = options or LensOptions()
    if options.readout not in ("own", "probes"):
        raise ValueError(f"readout must be 'own' or 'probes', got {options.readout!r}")
    progress = progress or (lambda fraction, message: None)
    model, meta = checkpoint.model, checkpoint.meta
    device = next(model.parameters()).device
    hidden_of = hidden_states_of(checkpoint, options.batch_size)
    own = options.readout == "own"

    progress(0.0, "test hidden states")
    test = split_subset(checkpoint, "test", options.limit, options.seed)
    hidden = hidden_of(test, "test")
    fit = DepthFit.load(checkpoint.path, checkpoint)
    probes = fit.probes if fit else None
    fitted = ""
    if probes is None and not (own and has_own_readouts(model.head, hidden)):
        progress(0.5, "fitting linear probes (no stored depth fit)")
        train = split_subset(checkpoint, "train", options.train_limit, options.seed)
        probes = LayerProbes.fit(hidden_of(train, "train"), train.labels.to(device), len(meta.classes))
        fitted = f" --train-limit {limit_flag(options.train_limit)}"
    progress(0.8, "lens")
    passed = head_pass(checkpoint, hidden, probes, options.batch_size, own=own)
    kind = passed.readout_kind
    command = (f"python -m laya lens --checkpoint {checkpoint.path} --limit {limit_flag(options.limit)}{fitted}"
               + (" --readout probes" if not own else ""))  # fmt: skip
    table = lens_summary(from_readouts(passed.readout_probs, passed.logits, LENS_SOURCE[kind]), test.labels,
                         list(meta.classes), list(checkpoint.layer_names), command, options.resamples, options.seed)  # fmt: skip
    progress(1.0, "done")
    return table


def run_depth(
    checkpoint: Checkpoint | str | Path,
    options: DepthOptions | None = None,
    progress: Progress | None = None,
    out: str | Path | None = None,
) -> dict[str, Any]:
    """Analyse a checkpoint (or the one at a path) and write ``depth.json`` + CSVs to ``out`` (default: beside it)."""
    from laya.model.checkpoint import load_checkpoint

    if not isinstance(checkpoint, Checkpoint):
        checkpoint = load_checkpoint(checkpoint)
    report, _ = depth_report(checkpoint, options, progress)
    write_depth(report, out or checkpoint.path)
    return report


__all__ = [
    "CSV_TABLES",
    "DEPTH_FILE",
    "DepthOptions",
    "DepthReport",
    "LensOptions",
    "depth_report",
    "lens_report",
    "run_depth",
    "write_depth",
]
