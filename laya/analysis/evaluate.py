"""Dataset-level evaluation of a checkpoint: accuracy and every interpretability metric.

``evaluate(checkpoint, data)`` runs, batch by batch on the model's device (images streamed or in
memory, hidden states computed once per batch): predictions; each applicable attribution method's
layer scores; leave-one-layer-out drops under every ablation mode the head supports; top-k
deletion curves. These per-input arrays are gathered on the CPU, then summarised once:
faithfulness (Spearman) and Deletion@1 per method and mode, deletion curves, class-wise depth
profiles. Under ``torchrun`` each process computes every ``W``-th batch and the arrays are
gathered in batch order, so the report equals the single-process one. The result is a
JSON-serialisable dict (see :class:`laya.analysis.report.Report` for reading it back).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from laya import __version__
from laya.analysis.ablation import deletion_curve, leave_one_out
from laya.analysis.attribution import intrinsic_method, layer_attributions, methods_for
from laya.analysis.faithfulness import summarise
from laya.analysis.profiles import class_layer_profile, layer_profile
from laya.data.datasets import Images, batch_indices
from laya.data.features import cached_hidden_states, iter_hidden_states
from laya.model.checkpoint import Checkpoint
from laya.model.devices import check_precision, gather_batches, model_device, process_rank

Progress = Callable[[float, str], None]


@dataclass
class EvalOptions:
    """What to compute. ``modes``: ablation modes (those the head lacks are skipped)."""

    modes: tuple[str, ...] = ("zero", "mean", "renormalise")
    ig_steps: int = 32
    batch_size: int = 500
    limit: int | None = None  # evaluate the first ``limit`` inputs only
    seed: int = 0  # of the random-ranking control
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
    checkpoint: Checkpoint, data: Images, options: EvalOptions | None = None, progress: Progress | None = None
) -> dict:
    """Evaluate ``checkpoint`` on ``data``; returns the report dict (see module docstring)."""
    options = options or EvalOptions()
    progress = progress or (lambda fraction, message: None)
    model, meta = checkpoint.model, checkpoint.meta
    if tuple(data.classes) != tuple(meta.classes):
        raise ValueError(f"dataset classes {list(data.classes)} differ from the checkpoint's {list(meta.classes)}")
    check_precision(options.precision)
    if options.limit:
        data = data.subset(torch.arange(min(options.limit, len(data))))
    head, layer_names = model.head, list(model.layer_names)
    modes = [m for m in options.modes if m in head.modes]
    methods = methods_for(head)
    started = time.perf_counter()
    cat, timing = _per_input(checkpoint, data, options, methods, modes, progress)
    n = len(data)
    predictions = cat["prediction"]
    timing["total_s"] = time.perf_counter() - started
    progress(0.97, "summaries")

    primary = intrinsic_method(head) or "integrated_gradients"
    report = {
        "laya_version": __version__,
        "checkpoint": {
            "path": str(checkpoint.path),
            "head": meta.head.name,
            "backbone": meta.backbone.model or meta.backbone.name,
            "dataset": meta.dataset,
            "seed": meta.seed,
            "train_metrics": {k: v for k, v in meta.metrics.items() if k != "history"},
        },
        "dataset": {"name": meta.dataset, "split": "test", "n": n},
        "classes": list(data.classes),
        "layer_names": layer_names,
        **classification_metrics(data.labels, predictions, tuple(data.classes)),
        "methods": methods,
        "primary_method": primary,
        "modes": modes,
        "options": {
            "ig_steps": options.ig_steps,
            "batch_size": options.batch_size,
            "limit": options.limit,
            "seed": options.seed,
        },
        "faithfulness": {
            mode: {method: summarise(cat[f"scores/{method}"], cat[f"drops/{mode}"]).to_dict() for method in methods}
            for mode in modes
        },
        "deletion_curves": {
            mode: {method: cat[f"curve/{mode}/{method}"].mean(0).tolist() for method in methods} for mode in modes
        },
        "loo": {
            mode: {
                "mean_drop": cat[f"drops/{mode}"].mean(0).tolist(),
                "flip_rate": cat[f"flipped/{mode}"].double().mean(0).tolist(),
            }
            for mode in modes
        },
        "profiles": {
            "layer": {
                method: layer_profile(cat[f"scores/{method}"], layer_names).to_dict("records")
                for method in methods
                if method != "random"
            },
            "class_layer": class_layer_profile(
                cat[f"scores/{primary}"], data.labels, predictions, data.classes, layer_names
            ).to_dict("records"),
            "class_loo": class_layer_profile(
                cat["drops/zero"], data.labels, predictions, data.classes, layer_names
            ).to_dict("records")
            if "zero" in modes
            else [],
        },
        "timing": {**timing, "n": n, "torch_threads": torch.get_num_threads()},  # of process 0 under torchrun
    }
    progress(1.0, "done")
    return _json_safe(report)


def _per_input(
    checkpoint: Checkpoint,
    data: Images,
    options: EvalOptions,
    methods: list[str],
    modes: list[str],
    progress: Progress,
) -> tuple[dict[str, Tensor], dict[str, float]]:
    """Per-input arrays on the CPU: ``prediction (N,)``, ``scores/<method> (N, L)``, ``drops/<mode>`` and
    ``flipped/<mode>`` ``(N, L)``, ``curve/<mode>/<method> (N, L + 1)``; and the time each part took.

    Batch ``b`` (seeded ``seed * 1_000_003 + b`` for the random control) runs on process ``b mod W``.
    """
    model, head, preprocess = checkpoint.model, checkpoint.model.head, checkpoint.preprocess
    rank, world = process_rank()
    batches = batch_indices(len(data), options.batch_size)
    mine = list(range(rank, len(batches), world))
    run = mine or [0]  # a process without a batch runs batch 0 for the arrays' shapes, then keeps no row
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
            model.backbone, preprocess, data, options.batch_size, precision=options.precision
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
        progress(0.05 + 0.9 * i / len(run), f"metrics, batch {b + 1}/{len(batches)}")
        h = [x.to(device) for x in hidden]
        with torch.inference_mode():
            out = head(h)
        pred = out.logits.argmax(-1)
        parts.setdefault("prediction", []).append(pred)
        t = tick("head_s", t)
        scores = {}
        for method in methods:
            scores[method] = layer_attributions(
                head, h, method, pred, out.layer_scores, options.ig_steps, seed=options.seed * 1_000_003 + b
            ).double()
            parts.setdefault(f"scores/{method}", []).append(scores[method])
            t = tick(f"attribution_{method}_s", t)
        for mode in modes:
            loo = leave_one_out(head, h, mode)
            parts.setdefault(f"drops/{mode}", []).append(loo.drops)
            parts.setdefault(f"flipped/{mode}", []).append(loo.flipped)
            t = tick(f"loo_{mode}_s", t)
            for method in methods:
                parts.setdefault(f"curve/{mode}/{method}", []).append(deletion_curve(head, h, scores[method], mode))
            t = tick("deletion_curves_s", t)
    local = {k: torch.cat(v)[: sum(len(batches[b]) for b in mine)] for k, v in parts.items()}
    if world > 1:
        local = {k: gather_batches(v, [len(b) for b in batches], device) for k, v in sorted(local.items())}
    return {k: v.cpu() for k, v in local.items()}, timing


def _json_safe(value):
    """Replace NaN/inf by None so the report is strict JSON."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


__all__ = ["EvalOptions", "classification_metrics", "evaluate"]
