"""Dataset-level evaluation of a checkpoint: accuracy and every interpretability metric, with CIs.

``evaluate(checkpoint, data)`` runs batch by batch on the model's device (images streamed or in
memory, hidden states computed once per batch; under ``torchrun`` each process takes every ``W``-th
batch and the arrays are gathered in batch order, so the report equals the single-process one):
predictions; each applicable attribution method's layer scores under each reduction (signed,
magnitude); leave-one-layer-out drops under every ablation mode the head supports; top-k
deletion curves. From these per-input arrays (computed once) come the per-input faithfulness
metrics (:mod:`laya.analysis.head.faithfulness`) and every figure of the report with a seeded
percentile bootstrap CI over inputs (one ``(R, n) @ (n, K)`` product for all mean-type figures,
:func:`laya.analysis.statistics.mean_intervals`), plus paired bootstraps between methods.
The result is a JSON-serialisable dict (see :class:`laya.analysis.report.Report`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from laya import __version__
from laya.analysis.head.ablation import deletion_curve, leave_one_out
from laya.analysis.head.attribution import (
    IG_BASELINES,
    IG_RULE,
    REDUCTIONS,
    attributions_by_reduction,
    ig_description,
    intrinsic_method,
    methods_for,
)
from laya.analysis.head.faithfulness import (
    EPSILON,
    HEADLINE_METRIC,
    METRICS,
    MIN_INFORMATIVE,
    NOT_APPLICABLE,
    ROBUST_METRICS,
    TRIM,
    per_input_metrics,
)
from laya.analysis.head.profiles import class_layer_profile, layer_profile
from laya.analysis.sample import sample_indices
from laya.analysis.statistics import (
    Interval,
    bootstrap_ci,
    mean_intervals,
    paired_mean_differences,
    resample_counts,
    robust_intervals,
)
from laya.analysis.strict_json import json_safe
from laya.data.datasets import Images, batch_indices
from laya.data.features import cached_hidden_states, iter_hidden_states
from laya.model.checkpoint import Checkpoint
from laya.model.devices import check_precision, model_device
from laya.model.heads import ABLATION_MODES, DEFAULT_MODE
from laya.model.sharding import Shard

Progress = Callable[[float, str], None]


@dataclass
class EvalOptions:
    """What to compute. ``modes``: ablation modes (those the head lacks are skipped)."""

    modes: tuple[str, ...] = ABLATION_MODES
    reductions: tuple[str, ...] = REDUCTIONS
    ig_steps: int = 32
    batch_size: int = 500
    limit: int | None = None  # evaluate a class-balanced random sample of ``limit`` inputs (drawn with ``seed``)
    seed: int = 0  # of the random-ranking control and of the bootstrap
    resamples: int = 1000  # bootstrap resamples for every CI
    epsilon: float = EPSILON  # |drop| above which a layer is informative
    precision: str = "float32"  # "bf16": the backbone runs under autocast (the head's analyses stay float32/64)


def classification_metrics(labels: Tensor, predictions: Tensor, classes: tuple[str, ...]) -> dict:
    """Accuracy, macro-F1, per-class accuracy (recall) and confusion matrix (rows = true class)."""
    C = len(classes)
    confusion = torch.bincount(labels * C + predictions, minlength=C * C).view(C, C).double()
    tp = confusion.diag()
    support, predicted = confusion.sum(1), confusion.sum(0)
    f1 = torch.where(support + predicted > 0, 2 * tp / (support + predicted).clamp(min=1), torch.zeros_like(tp))
    return {
        "accuracy": float(tp.sum() / confusion.sum()),
        "macro_f1": float(f1[support > 0].mean()),
        "per_class_accuracy": {c: float(tp[i] / support[i]) if support[i] else None for i, c in enumerate(classes)},
        "class_counts": {c: int(support[i]) for i, c in enumerate(classes)},
        "confusion_matrix": confusion.long().tolist(),
    }


def evaluate(
    checkpoint: Checkpoint,
    data: Images,
    options: EvalOptions | None = None,
    progress: Progress | None = None,
    per_input: dict[str, Tensor] | None = None,
) -> dict:
    """Evaluate ``checkpoint`` on ``data``; returns the report dict (see module docstring).

    ``per_input``: if given, filled with the per-input arrays the report's figures summarise
    (``correct`` and ``faithfulness/<mode>/<reduction>/<method>/<metric>``, each ``(N,)``), for
    paired comparisons across heads (:mod:`laya.training.suite`).
    """
    options = options or EvalOptions()
    progress = progress or (lambda fraction, message: None)
    model, meta = checkpoint.model, checkpoint.meta
    if tuple(data.classes) != tuple(meta.classes):
        raise ValueError(f"dataset classes {list(data.classes)} differ from the checkpoint's {list(meta.classes)}")
    check_precision(options.precision)
    if options.limit:  # never "the first n": a class-sorted folder would lose whole classes
        data = data.subset(sample_indices(data.labels, options.limit, options.seed))
    head = model.head
    modes = [m for m in options.modes if m in head.modes]
    if not modes:
        raise ValueError(
            f"none of the ablation modes {list(options.modes)} applies to this head; it has {list(head.modes)}"
        )
    methods = methods_for(head)
    reductions = list(options.reductions)
    started = time.perf_counter()
    cat, timing = _per_input(checkpoint, data, options, methods, modes, reductions, progress)
    timing["total_s"] = time.perf_counter() - started
    progress(0.92, "summaries and bootstrap CIs")
    summary_started = time.perf_counter()
    report = build_report(checkpoint, data, cat, modes, methods, reductions, options, per_input, timing)
    timing["summary_s"] = time.perf_counter() - summary_started
    report["timing"] = {**timing, "n": len(data), "torch_threads": torch.get_num_threads()}  # process 0's
    progress(1.0, "done")
    return json_safe(report)


def _per_input(
    checkpoint: Checkpoint,
    data: Images,
    options: EvalOptions,
    methods: list[str],
    modes: list[str],
    reductions: list[str],
    progress: Progress,
) -> tuple[dict[str, Tensor], dict[str, float]]:
    """Per-input arrays on the CPU: ``prediction (N,)``, ``scores/<reduction>/<method> (N, L)``,
    ``drops/<mode>`` and ``flipped/<mode>`` ``(N, L)``, ``curve/<mode>/<reduction>/<method> (N, L + 1)``
    (headline reduction only: each curve costs one LOO); and the time each part took.

    Batch ``b`` (seeded ``seed * 1_000_003 + b`` for the random control) runs on process ``b mod W``;
    under ``torchrun`` the arrays are gathered in batch order, so every process returns the same arrays.
    """
    model, head, preprocess = checkpoint.model, checkpoint.model.head, checkpoint.preprocess
    batches = batch_indices(len(data), options.batch_size)
    shard = Shard.of(batches)
    run = shard.run  # a process without a batch runs batch 0 for the arrays' shapes, then keeps no row
    timing = {"hidden_states_s": 0.0, "head_s": 0.0, "deletion_curves_s": 0.0}
    timing.update({f"attribution_{m}_s": 0.0 for m in methods} | {f"loo_{m}_s": 0.0 for m in modes})

    def tick(key: str, since: float) -> float:
        now = time.perf_counter()
        timing[key] += now - since
        return now

    t = time.perf_counter()
    progress(0.0, "hidden states")
    if checkpoint.meta.backbone.freeze:  # cached features, memory-mapped from disk
        features = cached_hidden_states(
            model.backbone, preprocess, data, options.batch_size, precision=options.precision, shard=True
        )
        hidden_batches = ([x[batches[b]] for x in features] for b in run)
    else:
        selected = [batches[b] for b in run]
        hidden_batches = iter_hidden_states(
            model.backbone, preprocess, data, options.batch_size, precision=options.precision, batches=selected
        )
    t = tick("hidden_states_s", t)
    parts: dict[str, list[Tensor]] = {}
    device = model_device(head)
    for i, (b, hidden) in enumerate(zip(run, hidden_batches, strict=True)):
        t = tick("hidden_states_s", t)
        progress(0.05 + 0.85 * i / len(run), f"metrics, batch {b + 1}/{len(batches)}")
        h = [x.to(device) for x in hidden]
        with torch.inference_mode():
            out = head(h)
        pred = out.logits.argmax(-1)
        parts.setdefault("prediction", []).append(pred)
        t = tick("head_s", t)
        scores: dict[tuple[str, str], Tensor] = {}
        for method in methods:
            by_reduction = attributions_by_reduction(
                head, h, method, pred, out.layer_scores, options.ig_steps, options.seed * 1_000_003 + b, reductions
            )
            as_double = {id(v): v.double() for v in by_reduction.values()}  # one tensor if reductions coincide
            for reduction, values in by_reduction.items():
                scores[reduction, method] = as_double[id(values)]
                parts.setdefault(f"scores/{reduction}/{method}", []).append(scores[reduction, method])
            t = tick(f"attribution_{method}_s", t)
        for mode in modes:
            loo = leave_one_out(head, h, mode)
            parts.setdefault(f"drops/{mode}", []).append(loo.drops)
            parts.setdefault(f"flipped/{mode}", []).append(loo.flipped)
            t = tick(f"loo_{mode}_s", t)
            for method in methods:
                curve = deletion_curve(head, h, scores[reductions[0], method], mode)
                parts.setdefault(f"curve/{mode}/{reductions[0]}/{method}", []).append(curve)
            t = tick("deletion_curves_s", t)
    gathered = {k: shard.gather(parts[k]) for k in sorted(parts)}  # the same order in every process
    return {k: gathered[k].cpu() for k in parts}, timing


def _interval(ci: Interval) -> dict[str, float]:
    return {"estimate": ci.estimate, "low": ci.low, "high": ci.high}


def macro_f1_interval(labels: Tensor, predictions: Tensor, classes: int, resamples: int, seed: int) -> Interval:
    """Bootstrap CI of macro-F1 (a ratio of counts, not a mean): one bincount over all resamples at once."""
    cells = (labels * classes + predictions).long()  # (n,) confusion cell of each input

    def statistic(rows: Tensor) -> Tensor:  # (R, n) cells -> (R,)
        R = rows.shape[0]
        offset = torch.arange(R, device=rows.device).unsqueeze(1) * classes * classes
        confusion = torch.bincount((rows + offset).flatten(), minlength=R * classes * classes).view(R, classes, classes)
        confusion = confusion.double()
        tp, support, predicted = confusion.diagonal(dim1=1, dim2=2), confusion.sum(2), confusion.sum(1)
        f1 = 2 * tp / (support + predicted).clamp(min=1)
        present = (support > 0).double()
        return (f1 * present).sum(1) / present.sum(1)

    return bootstrap_ci(cells, statistic, resamples, seed)


def build_report(
    checkpoint: Checkpoint,
    data: Images,
    cat: dict[str, Tensor],
    modes: list[str],
    methods: list[str],
    reductions: list[str],
    options: EvalOptions,
    per_input: dict[str, Tensor] | None = None,
    timing: dict[str, float] | None = None,
) -> dict:
    """The report dict from the per-input arrays ``cat`` (``scores/…``, ``drops/…``, ``curve/…``).
    ``timing``, if given, receives ``bootstrap_s``: the seconds spent resampling (CIs and paired tests)."""
    meta, layer_names = checkpoint.meta, list(checkpoint.model.layer_names)
    labels, predictions = data.labels, cat["prediction"].cpu()
    classes = list(data.classes)
    L = len(layer_names)

    # Every mean-type figure is one column of a per-input matrix; one bootstrap gives all their CIs.
    columns: dict[str, Tensor] = {"correct": (predictions == labels).double()}
    nan = torch.tensor(float("nan"), dtype=torch.float64)
    for c, name in enumerate(classes):
        columns[f"class_accuracy/{name}"] = torch.where(labels == c, columns["correct"], nan)
    for mode in modes:
        drops = cat[f"drops/{mode}"].double().cpu()
        for i in range(L):
            columns[f"loo/{mode}/mean_drop/{i}"] = drops[:, i]
            columns[f"loo/{mode}/flip_rate/{i}"] = cat[f"flipped/{mode}"][:, i].double().cpu()
        for reduction in reductions:
            for method in methods:
                metrics = per_input_metrics(cat[f"scores/{reduction}/{method}"], drops, options.epsilon)
                for metric in METRICS:
                    columns[f"faithfulness/{mode}/{reduction}/{method}/{metric}"] = metrics[metric]
                if f"curve/{mode}/{reduction}/{method}" in cat:
                    curve = cat[f"curve/{mode}/{reduction}/{method}"].double().cpu()
                    for k in range(L):
                        columns[f"curve/{mode}/{reduction}/{method}/{k}"] = curve[:, k]
    for reduction in reductions:
        for method in methods:
            values = cat[f"scores/{reduction}/{method}"].double().cpu()
            for i in range(L):
                columns[f"profile/{reduction}/{method}/{i}"] = values[:, i]
    names = list(columns)
    matrix = torch.stack([columns[k] for k in names], dim=1)  # (n, K)
    bootstrap_started = time.perf_counter()
    intervals = dict(zip(names, mean_intervals(matrix, options.resamples, options.seed)))
    bootstrap_s = time.perf_counter() - bootstrap_started
    ci = {k: _interval(v) for k, v in intervals.items()}

    faithfulness: dict = {}
    counts: dict[bytes, Tensor] = {}  # resample counts per set of testable inputs (one per mode), shared by methods
    for mode in modes:
        for reduction in reductions:
            for method in methods:
                prefix = f"faithfulness/{mode}/{reduction}/{method}"
                testable = int((~torch.isnan(columns[f"{prefix}/top1"])).sum())
                entry = {
                    "status": None if testable else NOT_APPLICABLE,
                    "n": len(labels),
                    "n_testable": testable,  # inputs with >= MIN_INFORMATIVE informative layers
                    "n_spearman": int((~torch.isnan(columns[f"{prefix}/spearman"])).sum()),
                }
                for metric in METRICS:
                    entry[metric] = ci[f"{prefix}/{metric}"] if testable else None
                ratios = columns[f"{prefix}/deletion_at_1_norm"]
                present = ~torch.isnan(ratios)  # the testable inputs
                companions = None
                if testable:
                    key = present.numpy().tobytes()
                    if key not in counts:
                        counts[key] = resample_counts(testable, options.resamples, options.seed)
                    companions = robust_intervals(ratios[present], TRIM, counts[key])
                for k, metric in enumerate(ROBUST_METRICS):
                    entry[metric] = _interval(companions[k]) if companions else None
                faithfulness.setdefault(mode, {}).setdefault(reduction, {})[method] = entry

    # Paired bootstraps over inputs: the intrinsic scores vs each post-hoc method, every method vs the
    # random control, and signed vs magnitude for each post-hoc method (same resamples as the CIs).
    intrinsic = intrinsic_method(checkpoint.model.head)
    pairs: list[tuple[str, str, str, str, str, str]] = []  # (mode, metric, red_a, a, red_b, b)
    for mode in modes:
        for metric in ("spearman_eps", "top1", "deletion_at_1_norm", "spearman"):
            for reduction in reductions:
                for method in methods:
                    if method != "random":
                        pairs.append((mode, metric, reduction, method, reduction, "random"))
                    if intrinsic and method not in (intrinsic, "random"):
                        pairs.append((mode, metric, reduction, intrinsic, reduction, method))
            for method in methods:
                if method not in (intrinsic, "random") and len(reductions) > 1:
                    pairs.append((mode, metric, reductions[0], method, reductions[1], method))
    index = {k: i for i, k in enumerate(names)}
    tested = [p for p in pairs if faithfulness[p[0]][p[2]][p[3]]["status"] is None]
    bootstrap_started = time.perf_counter()
    results = paired_mean_differences(
        matrix,
        [
            (index[f"faithfulness/{m}/{ra}/{a}/{metric}"], index[f"faithfulness/{m}/{rb}/{b}/{metric}"])
            for m, metric, ra, a, rb, b in tested
        ],
        options.resamples,
        options.seed,
    )
    macro_f1_ci = macro_f1_interval(labels, predictions, len(classes), options.resamples, options.seed)
    bootstrap_s += time.perf_counter() - bootstrap_started
    if timing is not None:
        timing["bootstrap_s"] = bootstrap_s
    comparisons = [  # a pair undefined on every input (a constant ranking throughout: random weights) has no test
        {"mode": m, "metric": metric, "a": a, "reduction_a": ra, "b": b, "reduction_b": rb, **r.to_dict()}
        for (m, metric, ra, a, rb, b), r in zip(tested, results)
        if math.isfinite(r.p_value) and math.isfinite(r.difference.low) and math.isfinite(r.difference.high)
    ]
    if per_input is not None:
        per_input.update({k: v for k, v in columns.items() if k == "correct" or k.startswith("faithfulness/")})

    primary = intrinsic or "integrated_gradients"
    headline_mode = DEFAULT_MODE if DEFAULT_MODE in modes else modes[0]
    return {
        "laya_version": __version__,
        "checkpoint": {
            "path": str(checkpoint.path),
            "head": meta.head.name,
            "backbone": meta.backbone.model or meta.backbone.name,
            "dataset": meta.dataset,
            "seed": meta.seed,
            "train_metrics": {k: v for k, v in meta.metrics.items() if k != "history"},
        },
        "dataset": {"name": meta.dataset, "split": "test", "n": len(labels)},
        "classes": classes,
        "layer_names": layer_names,
        **classification_metrics(labels, predictions, tuple(classes)),
        "accuracy_ci": ci["correct"],
        "macro_f1_ci": _interval(macro_f1_ci),
        "per_class_accuracy_ci": {c: ci[f"class_accuracy/{c}"] for c in classes},
        "methods": methods,
        "primary_method": primary,
        "modes": modes,
        "reductions": reductions,
        "headline": {"mode": headline_mode, "reduction": reductions[0], "metric": HEADLINE_METRIC},
        "options": {
            "ig_steps": options.ig_steps,
            "batch_size": options.batch_size,
            "limit": options.limit,
            "seed": options.seed,
            "resamples": options.resamples,
            "epsilon": options.epsilon,
            "min_informative": MIN_INFORMATIVE,
            "ci": "95% percentile bootstrap over test inputs",
            "robust": f"Deletion@1 / oracle: median and {TRIM:.0%}-trimmed mean over the testable inputs "
            "(percentile bootstrap over them)",
            "trim": TRIM,
            "ig_baselines": IG_BASELINES,
            "ig_rule": IG_RULE,
            "ig": ig_description(options.ig_steps),
            "gradients": "float64, target probability in logit-margin form (no underflow)",
        },
        "faithfulness": faithfulness,
        "comparisons": comparisons,
        "deletion_curves": {  # headline reduction only
            mode: {
                reductions[0]: {
                    method: [ci[f"curve/{mode}/{reductions[0]}/{method}/{k}"] for k in range(L)] for method in methods
                }
            }
            for mode in modes
        },
        "loo": {
            mode: {
                "mean_drop": [ci[f"loo/{mode}/mean_drop/{i}"]["estimate"] for i in range(L)],
                "mean_drop_ci": [ci[f"loo/{mode}/mean_drop/{i}"] for i in range(L)],
                "flip_rate": [ci[f"loo/{mode}/flip_rate/{i}"]["estimate"] for i in range(L)],
                "flip_rate_ci": [ci[f"loo/{mode}/flip_rate/{i}"] for i in range(L)],
            }
            for mode in modes
        },
        "profiles": {
            "layer": {
                reduction: {
                    method: [
                        {
                            **record,
                            "ci_low": ci[f"profile/{reduction}/{method}/{i}"]["low"],
                            "ci_high": ci[f"profile/{reduction}/{method}/{i}"]["high"],
                        }
                        for i, record in enumerate(
                            layer_profile(cat[f"scores/{reduction}/{method}"], layer_names).to_dict("records")
                        )
                    ]
                    for method in methods
                    if method != "random"
                }
                for reduction in reductions
            },
            "class_layer": class_layer_profile(
                cat[f"scores/{reductions[0]}/{primary}"], labels, predictions, classes, layer_names
            ).to_dict("records"),
            "class_loo_mode": headline_mode,
            "class_loo": class_layer_profile(
                cat[f"drops/{headline_mode}"], labels, predictions, classes, layer_names
            ).to_dict("records"),
        },
    }


__all__ = ["EvalOptions", "build_report", "classification_metrics", "evaluate", "macro_f1_interval"]
