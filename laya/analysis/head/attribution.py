"""Layer attributions: one score per layer per input, ``(B, L)``.

* **Intrinsic** — the head's own layer scores: LAYA's ``alpha(x) = softmax(s(x)/tau)``;
  ScalarMix's global ``softmax(w)`` (the same for every input).
* **Post-hoc** (Captum), for any head, over the head's per-layer inputs ``h_1..h_L`` treated as
  separate inputs, so one backward pass serves all layers. The attributed output is the
  *probability of the predicted class* ``p_t`` (the quantity leave-one-layer-out removes), computed
  in float64 on the head's float64 copy (:func:`laya.analysis.head.ablation.float64_head`, the one LOO
  uses) and in a form whose gradient cannot underflow (:func:`target_probability`):
  ``p_t = exp(-softplus(-m))``, ``m = z_t - logsumexp_{j != t} z_j`` (the logit margin), so
  ``dp_t/dz_t = p_t * sigmoid(-m)`` is never the ``p_t * (1 - p_t) = 1 * 0`` of a saturated softmax.

  - ``integrated_gradients``: ``(h_i - r_i) * sum_k w_k grad f(r + a_k (h - r))``, ``steps``
    Gauss–Legendre nodes ``a_k`` and weights ``w_k`` on [0, 1] (Captum's default rule, :data:`IG_RULE`),
    baseline ``r`` = the head's reference vectors (training means); completeness:
    ``sum_i sum_j IG_ij = f(h) - f(r)``. Under the ``mean`` intervention LOO moves ``h_i`` to the same
    ``r_i``, so this IG is built partly to agree with LOO-``mean``.
  - ``integrated_gradients_zero``: the same with baseline ``r = 0`` (:data:`IG_BASELINES`), the
    usual baseline at the head's inputs, which shares nothing with the ``mean`` intervention.
  - ``input_x_gradient``: ``h_i * grad_i f``.
  - ``saliency``: ``|grad_i f|``.

  Each is reduced to one score per layer over the layer's units ``j`` (:data:`REDUCTIONS`):

  - ``signed`` (the headline): ``score_i = sum_j A_ij``. It is on the scale of the signed LOO drop
    it is compared with (for IG, ``sum_i score_i = f(h) - f(r)`` by completeness, and removing
    layer i under ``mean`` ablation moves ``h_i`` to ``r_i``), and a layer that *raises* the
    prediction when removed gets a negative score, as its drop is negative.
  - ``magnitude``: ``score_i = sum_j |A_ij|``, how much the layer moves the output in either
    direction, the usual choice in attribution papers; it cannot rank a harmful layer last.

  Saliency is ``|grad|`` already, so both reductions coincide for it.
* ``random`` — a seeded random ranking, the control every method must beat.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from laya.analysis.head.ablation import float64_head
from laya.model.heads import LayaHead, LayerHead, ScalarMixHead

IG_BASELINES = {"integrated_gradients": "mean", "integrated_gradients_zero": "zero"}  # method -> baseline
IG_RULE = "gausslegendre"  # Captum's quadrature rule for the path integral
IG_RULE_LABEL = "Gauss–Legendre"
BASELINE_LABELS = {"mean": "training mean", "zero": "zero"}
POSTHOC_METHODS = ("integrated_gradients", "integrated_gradients_zero", "input_x_gradient", "saliency")
REDUCTIONS = ("signed", "magnitude")
DEFAULT_REDUCTION = "signed"
REDUCTION_LABELS = {"signed": "signed sum Σ_j A_ij", "magnitude": "magnitude Σ_j |A_ij|"}
METHOD_LABELS = {
    "laya_alpha": "LAYA α (intrinsic)",
    "scalarmix_weights": "ScalarMix weights (intrinsic, global)",
    "integrated_gradients": "Integrated Gradients (baseline: training mean)",
    "integrated_gradients_zero": "Integrated Gradients (baseline: zero)",
    "input_x_gradient": "Gradient × Input",
    "saliency": "Saliency",
    "random": "Random ranking (control)",
}


def intrinsic_method(head: LayerHead) -> str | None:
    """Name of the head's intrinsic attribution, or ``None`` (Concat, LastLayer)."""
    if isinstance(head, LayaHead):
        return "laya_alpha"
    if isinstance(head, ScalarMixHead):
        return "scalarmix_weights"
    return None


def methods_for(head: LayerHead) -> list[str]:
    """Every attribution method that applies to ``head``, intrinsic first, the random control last."""
    intrinsic = intrinsic_method(head)
    return ([intrinsic] if intrinsic else []) + list(POSTHOC_METHODS) + ["random"]


def ig_description(steps: int) -> str:
    """How IG is computed, for reports and captions: baselines and the step rule."""
    baselines = "; ".join(f"{METHOD_LABELS[m]}: r = {BASELINE_LABELS[b]}" for m, b in IG_BASELINES.items())
    return (
        f"IG path integral from baseline r to h by {steps}-node {IG_RULE_LABEL} quadrature ({baselines}); "
        "target p of the predicted class, float64, margin form (no underflow)"
    )


