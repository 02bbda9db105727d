"""Output overflow: finite weights whose forward pass leaves float32's range, so the logits are not finite.

Large finite weights (1e18, say) load, but a product of such layers, or a square such as a variance, passes
float32's 3.4e38: the logits become Inf or NaN, and so would every probability shown. The
analyses behind every page that shows probabilities (:func:`laya.analysis.head.explain.explain`,
:func:`laya.analysis.depth.input_depth.input_depth`, :func:`laya.analysis.patching.patch_images`) call
:func:`check_output` on the model's output, so the dashboard and a sandboxed worker's answers (a refusal of
kind ``overflow``) say that the output overflowed instead of showing NaN. Weights that hold NaN/Inf
themselves (loaded anyway, ``allow_nonfinite``) are not an overflow: their pages warn instead
(:func:`laya.app.explanation_views.nonfinite_warning`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class OutputOverflow(OverflowError):
    """The model's logits are not finite although every weight is (see the module docstring)."""


def check_output(model: nn.Module, *outputs: Tensor | None) -> None:
    """Raise :class:`OutputOverflow` when an output of ``model`` (logits, or probabilities computed from them;
    any shape; None skipped) holds Inf or NaN while all its floating-point weights and buffers are finite.

    Costs one ``isfinite`` per output; the weights are read only when an output is not finite.
    """
    if all(bool(torch.isfinite(t).all()) for t in outputs if t is not None):
        return
    weights = [t.detach() for t in model.state_dict().values() if t.is_floating_point() and t.numel()]
    if not all(bool(torch.isfinite(t).all()) for t in weights):
        return  # NaN/Inf weights, loaded anyway: not an overflow
    largest = max((float(t.abs().max()) for t in weights), default=0.0)
    raise OutputOverflow(
        "The model's output overflowed: its logits are not finite (Inf or NaN) although every weight is finite "
        f"(the largest has magnitude {largest:.1e}), so it has no prediction or probabilities to show. Weights "
        "this large pass float32's range (3.4e38) inside the forward pass."
    )


__all__ = ["OutputOverflow", "check_output"]
