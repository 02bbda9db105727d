"""Depth analytics of a checkpoint: ``python -m laya depth`` and the dashboard's Depth analytics page.

Data flows once: images -> hidden states (once per image set) -> one float64 head pass (logits, layer
weights, per-layer readouts) -> readouts, logit attribution, early exit, pruning, detection.

What is fitted on the training split (per-layer probes for Concat/LastLayer, Mahalanobis statistics,
LAYA's class alpha profiles) is stored beside the checkpoint as ``depth_fit.safetensors`` +
``depth_fit.json`` (never pickled; reused while the checkpoint's weights are unchanged). The results
go to ``depth.json`` + CSVs beside the checkpoint's report.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from safetensors.torch import load_file
from torch import Tensor

from laya import __version__
from laya.analysis.detection import (
    COVARIANCE,
    SCORE_LABELS,
    Mahalanobis,
    class_alpha_profile,
    detection_scores,
    detection_table,
    flag_threshold,
    roc_curve,
)
from laya.analysis.evaluate import _json_safe
from laya.analysis.exits import THRESHOLDS, compute_saved, exit_curve, exit_layers, layer_costs
from laya.analysis.head.ablation import float64_head
from laya.analysis.head.logit_attribution import LogitAttribution, class_mean_terms, logit_attribution
from laya.analysis.lens import Lens, from_readouts, lens_summary, write_lens
from laya.analysis.overflow import check_output
from laya.analysis.pruning import pruning_curves, removal_orders
from laya.analysis.readouts import LayerProbes, Readouts, depth_summary, readout_logits, readout_source
from laya.analysis.statistics import bootstrap_cis
from laya.codec import Encoded
from laya.data.datasets import Images
from laya.data.features import cached_hidden_states, hidden_states
from laya.data.ood import ood_sets
from laya.model.checkpoint import Checkpoint, atomic_write_json, atomic_write_tensors, read_meta

FIT_FILE = "depth_fit.safetensors"
FIT_META_FILE = "depth_fit.json"
DEPTH_FILE = "depth.json"
LENS_SOURCE = {"own classifier": "head classifier", "fitted probe": "linear probes"}  # readout kind -> Lens.source
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
    timing_batch: int = 64
    timing_repeats: int = 7
    thresholds: tuple[float, ...] = THRESHOLDS
    # "own": LAYA/ScalarMix read each layer through their own classifier, Concat/LastLayer through fitted probes;
    # "probes": fitted probes for every head (the same kind of readout across heads). Either way the report
    # also holds ``prediction_depth_probes`` (fitted probes, every head) for cross-head comparisons.
    readout: str = "own"


@dataclass
class DepthFit:
    """What depth analytics fit on the training split: probes (Concat/LastLayer), Mahalanobis, alpha profiles."""

    mahalanobis: Mahalanobis
    probes: LayerProbes | None = None
    alpha_profile: Tensor | None = None  # (C, L), heads whose layer weights vary per input
    info: dict[str, Any] = field(default_factory=dict)

    def save(self, directory: str | Path) -> None:
        tensors = self.mahalanobis.to_tensors() | (self.probes.to_tensors() if self.probes else {})
        if self.alpha_profile is not None:
            tensors["alpha_profile"] = self.alpha_profile
        atomic_write_tensors(Path(directory) / FIT_FILE, {k: v.float() for k, v in tensors.items()},
                             {"format": "laya-depth-fit"})  # fmt: skip
        atomic_write_json(Path(directory) / FIT_META_FILE, self.info)

    @classmethod
    def load(cls, directory: str | Path) -> DepthFit | None:
        """The stored fit, or None if there is none or it belongs to other weights than the checkpoint's."""
        directory = Path(directory)
        if not (directory / FIT_FILE).is_file() or not (directory / FIT_META_FILE).is_file():
            return None
        info = json.loads((directory / FIT_META_FILE).read_text())
        if info.get("weights_sha256") != read_meta(directory).get("weights", {}).get("sha256"):
            return None
        tensors = {k: v.double() for k, v in load_file(str(directory / FIT_FILE)).items()}
        return cls(Mahalanobis.from_tensors(tensors), LayerProbes.from_tensors(tensors), tensors.get("alpha_profile"),
                   info)  # fmt: skip