def target_probability(logits: Tensor, target: Tensor) -> Tensor:
    """``(B,)`` ``p_t = softmax(z)_t`` for ``logits`` ``(B, C)`` in a form whose gradient does not underflow.

    ``m = z_t - logsumexp_{j != t} z_j`` (logit margin), ``p_t = sigmoid(m) = exp(-softplus(-m))``.
    Autograd then gives ``dp_t/dz_t = p_t * sigmoid(-m)`` and ``dp_t/dz_j = -p_t * sigmoid(-m) * q_j``
    (``q`` = softmax over the other classes): every factor is computed from ``m`` directly, never as
    ``1 - p_t``, which is 0 once ``p_t`` rounds to 1 (``m`` > 17 in float32, > 37 in float64).
    """
    z_t = logits.gather(1, target.unsqueeze(1)).squeeze(1)
    others = logits.scatter(1, target.unsqueeze(1), float("-inf"))
    margin = z_t - torch.logsumexp(others, dim=1)
    return torch.exp(-torch.nn.functional.softplus(-margin))


def _summed_target_probability(head: LayerHead, target: Tensor):
    """``f(h) = sum_b p_t(head(h))[b]`` (:func:`target_probability`), a one-element output.

    Captum differentiates a per-row output with one autograd root per row (slow for big
    batches). The head treats rows independently, so the gradient of the summed target
    probability w.r.t. row ``b`` is row ``b``'s own gradient: identical attributions, one
    backward pass. Captum stacks IG's scaled copies step-major, hence ``target.repeat``.
    """

    def forward(*hidden: Tensor) -> Tensor:
        logits = head(list(hidden)).logits
        # A layer the head ignores (LastLayer's h_1..h_{L-1}) must still be in the autograd graph,
        # where its gradient is exactly zero; Captum's autograd.grad call refuses unused inputs.
        logits = logits + sum(0.0 * h.sum(dim=1, keepdim=True) for h in hidden)
        return target_probability(logits, target.repeat(logits.shape[0] // len(target))).sum().reshape(1)

    return forward


def raw_attributions(
    head: LayerHead, hidden: Sequence[Tensor], method: str, target: Tensor, steps: int = 32
) -> tuple[Tensor, ...]:
    """Per-unit attributions for each layer (signed), float64: L tensors ``(B, d_i)``.

    Runs on the head's float64 copy with float64 inputs (see the module docstring). Integrated Gradients:
    :func:`integrated_gradients` (Captum's arithmetic in one batched pass); Gradient × Input and Saliency:
    Captum, imported here, not at module level: it pulls in matplotlib (≈ 1 CPU-s), and the dashboard's
    default views never need it (docs/speed.md, "Cold start")."""
    if method not in POSTHOC_METHODS:
        raise ValueError(f"unknown post-hoc method {method!r}; expected one of {POSTHOC_METHODS}")
    head64 = float64_head(head)
    forward = _summed_target_probability(head64, target)
    # Gradients are needed even when the caller runs under inference_mode or no_grad.
    with torch.inference_mode(False), torch.enable_grad():
        inputs = tuple(h.detach().double().clone().requires_grad_() for h in hidden)  # clone: may be inference tensors
        if method in IG_BASELINES:
            references = head64.fill("mean" if IG_BASELINES[method] == "mean" else "zero")
            baselines = tuple(r.to(h.dtype).expand_as(h) for r, h in zip(references, inputs))
            return integrated_gradients(forward, inputs, baselines, steps)
        from captum.attr import InputXGradient, Saliency

        if method == "input_x_gradient":
            return InputXGradient(forward).attribute(inputs)
        return Saliency(forward).attribute(inputs, abs=True)


@functools.lru_cache(maxsize=16)
def gauss_legendre(steps: int) -> tuple[Tensor, Tensor]:
    """``(nodes (S,) float64, weights (S,) float32)`` of the ``steps``-node Gauss–Legendre rule on [0, 1]:
    ``a_k = (1 + x_k) / 2``, ``w_k = v_k / 2`` for numpy's ``leggauss`` nodes ``x_k`` and weights ``v_k``.
    The weights are rounded to float32, as Captum's ``IntegratedGradients`` rounds its step sizes, so that the
    attributions equal Captum's (and the bundled reports', made with it) bit for bit. Cached; do not modify."""
    if steps < 1:
        raise ValueError(f"Integrated Gradients needs at least 1 step, got {steps}")
    x, v = np.polynomial.legendre.leggauss(steps)
    return torch.from_numpy(0.5 * (1 + x)), torch.from_numpy(0.5 * v).float()


def integrated_gradients(
    forward: Callable[..., Tensor], inputs: tuple[Tensor, ...], baselines: tuple[Tensor, ...], steps: int
) -> tuple[Tensor, ...]:
    """Integrated Gradients of the one-element ``forward(*inputs)`` for L ``inputs (B, d_i)`` from ``baselines``
    (same shapes): ``IG_i = (h_i - r_i) * sum_k w_k grad_i f(r + a_k (h - r))`` over :func:`gauss_legendre`'s
    ``steps`` nodes, every node in ONE batched forward and backward pass (rows step-major, ``(S * B, d_i)``).

    Captum's ``IntegratedGradients(method="gausslegendre")`` computes the same arithmetic in the same order
    (tested equal), but builds the scaled inputs one node at a time: ``S x L`` small operations that cost more
    than the head itself on one input."""
    nodes, weights = gauss_legendre(steps)
    nodes = nodes.to(inputs[0].device)
    scaled = tuple((r + nodes.view(-1, 1, 1).to(h.dtype) * (h - r)).flatten(0, 1).requires_grad_()
                   for h, r in zip(inputs, baselines))  # fmt: skip
    grads = torch.autograd.grad(forward(*scaled), scaled)
    weights = weights.to(inputs[0].device).view(steps, 1)
    return tuple((g.contiguous().view(steps, -1) * weights).reshape(steps, *h.shape).sum(0) * (h - r)
                 for g, h, r in zip(grads, inputs, baselines))  # fmt: skip


def reduce_layers(parts: Sequence[Tensor], reduction: str) -> Tensor:
    """Per-unit attributions (L tensors ``(B, d_i)``) -> layer scores ``(B, L)`` (see module docstring)."""
    if reduction == "signed":
        return torch.stack([a.sum(dim=1) for a in parts], dim=1).detach()
    if reduction == "magnitude":
        return torch.stack([a.abs().sum(dim=1) for a in parts], dim=1).detach()
    raise ValueError(f"unknown reduction {reduction!r}; expected one of {REDUCTIONS}")


def attributions_by_reduction(
    head: LayerHead,
    hidden: Sequence[Tensor],
    method: str,
    target: Tensor | None = None,
    layer_scores: Tensor | None = None,
    steps: int = 32,
    seed: int = 0,
    reductions: Sequence[str] = REDUCTIONS,
) -> dict[str, Tensor]:
    """Scores ``(B, L)`` of ``method`` (see module docstring) for the predicted class (or ``target``),
    one per reduction: ``{reduction: (B, L)}``. Intrinsic scores and the random control do not depend on
    the reduction (the same tensor under every key); a post-hoc method runs Captum once for all of them.

    ``layer_scores`` — the head's intrinsic scores from a forward pass already made, reused
    instead of recomputed.
    """
    for reduction in reductions:
        if reduction not in REDUCTIONS:
            raise ValueError(f"unknown reduction {reduction!r}; expected one of {REDUCTIONS}")
    B, L = hidden[0].shape[0], head.num_layers
    if method in ("laya_alpha", "scalarmix_weights"):
        if intrinsic_method(head) != method:
            raise ValueError(f"{method!r} is not available for {type(head).__name__}")
        if layer_scores is None:
            with torch.inference_mode():
                layer_scores = head(list(hidden)).layer_scores
        return dict.fromkeys(reductions, layer_scores)
    if method == "random":
        generator = torch.Generator().manual_seed(seed)
        return dict.fromkeys(
            reductions, torch.rand(B, L, generator=generator, dtype=torch.float64).to(hidden[0].device)
        )
    if target is None:
        with torch.inference_mode():
            target = head(list(hidden)).logits.argmax(-1)
    parts = raw_attributions(head, hidden, method, target, steps)
    if method == "saliency":  # |grad| >= 0: both reductions are the same scores, one tensor
        return dict.fromkeys(reductions, reduce_layers(parts, "signed"))
    return {reduction: reduce_layers(parts, reduction) for reduction in reductions}


def layer_attributions(
    head: LayerHead,
    hidden: Sequence[Tensor],
    method: str,
    target: Tensor | None = None,
    layer_scores: Tensor | None = None,
    steps: int = 32,
    seed: int = 0,
    reduction: str = DEFAULT_REDUCTION,
) -> Tensor:
    """Scores ``(B, L)`` of ``method`` under one ``reduction`` (see :func:`attributions_by_reduction`)."""
    return attributions_by_reduction(head, hidden, method, target, layer_scores, steps, seed, (reduction,))[reduction]


__all__ = [
    "BASELINE_LABELS",
    "DEFAULT_REDUCTION",
    "IG_BASELINES",
    "IG_RULE",
    "METHOD_LABELS",
    "POSTHOC_METHODS",
    "REDUCTIONS",
    "REDUCTION_LABELS",
    "attributions_by_reduction",
    "ig_description",
    "gauss_legendre",
    "integrated_gradients",
    "intrinsic_method",
    "layer_attributions",
    "methods_for",
    "raw_attributions",
    "reduce_layers",
    "target_probability",
]
