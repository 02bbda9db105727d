"""Layer pruning guided by the head: accuracy vs layers kept, with and without a re-fit classifier.

Layers leave the head in ascending order of a criterion (least important first):

* ``head weight``: mean layer weight on the training split (LAYA's alpha, ScalarMix's softmax(w));
* ``LOO drop``: mean leave-one-layer-out drop on the training split;
* ``deepest first``: the backbone is truncated (the comparison for the speed-up);
* ``random``: the mean over ``n`` seeded random orders.

Removal reuses the heads' layer masks (``keep``, :mod:`laya.analysis.ablation`): LAYA/ScalarMix
renormalise their weights over the kept layers, Concat/LastLayer see a removed layer's training mean.
The *re-fit* trains a new final classifier (:func:`laya.analysis.readouts.fit_linear`) on the head's
pooled representation under the mask (the input of ``head.output_layer``), from training hidden states.
Where the removed layers are the deepest, the backbone can stop early: the measured speed-up is
``cost[L] / cost[k - 1]`` (:func:`laya.analysis.exits.layer_costs`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from torch import Tensor

from laya.analysis.ablation import float64_head, leave_one_out
from laya.analysis.readouts import fit_linear
from laya.analysis.statistics import bootstrap_cis
from laya.model.heads import LayerHead


def pruning_mode(head: LayerHead) -> str:
    """``renormalise`` for heads that weight layers (LAYA, ScalarMix), else ``mean``."""
    return "renormalise" if "renormalise" in head.modes else "mean"


def removal_orders(
    head: LayerHead, hidden: Sequence[Tensor], layer_scores: Tensor | None, random_orders: int = 10, seed: int = 0
) -> dict[str, list[Tensor]]:
    """``criterion -> orders`` (each ``(L,)`` layer indices, removed first to last), from training data."""
    orders: dict[str, list[Tensor]] = {}
    if layer_scores is not None:
        orders["head weight"] = [layer_scores.double().mean(0).argsort(stable=True).cpu()]
    drops = leave_one_out(head, hidden, pruning_mode(head)).drops.mean(0)
    orders["LOO drop"] = [drops.argsort(stable=True).cpu()]
    orders["deepest first"] = [torch.arange(head.num_layers).flip(0)]  # truncates the backbone
    generator = torch.Generator().manual_seed(seed)
    orders["random"] = [torch.randperm(head.num_layers, generator=generator) for _ in range(random_orders)]
    return orders


def keep_masks(order: Tensor) -> Tensor:
    """``(L, L)``: row ``j`` removes ``order[:j]`` (keeps ``L - j`` layers)."""
    L = len(order)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(L)
    return rank.unsqueeze(0) >= torch.arange(L).unsqueeze(1)


@torch.inference_mode()
def pooled_features(head: LayerHead, hidden: Sequence[Tensor], keep: Tensor) -> tuple[Tensor, Tensor]:
    """The input of ``head.output_layer`` and the logits under one mask ``keep (L,)``: ``(B, D)``, ``(B, C)``."""
    head64 = float64_head(head)
    captured: list[Tensor] = []
    hook = head64.output_layer.register_forward_pre_hook(lambda module, args: captured.append(args[0]))
    try:
        logits = head64.decode(head64.encode([h.double() for h in hidden]), keep, pruning_mode(head)).logits
    finally:
        hook.remove()
    return captured[0].reshape(len(logits), -1), logits


def pruning_curves(
    head: LayerHead,
    train: tuple[Sequence[Tensor], Tensor],
    test: tuple[Sequence[Tensor], Tensor],
    orders: dict[str, list[Tensor]],
    layer_names: Sequence[str],
    cost: Tensor | None = None,
    refit_steps: int = 30,
    resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per criterion and number of layers kept: test accuracy (95 % bootstrap CI over inputs; the random
    criterion's is of the per-input mean over orders), the same after re-fitting the classifier, the
    removed layers, whether they are the deepest ones and then the measured backbone speed-up.

    ``train``/``test``: ``(hidden, labels)``; ``cost``: ``(L + 1,)`` measured seconds, or None.
    """
    (train_hidden, train_labels), (test_hidden, test_labels) = train, test
    L, C = head.num_layers, head.num_classes
    masks = {name: [keep_masks(o) for o in group] for name, group in orders.items()}
    unique = torch.unique(torch.cat([m for group in masks.values() for m in group]), dim=0)  # (U, L)
    correct, refit = [], []
    for keep in unique:  # one head call per distinct mask, on all inputs at once
        test_features, logits = pooled_features(head, test_hidden, keep)
        correct.append(logits.argmax(-1).cpu() == test_labels.cpu())
        train_features, _ = pooled_features(head, train_hidden, keep)
        weight, bias = fit_linear(train_features, train_labels, C, steps=refit_steps)
        refit.append((test_features.float() @ weight.T + bias).argmax(-1).cpu() == test_labels.cpu())
    correct_t, refit_t = torch.stack(correct, 1).double(), torch.stack(refit, 1).double()  # (B, U)
    index = {tuple(k.tolist()): u for u, k in enumerate(unique)}
    rows = []
    for name, group in masks.items():
        columns = torch.tensor([[index[tuple(k.tolist())] for k in m] for m in group])  # (orders, L)
        plain = bootstrap_cis(correct_t[:, columns].mean(1), resamples=resamples, seed=seed)
        fitted = bootstrap_cis(refit_t[:, columns].mean(1), resamples=resamples, seed=seed)
        for j in range(L):
            kept = L - j
            removed = sorted(orders[name][0][:j].tolist()) if len(group) == 1 else None
            deepest = j > 0 and removed == list(range(kept, L))
            rows.append({
                "criterion": name, "layers_kept": kept, "orders": len(group),
                "accuracy": plain[j].estimate, "accuracy_low": plain[j].low, "accuracy_high": plain[j].high,
                "refit_accuracy": fitted[j].estimate, "refit_low": fitted[j].low, "refit_high": fitted[j].high,
                "removed": ", ".join(layer_names[i] for i in removed) if removed is not None else "random",
                "removes_deepest": deepest,
                "speedup": float(cost[-1] / cost[kept - 1]) if deepest and cost is not None else None,
            })  # fmt: skip
    return pd.DataFrame(rows)


__all__ = ["keep_masks", "pooled_features", "pruning_curves", "pruning_mode", "removal_orders"]
