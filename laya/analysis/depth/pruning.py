"""Layer pruning guided by the head: accuracy vs layers kept, with and without a re-fit classifier.

Layers leave the head in ascending order of a criterion (least important first):

* ``head weight``: mean layer weight on the training split (LAYA's alpha, ScalarMix's softmax(w));
* ``LOO drop``: mean leave-one-layer-out drop on the training split;
* ``deepest first``: the backbone is truncated (the comparison for the speed-up);
* ``random``: the mean over ``n`` seeded random orders.

Removal reuses the heads' layer masks (``keep``, :mod:`laya.analysis.head.ablation`): LAYA/ScalarMix
renormalise their weights over the kept layers, Concat/LastLayer see a removed layer's training mean.
The *re-fit* trains a new final classifier (:func:`laya.analysis.depth.readouts.fit_linear`) on the head's
pooled representation under the mask (the input of ``head.output_layer``), from training hidden states.
Where the removed layers are the deepest, the backbone can stop early. The ``speedup`` column of
:func:`pruning_curves` is an *estimate* (``cost[L] / cost[k - 1]``, the backbone alone, no head). The
measurement is :func:`truncation_runs`: a :class:`TruncatedModel` (backbone stopped after ``k`` layers + its
head, as pruned or re-fit) against the full model, end to end, in wall-clock time and MACs.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import pandas as pd
import torch
from torch import Tensor, nn

from laya.analysis.depth.exits import ExitRunOptions, batched, count_macs, fastest_pair, layer_steps, plain
from laya.analysis.depth.readouts import fit_linear
from laya.analysis.head.ablation import float64_head, leave_one_out
from laya.analysis.statistics import bootstrap_ci, bootstrap_cis
from laya.model.classifier import LayerwiseClassifier
from laya.model.heads import LayerHead
from laya.model.hooks import Hooks


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
    with Hooks() as hooks:  # the cached copy is shared by every thread: this one's forward only
        hooks.before(head64.output_layer, lambda module, args: captured.append(args[0]))
        logits = head64.decode(head64.encode([h.double() for h in hidden]), keep, pruning_mode(head)).logits
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


def filled(head: LayerHead, hidden: Sequence[Tensor], kept: int) -> list[Tensor]:
    """The first ``kept`` hidden states, then each removed layer's training mean (``head.references``) expanded to
    the batch: what a truncated model feeds its head (the removed layers are masked out of it)."""
    B = len(hidden[0])
    return [*hidden[:kept], *(r.to(hidden[0]).expand(B, -1) for r in head.references[kept:])]


class TruncatedModel(nn.Module):
    """A backbone stopped after its first ``kept`` layers, and the head on them: the deeper layers are removed
    with the head's mask (``pruning_mode``: LAYA/ScalarMix renormalise their weights over the kept layers,
    Concat/LastLayer see the removed layers' training means), fed their training means where the head's scores
    read them (LAYA). ``output_layer``: a re-fit classifier replacing the head's (None: as pruned)."""

    def __init__(self, model: LayerwiseClassifier, kept: int, output_layer: nn.Linear | None = None) -> None:
        super().__init__()
        L = model.head.num_layers
        if not 1 <= kept <= L:
            raise ValueError(f"kept must be in 1..{L}, got {kept}")
        self.steps, self.kept = layer_steps(model.backbone), kept
        self.head = copy.deepcopy(model.head) if output_layer is not None else model.head
        if output_layer is not None:
            with torch.no_grad():
                self.head.output_layer.weight.copy_(output_layer.weight)
                self.head.output_layer.bias.copy_(output_layer.bias)
        self.register_buffer("keep", torch.arange(L) < kept, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, C)`` logits."""
        state, hidden = self.steps.prelude(x), []
        for advance, read in zip(self.steps.advance[: self.kept], self.steps.read[: self.kept]):
            state = advance(state)
            hidden.append(read(state))
        return self.head(filled(self.head, hidden, self.kept), self.keep.to(x.device), pruning_mode(self.head)).logits


def refit_output_layer(head: LayerHead, hidden: Sequence[Tensor], labels: Tensor, kept: int, steps: int = 30) -> nn.Linear:
    """A new final classifier for the head truncated to ``kept`` layers, fitted on training hidden states."""
    keep = torch.arange(head.num_layers) < kept
    features, _ = pooled_features(head, filled(head, hidden, kept), keep.to(hidden[0].device))
    weight, bias = fit_linear(features, labels, head.num_classes, steps=steps)
    linear = nn.Linear(weight.shape[1], weight.shape[0]).to(hidden[0].device)
    with torch.no_grad():
        linear.weight.copy_(weight)
        linear.bias.copy_(bias)
    return linear


def truncation_runs(
    model: LayerwiseClassifier,
    train: tuple[Sequence[Tensor], Tensor],
    x: Tensor,
    labels: Tensor,
    refit_steps: int = 30,
    options: ExitRunOptions | None = None,
) -> pd.DataFrame:
    """The full model against each truncation (the deepest layers removed, ``kept = L-1 .. 1``), end to end.

    Per ``kept`` and ``variant`` (``pruned``: the head's own classifier; ``refit``: a classifier re-fitted on
    ``train = (hidden, labels)``): accuracy of the truncated model's own predictions on ``x`` (95 % bootstrap CI),
    MACs per input (``torch.utils.flop_counter``, head included) and ``macs_speedup`` = full / truncated, and per
    batch size ``b`` the milliseconds per input of both (fastest of ``repeats``, alternating) and
    ``speedup_b<b>`` = full / truncated.
    """
    options = options or ExitRunOptions()
    labels = labels.to(x.device)
    L, big = model.head.num_layers, max(options.batch_sizes)
    full_macs = count_macs(lambda: batched(lambda b: plain(model, b), x, big)) / len(x)
    full = bootstrap_ci((torch.cat(batched(lambda b: plain(model, b), x, big)) == labels).double().cpu(),
                        resamples=options.resamples, seed=options.seed)  # fmt: skip
    rows = []
    for kept in range(L - 1, 0, -1):
        refit = refit_output_layer(model.head, train[0], train[1], kept, refit_steps)  # needs autograd
        for variant, truncated in (("pruned", TruncatedModel(model, kept)), ("refit", TruncatedModel(model, kept, refit))):
            rows.append(_time_truncated(model, truncated, variant, x, labels, full.estimate, full_macs, options))
    return pd.DataFrame(rows)


@torch.inference_mode()
def _time_truncated(model: LayerwiseClassifier, truncated: TruncatedModel, variant: str, x: Tensor, labels: Tensor,
                    full_accuracy: float, full_macs: float, options: ExitRunOptions) -> dict:  # fmt: skip
    big = max(options.batch_sizes)
    predictions = torch.cat(batched(lambda b: truncated(b).argmax(-1), x, big))
    ci = bootstrap_ci((predictions == labels).double().cpu(), resamples=options.resamples, seed=options.seed)
    macs = count_macs(lambda: batched(truncated, x, big)) / len(x)
    row = {"layers_kept": truncated.kept, "variant": variant, "accuracy": ci.estimate, "accuracy_low": ci.low,
           "accuracy_high": ci.high, "full_accuracy": full_accuracy, "macs": macs, "full_macs": full_macs,
           "macs_speedup": full_macs / macs}  # fmt: skip
    for b in options.batch_sizes:
        xb = x[: options.timing_inputs.get(b, len(x))]
        f, t = fastest_pair(lambda: batched(lambda c: plain(model, c), xb, b),
                            lambda: batched(truncated, xb, b), options.repeats, options.min_seconds)  # fmt: skip
        row.update({f"full_ms_b{b}": f * 1e3 / len(xb), f"truncated_ms_b{b}": t * 1e3 / len(xb),
                    f"speedup_b{b}": f / t})  # fmt: skip
    return row


__all__ = ["TruncatedModel", "filled", "keep_masks", "pooled_features", "pruning_curves", "pruning_mode",
           "refit_output_layer", "removal_orders", "truncation_runs"]  # fmt: skip