@dataclass
class HeadPass:
    """One image set through the head once (float64): ``logits (B, C)``, ``readout_probs (B, L, C)``,
    ``layer_scores (B, L)`` or None, and the hidden states it came from."""

    logits: Tensor
    readout_probs: Tensor
    layer_scores: Tensor | None
    hidden: list[Tensor]

    @property
    def readouts(self) -> Readouts:
        return Readouts(self.readout_probs, self.logits.argmax(-1))

    def probe_readouts(self, probes: LayerProbes) -> Readouts:
        """Readouts through fitted probes, whatever the head (the same kind for every head)."""
        return Readouts(torch.softmax(probes.logits(self.hidden), -1), self.logits.argmax(-1))

    def scores(self, fit: DepthFit | None) -> dict[str, Tensor]:
        return detection_scores(self.logits, self.readout_probs, self.hidden, fit.mahalanobis if fit else None,
                                self.layer_scores, fit.alpha_profile if fit else None)  # fmt: skip


def _has_own_readouts(head, hidden: Sequence[Tensor]) -> bool:
    with torch.inference_mode():
        return head.readout_logits(head.encode([h[:1] for h in hidden])) is not None


@torch.inference_mode()
def head_pass(
    checkpoint: Checkpoint, hidden: Sequence[Tensor], probes: LayerProbes | None, batch_size: int = 1024,
    own: bool = True,
) -> HeadPass:
    """:class:`HeadPass` of ``hidden`` in batches (the backbone does not run); ``own=False``: readouts
    through ``probes`` even where the head has its own classifier."""
    head64 = float64_head(checkpoint.model.head)
    logits, readouts, scores = [], [], []
    for start in range(0, len(hidden[0]), batch_size):
        h = [x[start : start + batch_size].double() for x in hidden]
        out = head64(h)
        logits.append(out.logits)
        readouts.append(torch.softmax(readout_logits(checkpoint.model.head, h, probes, own), -1))
        scores.append(out.layer_scores)
    layer_scores = torch.cat(scores) if scores[0] is not None else None
    return HeadPass(torch.cat(logits), torch.cat(readouts), layer_scores, list(hidden))


def fit_depth(checkpoint: Checkpoint, hidden: Sequence[Tensor], labels: Tensor) -> DepthFit:
    """Fit probes (for every head: the readouts of heads without a classifier of their own, and the
    same-kind readouts of every head), Mahalanobis and alpha profiles on training hidden states."""
    C = len(checkpoint.meta.classes)
    probes = LayerProbes.fit(hidden, labels, C)
    passed = head_pass(checkpoint, hidden, probes)
    alpha = passed.layer_scores
    varies = alpha is not None and bool(alpha.std(0).max() > 1e-9)
    readout_acc = passed.readouts.classes == labels.to(passed.logits.device).unsqueeze(1)
    return DepthFit(
        Mahalanobis.fit(hidden, labels, C),
        probes,
        class_alpha_profile(alpha, passed.logits.argmax(-1), C).cpu() if varies else None,
        {
            "weights_sha256": read_meta(checkpoint.path).get("weights", {}).get("sha256"),
            "n_train": len(labels),
            "covariance": COVARIANCE,
            "probes": probes is not None,
            "train_readout_accuracy": readout_acc.double().mean(0).tolist(),
            "laya_version": __version__,
        },
    )


def hidden_states_of(checkpoint: Checkpoint, batch_size: int) -> Callable[[Tensor, str], list[Tensor]]:
    """``(images (N, ...), image set name) -> L hidden states (N, D_l)`` on the model's device; a frozen
    backbone's are cached per image set (:func:`~laya.data.features.cached_hidden_states`)."""
    model = checkpoint.model
    device = next(model.parameters()).device
    extract = cached_hidden_states if checkpoint.meta.backbone.freeze else hidden_states

    def hidden_of(images: Tensor, what: str) -> list[Tensor]:
        return [h.to(device) for h in extract(model.backbone, checkpoint.preprocess, images, batch_size, what)]

    return hidden_of


def current_fit(checkpoint: Checkpoint, hidden: Sequence[Tensor], labels: Tensor) -> DepthFit:
    """The stored fit where it belongs to these weights and this many training inputs; a fit by an older
    Mahalanobis estimator (``covariance`` other than :data:`COVARIANCE`) gets a new Mahalanobis, its probes
    and α profiles kept; otherwise a new :func:`fit_depth`. A changed fit is saved beside the checkpoint."""
    fit = DepthFit.load(checkpoint.path)
    if fit is None or fit.info.get("n_train") != len(labels) or fit.probes is None:
        fit = fit_depth(checkpoint, hidden, labels)
    elif fit.info.get("covariance") != COVARIANCE:
        mahalanobis = Mahalanobis.fit(hidden, labels, len(checkpoint.meta.classes))
        fit = DepthFit(mahalanobis, fit.probes, fit.alpha_profile, fit.info | {"covariance": COVARIANCE})
    else:
        return fit
    fit.save(checkpoint.path)
    return fit


