"""Leave-one-layer-out (LOO) and top-k deletion curves, batched over inputs *and* layer masks.

The backbone is never rerun: the hidden states are computed once, the mask-independent part
of the head (``head.encode``: LAYA's adapters) once, then the rest of the head is evaluated under all
layer masks in one call (``keep`` of shape ``(B|1, M, L)``). The head and the probabilities are computed
in float64 from the hidden states: with few layers, float32 noise among near-zero drops creates spurious
ties that shift rank correlations.

``drop_i(x) = p_c(x) - p_c(x without layer i)``, ``c`` = the class predicted with all layers.
"""

from __future__ import annotations

import copy
import functools
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from laya.model.heads import CROSS_HEAD_MODES, DEFAULT_MODE, AblationMode, LayerHead, MixHead


@dataclass
class AblationResult:
    """Outcome of removing layer sets from each input.

    ``base_prob``: ``(B,)`` probability of the predicted class with all layers;
    ``prediction``: ``(B,)``; ``probs_after``: ``(B, M)`` probability of that class after
    removal ``m``; ``drops``: ``(B, M)`` = ``base_prob - probs_after``;
    ``predictions_after``: ``(B, M)`` argmax after removal; ``layer_scores``: ``(B, L)`` or None;
    ``base_probs``: ``(B, C)`` the full class distribution with all layers, ``base_logits`` its logits.
    """

    base_prob: Tensor
    prediction: Tensor
    probs_after: Tensor
    drops: Tensor
    predictions_after: Tensor
    layer_scores: Tensor | None
    base_probs: Tensor
    base_logits: Tensor

    @property
    def flipped(self) -> Tensor:
        """``(B, M)`` whether the label changes after removal ``m``."""
        return self.predictions_after != self.prediction.unsqueeze(1)


_FLOAT64: weakref.WeakKeyDictionary[LayerHead, tuple[list[Tensor], tuple[int, ...], LayerHead]] = (
    weakref.WeakKeyDictionary()
)


def float64_head(head: LayerHead) -> LayerHead:
    """A float64, eval-mode copy of ``head`` (normal tensors, usable by autograd even if made under
    ``torch.inference_mode``), cached until the head's tensors are modified in place. LAYA / ScalarMix: the
    copy's ``fill_projection`` of each input-level mode is computed once, not under every call."""
    cached = _FLOAT64.get(head)
    if cached is not None and tuple(t._version for t in cached[0]) == cached[1]:
        return cached[2]
    tensors = [*head.parameters(), *head.buffers()]
    # Outside inference mode, and no inference tensor kept: the copy also serves the gradients of the
    # post-hoc attributions (laya.analysis.head.attribution), whichever of the two asks for it first.
    with torch.inference_mode(False):
        copy64 = copy.deepcopy(head).double().eval()
        for module in copy64.modules():
            for group in (module._parameters, module._buffers):
                for name, t in group.items():
                    if t is not None and t.is_inference():
                        fresh = t.detach().clone()
                        group[name] = torch.nn.Parameter(fresh, t.requires_grad) if name in module._parameters else fresh
        if isinstance(copy64, MixHead):  # the copy never changes: its fills' projections are computed once
            with torch.no_grad():
                fills = {mode: copy64.fill_projection(mode) for mode in CROSS_HEAD_MODES}
            copy64.fill_projection = fills.__getitem__
    _FLOAT64[head] = (tensors, tuple(t._version for t in tensors), copy64)
    return copy64


@functools.lru_cache(maxsize=64)
def loo_masks(num_layers: int, device: torch.device | None = None) -> Tensor:
    """``(1, L + 1, L)``: row 0 keeps every layer, row ``i + 1`` removes layer ``i`` (cached; do not modify)."""
    keep = torch.ones(num_layers + 1, num_layers, dtype=torch.bool, device=device)
    keep[torch.arange(1, num_layers + 1), torch.arange(num_layers)] = False
    return keep.unsqueeze(0)


def topk_masks(scores: Tensor) -> Tensor:
    """``(B, L + 1, L)``: row 0 keeps all, row ``k`` removes the k highest-scored layers of each input.

    Ties are broken by layer order (earlier layer first), the same rule as ``argmax``.
    """
    B, L = scores.shape
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices  # (B, L)
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(L, device=scores.device).expand(B, L))  # rank of each layer
    k = torch.arange(L + 1, device=scores.device).view(1, L + 1, 1)
    return rank.unsqueeze(1) >= k  # keep layers whose rank is not among the top k


def ablate(
    head: LayerHead, hidden: Sequence[Tensor], keep: Tensor, mode: AblationMode = DEFAULT_MODE
) -> AblationResult:
    """Evaluate ``head`` under masks ``keep`` ``(B|1, M + 1, L)`` whose row 0 keeps every layer."""
    if not bool(keep[:, 0].all()):
        raise ValueError("row 0 of the masks must keep every layer (it defines the prediction)")
    return _ablate(head, hidden, keep, mode)


@torch.inference_mode()
def _ablate(head: LayerHead, hidden: Sequence[Tensor], keep: Tensor, mode: AblationMode) -> AblationResult:
    """:func:`ablate` for masks known to keep every layer in row 0."""
    head._check_hidden(hidden)
    head64 = float64_head(head)
    out = head64.decode(head64.encode([h.double() for h in hidden]), keep, mode)  # encode: once for every mask
    probs = torch.softmax(out.logits, dim=-1)  # (B, M + 1, C)
    predictions = probs.argmax(-1)  # (B, M + 1)
    prediction = predictions[:, 0]
    p_class = probs.take_along_dim(prediction.view(-1, 1, 1), dim=2).squeeze(2)  # (B, M + 1)
    return AblationResult(
        base_prob=p_class[:, 0],
        prediction=prediction,
        probs_after=p_class[:, 1:],
        drops=p_class[:, :1] - p_class[:, 1:],
        predictions_after=predictions[:, 1:],
        layer_scores=out.layer_scores,
        base_probs=probs[:, 0],
        base_logits=out.logits[:, 0],
    )


def leave_one_out(head: LayerHead, hidden: Sequence[Tensor], mode: AblationMode = DEFAULT_MODE) -> AblationResult:
    """Remove each layer in turn: ``drops`` ``(B, L)``, one batched head call."""
    return _ablate(head, hidden, loo_masks(head.num_layers, hidden[0].device), mode)


def deletion_curve(
    head: LayerHead, hidden: Sequence[Tensor], scores: Tensor, mode: AblationMode = DEFAULT_MODE
) -> Tensor:
    """``(B, L)``: drop in the predicted class's probability after removing the top-k layers, k = 1..L."""
    return _ablate(head, hidden, topk_masks(scores), mode).drops


__all__ = ["AblationResult", "ablate", "deletion_curve", "float64_head", "leave_one_out", "loo_masks", "topk_masks"]
