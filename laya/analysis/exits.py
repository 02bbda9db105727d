"""Anytime prediction: a confidence-threshold early exit over the per-layer readouts.

Policy for threshold ``t``: run the backbone layer by layer and stop at the first layer ``k`` whose
readout confidence ``max_c p_k(c | x) >= t``, predicting that readout's class; if no layer is
confident enough, run the whole network and use the head's prediction. The cost of exiting at layer
``k`` is *measured*: the time of ``Backbone.forward_to(x, k)`` (the backbone run only up to that layer),
as a fraction of the full forward pass (``cost[L]``, backbone + head).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from laya.analysis.statistics import bootstrap_cis
from laya.model.classifier import LayerwiseClassifier

THRESHOLDS: tuple[float, ...] = tuple(np.round(np.concatenate([np.linspace(0.5, 0.95, 10), [0.97, 0.99, 0.995, 0.999, 1.01]]), 4))  # fmt: skip


def exit_layers(confidence: Tensor, thresholds: Tensor) -> Tensor:
    """``(T, B)`` 0-based layer each input exits at for each threshold; ``L`` = no exit (the full head).

    ``confidence``: ``(B, L)`` readout confidence per layer; ``thresholds``: ``(T,)``.
    """
    L = confidence.shape[1]
    confident = confidence.unsqueeze(0) >= thresholds.to(confidence).view(-1, 1, 1)  # (T, B, L)
    first = torch.where(confident.any(-1), confident.double().argmax(-1), torch.full_like(confident[..., 0], L, dtype=torch.long))  # fmt: skip
    return first.long()


def exit_predictions(readout_classes: Tensor, final: Tensor, layers: Tensor) -> Tensor:
    """``(T, B)`` the class predicted at each exit: the readout at ``layers`` or ``final`` where ``layers = L``."""
    T = layers.shape[0]
    extended = torch.cat([readout_classes, final.unsqueeze(1)], dim=1)  # (B, L + 1)
    return extended.unsqueeze(0).expand(T, -1, -1).gather(2, layers.unsqueeze(-1))[..., 0]


@torch.inference_mode()
def layer_costs(model: LayerwiseClassifier, x: Tensor, repeats: int = 7) -> Tensor:
    """``(L + 1,)`` measured seconds per input: ``forward_to`` layer k (k < L) and the full model (k = L).

    ``x``: a preprocessed batch on the model's device. After one warm-up of each, the runs are timed
    round-robin ``repeats`` times and the fastest time of each is kept (robust to other load on the machine).
    """
    if repeats < 1 or len(x) == 0:
        raise ValueError(f"need repeats >= 1 and a non-empty batch, got {repeats} and {len(x)} inputs")
    runs = [lambda k=k: model.backbone.forward_to(x, k) for k in range(len(model.layer_names))] + [lambda: model(x)]
    for run in runs:
        run()  # warm-up
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for k, run in enumerate(runs):
            if x.is_cuda:
                torch.cuda.synchronize(x.device)
            start = time.perf_counter()
            run()
            if x.is_cuda:
                torch.cuda.synchronize(x.device)
            best[k] = min(best[k], time.perf_counter() - start)
    return torch.tensor(best, dtype=torch.float64) / len(x)


def exit_curve(
    readout_probs: Tensor,
    final: Tensor,
    labels: Tensor,
    cost: Tensor,
    thresholds: Sequence[float] = THRESHOLDS,
    resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per threshold: ``accuracy`` (95 % bootstrap CI), ``mean_depth`` (layers run, 1..L), ``cost``
    (mean measured time as a fraction of the full model) and ``exited`` (share that stopped early).

    ``readout_probs``: ``(B, L, C)``; ``final``/``labels``: ``(B,)``; ``cost``: ``(L + 1,)`` from
    :func:`layer_costs`.
    """
    L = readout_probs.shape[1]
    t = torch.tensor(list(thresholds), dtype=torch.float64)
    layers = exit_layers(readout_probs.amax(-1), t)  # (T, B)
    correct = (exit_predictions(readout_probs.argmax(-1), final, layers) == labels.unsqueeze(0)).double()
    fraction = (cost / cost[-1]).to(layers.device)[layers]  # (T, B)
    accuracy = bootstrap_cis(correct.T.cpu(), resamples=resamples, seed=seed)  # rows = inputs
    return pd.DataFrame(
        {
            "threshold": t.tolist(),
            "accuracy": [a.estimate for a in accuracy],
            "accuracy_low": [a.low for a in accuracy],
            "accuracy_high": [a.high for a in accuracy],
            "mean_depth": (layers.clamp(max=L - 1) + 1).double().mean(1).tolist(),
            "cost": fraction.mean(1).tolist(),
            "exited": (layers < L).double().mean(1).tolist(),
        }
    )


def compute_saved(curve: pd.DataFrame, full_accuracy: float, tolerance: float = 0.01) -> dict[str, float]:
    """The cheapest threshold whose accuracy is within ``tolerance`` (1 point) of ``full_accuracy``:
    its threshold, accuracy, mean depth, cost and ``saved = 1 - cost`` (0 if no threshold qualifies)."""
    ok = curve[curve["accuracy"] >= full_accuracy - tolerance]
    if ok.empty:
        return {"threshold": float("nan"), "accuracy": full_accuracy, "mean_depth": float("nan"), "cost": 1.0,
                "saved": 0.0}  # fmt: skip
    best = ok.loc[ok["cost"].idxmin()]
    return {
        "threshold": float(best["threshold"]),
        "accuracy": float(best["accuracy"]),
        "mean_depth": float(best["mean_depth"]),
        "cost": float(best["cost"]),
        "saved": float(1 - best["cost"]),
    }


__all__ = ["THRESHOLDS", "compute_saved", "exit_curve", "exit_layers", "exit_predictions", "layer_costs"]