def detection_block(
    checkpoint: Checkpoint,
    fit: DepthFit,
    passed: HeadPass,
    labels: Tensor,
    hidden_of: Callable[[Tensor, str], list[Tensor]],
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


def _split(checkpoint: Checkpoint, split: str, limit: int | None, seed: int) -> Images:
    """The checkpoint's ``split``, limited to the first ``limit`` of a seeded permutation (:func:`_subset`)."""
    images = checkpoint.load_data(split)
    return images.subset(_subset(len(images), limit, seed))


def _subset(n: int, limit: int | None, seed: int) -> Tensor:
    """The first ``limit`` of a seeded permutation (all classes represented), or everything."""
    if limit is None or limit >= n:
        return torch.arange(n)
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:limit]


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
    train = _split(checkpoint, "train", options.train_limit, options.seed)
    train_hidden, train_labels = hidden_of(train.images, "train"), train.labels.to(device)
    if options.readout not in ("own", "probes"):
        raise ValueError(f"readout must be 'own' or 'probes', got {options.readout!r}")
    own = options.readout == "own"
    progress(0.1, "fitting probes and Mahalanobis")
    fit = current_fit(checkpoint, train_hidden, train_labels)
    timing["fit_s"] = time.perf_counter() - started

    progress(0.2, "test hidden states")
    test = _split(checkpoint, "test", options.limit, options.seed)
    labels = test.labels.to(device)
    passed = head_pass(checkpoint, hidden_of(test.images, "test"), fit.probes, own=own)
    readouts, final = passed.readouts, passed.logits.argmax(-1)
    correct = (final == labels).double()
    layer_correct = (readouts.classes == labels.unsqueeze(1)).double().cpu()

    progress(0.3, "logit attribution")
    attribution = logit_attribution(model.head, passed.hidden)

    progress(0.35, "early exit (timing the truncated backbone)")
    t = time.perf_counter()
    x = checkpoint.preprocess(test.images[: options.timing_batch].to(device))
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
    kind = "own classifier" if own and _has_own_readouts(model.head, passed.hidden) else "fitted probe"
    lens_ = from_readouts(passed.readout_probs, passed.logits, LENS_SOURCE[kind])
    lens_table = lens_summary(lens_, labels, classes, layer_names, f"python -m laya lens --checkpoint {checkpoint.path} "
                              f"--limit {options.limit}" + (" --readout probes" if not own else ""),
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
            f"--train-limit {options.train_limit} --limit {options.limit}"
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
        "readout_source": "the head's classifier" if kind == "own classifier" else "linear probes (training split)",
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
    return _json_safe(report), fit


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
        path = Path(directory) / DEPTH_FILE
        return cls(json.loads(path.read_text())) if path.is_file() else None

    def table(self, key: str) -> pd.DataFrame:
        """``prediction_depth``, ``logit_attribution``, ``pruning``, ``exit_curve``, ``detection``, ``roc``
        or ``readout_accuracy``."""
        data = self.data
        if key == "exit_curve":
            return pd.DataFrame(data["early_exit"]["curve"])
        if key in ("detection", "roc"):
            return pd.DataFrame(data["detection"]["table" if key == "detection" else "roc"])
        if key == "readout_accuracy":
            return pd.DataFrame(data[key]).assign(layer=data["layer_names"])
        return pd.DataFrame(data[key])

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
    LAYA/ScalarMix's own classifier where they have one)."""
    reports = _reports(directories)
    lines = [("Prediction depth and overthinking: readouts through linear probes fitted on the training split for "
              "every head (the same kind of readout, so heads compare); the last column reads LAYA/ScalarMix through "
              "their own classifier instead (depth; overthinking rate), where they have one."), "",
             ("| setting | head | test / train inputs | accuracy | prediction depth (of L), fitted probes | overthinking "
              "rate, fitted probes | overthought errors, fitted probes | own classifier: depth; overthinking |"), "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, r in reports:
        own_kind = r.data.get("readout_kind", "own classifier" if r.data["readout_source"] == "the head's classifier"
                              else "fitted probe") == "own classifier"  # fmt: skip
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
    :mod:`laya.analysis.measured`'s."""
    return "\n".join(table(directories) for table in DEPTH_TABLES.values())


SHORT = {"alpha_divergence": "α-div", "readout_disagreement": "disagree", "prediction_depth": "depth",
         "mahalanobis": "Maha", "energy": "energy", "msp": "MSP"}  # fmt: skip


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
    with the options it was run with, after :func:`current_fit` (a Mahalanobis by an older estimator is
    refitted); every other block is kept as it is. Rewrites ``depth.json`` + CSVs and returns the report.

    Raises FileNotFoundError when there is no ``depth.json`` to refresh."""
    out = Path(out or checkpoint.path)
    if not (out / DEPTH_FILE).is_file():
        raise FileNotFoundError(f"no {DEPTH_FILE} in {out} to refresh; run `python -m laya depth --checkpoint "
                                f"{checkpoint.path}` for the whole report")  # fmt: skip
    progress = progress or (lambda fraction, message: None)
    report = json.loads((out / DEPTH_FILE).read_text())
    options = DepthOptions(**{k: v for k, v in report["options"].items() if k in DepthOptions.__dataclass_fields__})
    hidden_of, started = hidden_states_of(checkpoint, options.batch_size), time.perf_counter()
    progress(0.0, "training hidden states")
    train = _split(checkpoint, "train", options.train_limit, options.seed)
    device = next(checkpoint.model.parameters()).device
    fit = current_fit(checkpoint, hidden_of(train.images, "train"), train.labels.to(device))
    progress(0.3, "test hidden states")
    test = _split(checkpoint, "test", options.limit, options.seed)
    passed = head_pass(checkpoint, hidden_of(test.images, "test"), fit.probes, own=options.readout == "own")
    progress(0.5, "detection")
    report["detection"] = detection_block(checkpoint, fit, passed, test.labels.to(device), hidden_of, options, progress)
    report["detection"]["refreshed"] = {
        "command": f"python -m laya depth --checkpoint {checkpoint.path} --only detection",
        "laya_version": __version__,
        "seconds": time.perf_counter() - started,
    }
    report["covariance"] = COVARIANCE
    write_depth(_json_safe(report), out)
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
    Uses the stored :class:`DepthFit`'s probes; fits probes (not saved) where the readouts need them and
    there is no fit."""
    options = options or LensOptions()
    if options.readout not in ("own", "probes"):
        raise ValueError(f"readout must be 'own' or 'probes', got {options.readout!r}")
    progress = progress or (lambda fraction, message: None)
    model, meta = checkpoint.model, checkpoint.meta
    device = next(model.parameters()).device
    hidden_of = hidden_states_of(checkpoint, options.batch_size)
    own = options.readout == "own"

    progress(0.0, "test hidden states")
    test = _split(checkpoint, "test", options.limit, options.seed)
    hidden = hidden_of(test.images, "test")
    fit = DepthFit.load(checkpoint.path)
    probes = fit.probes if fit else None
    fitted = ""
    if probes is None and not (own and _has_own_readouts(model.head, hidden)):
        progress(0.5, "fitting linear probes (no stored depth fit)")
        train = _split(checkpoint, "train", options.train_limit, options.seed)
        probes = LayerProbes.fit(hidden_of(train.images, "train"), train.labels.to(device), len(meta.classes))
        fitted = f" --train-limit {options.train_limit}"
    progress(0.8, "lens")
    passed = head_pass(checkpoint, hidden, probes, options.batch_size, own=own)
    kind = "own classifier" if own and _has_own_readouts(model.head, hidden) else "fitted probe"
    command = (f"python -m laya lens --checkpoint {checkpoint.path} --limit {options.limit}{fitted}"
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


@dataclass
class InputDepth(Encoded):
    """Depth analytics of one input: logit attribution, readouts (None without probes), detection scores."""

    attribution: LogitAttribution
    readouts: Readouts | None
    scores: dict[str, float]
    readout_kind: str | None = None  # "own classifier" / "fitted probe" (as depth.json's), None without readouts

    @property
    def prediction(self) -> int:
        return int(self.attribution.logits[0].argmax())

    def lens(self) -> Lens | None:
        """The per-layer lens of this input from its readouts (None without readouts)."""
        if self.readouts is None or self.readout_kind is None:
            return None
        return from_readouts(self.readouts.probs, self.attribution.logits, LENS_SOURCE[self.readout_kind])

    @classmethod
    def from_tensors(cls, tensors: dict[str, Tensor], values: dict[str, Any]) -> InputDepth:
        """Inverse of :meth:`to_tensors`. Raises ``ValueError`` for a reply that does not fit."""
        depth = super().from_tensors(tensors, values)
        if depth.readout_kind is not None and depth.readout_kind not in LENS_SOURCE:
            kinds = sorted(LENS_SOURCE)
            raise ValueError(f"InputDepth.readout_kind: one of {kinds} or None, got {depth.readout_kind!r}")
        return depth

    def exit_layer(self, threshold: float) -> int | None:
        """0-based layer where the exit policy stops this input (``L`` = runs the full model); None without readouts."""
        if self.readouts is None:
            return None
        return int(exit_layers(self.readouts.confidence, torch.tensor([threshold]))[0, 0])

    def score_table(self, thresholds: dict[str, float] | None = None) -> pd.DataFrame:
        """``score, value, threshold, flagged``: flagged where the value exceeds the threshold (the in-distribution
        95th percentile from ``depth.json``)."""
        thresholds = thresholds or {}
        return pd.DataFrame(
            [
                {
                    "score": SCORE_LABELS[k],
                    "value": v,
                    "threshold": thresholds.get(k),
                    "flagged": bool(thresholds.get(k) is not None and v > thresholds[k]),
                }
                for k, v in self.scores.items()
            ]
        )


@torch.inference_mode()
def input_depth(checkpoint: Checkpoint, image: Tensor, fit: DepthFit | None) -> InputDepth:
    """``image``: ``uint8 (C, S, S)``; one backbone pass, then every per-input analysis."""
    device = next(checkpoint.model.parameters()).device
    hidden = checkpoint.model.backbone(checkpoint.preprocess(image.unsqueeze(0).to(device)))
    attribution = logit_attribution(checkpoint.model.head, hidden)
    check_output(checkpoint.model, attribution.logits)  # non-finite logits: OutputOverflow
    scores, readouts, kind = input_scores(checkpoint, hidden, fit)
    return InputDepth(attribution, readouts, scores, kind)


@torch.inference_mode()
def input_scores(
    checkpoint: Checkpoint,
    hidden: Sequence[Tensor],
    fit: DepthFit | None,
    base: tuple[Tensor, Tensor | None] | None = None,
    only: Collection[str] | None = None,
) -> tuple[dict[str, float], Readouts | None, str | None]:
    """One input's error/OOD detection scores from its hidden states (L tensors ``(1, d_i)``, no backbone pass),
    with the readouts they use and their kind (:class:`InputDepth`'s ``scores``, ``readouts``, ``readout_kind``).

    ``base``: the head's float64 ``(logits (1, C), layer_scores (1, L) | None)`` on ``hidden`` where the caller
    already has them (Inspect's leave-one-out, whose first mask keeps every layer); else the head runs here.
    ``only``: compute just these scores (those a page shows; the readouts only where a readout score is asked
    for); None: every score the fit allows."""
    if base is None:
        out = float64_head(checkpoint.model.head)([h.double() for h in hidden])
        base = out.logits, out.layer_scores
    logits, layer_scores = base
    wanted = set(SCORE_LABELS) if only is None else set(only)
    readouts, kind = None, None
    if wanted & {"readout_disagreement", "prediction_depth"}:
        readout, kind = readout_source(checkpoint.model.head, hidden, fit.probes if fit else None)
        readouts = None if readout is None else Readouts.of(readout, logits.argmax(-1))
    scores = detection_scores(logits, None if readouts is None else readouts.probs, hidden,
                              fit.mahalanobis if fit and "mahalanobis" in wanted else None, layer_scores,
                              fit.alpha_profile if fit and "alpha_divergence" in wanted else None)  # fmt: skip
    return {k: float(v[0]) for k, v in scores.items() if k in wanted}, readouts, kind


__all__ = [
    "CSV_TABLES",
    "DEPTH_FILE",
    "DEPTH_TABLES",
    "FIT_FILE",
    "FIT_META_FILE",
    "LENS_SOURCE",
    "DepthFit",
    "DepthOptions",
    "DepthReport",
    "HeadPass",
    "InputDepth",
    "LensOptions",
    "depth_card",
    "depth_report",
    "detection_card",
    "fit_depth",
    "head_pass",
    "input_depth",
    "input_scores",
    "lens_report",
    "prediction_depth_card",
    "pruning_card",
    "run_depth",
    "write_depth",
]
