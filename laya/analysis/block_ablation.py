"""Block ablation inside the backbone: the total effect of each block on the head's decision, post hoc.

For an input ``x`` with the head's unablated prediction ``ŷ`` and layers ``h_1..h_L``, block ``i``'s
output is **mean-ablated**: replaced, inside the network, by its mean over a reference batch ``R``
(the module's output averaged over ``R``'s rows), and every deeper block runs on from it:

    drop_i(x) = p_ŷ(x) - p_ŷ(x | h_i <- mean_{r in R} h_i(r))

With ``skip``, a **residual** block is **skipped** instead: its output is its own input, ``h_i <- x_i``, which
for ``h_i = x_i + f_i(x_i)`` removes the block's own branch ``f_i`` and keeps the stream it adds to. A block is
residual when its output is reached from its input through additions to it alone (each ``a + b`` with ``a``
the input or an earlier such sum, of the input's shape) and ReLUs of such sums where the input is nonnegative
(post-activation ResNets: ``relu(x + 0) = x``). That is measured, not assumed: the reference pass is traced
(:mod:`laya.analysis.network.units`), so ResNet stages with a
downsampling shortcut, DenseNet's concatenations or a stem are found not residual and are mean-ablated.

The mean is taken over a given reference batch of inputs, never the checkpoint's stored training
means: those are of the *pooled* hidden states the head reads, while the ablation replaces a block's
unpooled output inside the backbone. A layer with no module to hook (a pre-logits layer: the input of
the network's own classifier) is the last one, so its mean is given to the head directly. The hooks are those of
activation patching (:func:`~laya.analysis.patching.layer_blocks`), driven by the one mechanism of
:mod:`laya.analysis.network.interventions`: one pass for the reference and the input together, then one pass of
``B x L`` rows, each with its own block replaced; heads in float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from laya.analysis.network.interventions import MEAN, SKIP, intervene
from laya.analysis.network.units import network_stages
from laya.codec import Encoded
from laya.data.images import load_image_tensor
from laya.model.checkpoint import Checkpoint
from laya.model.classifier import LayerwiseClassifier

METHOD = MEAN


@dataclass
class BlockAblation(Encoded):
    """``drops``: ``(B, L)`` ``drop_i(x)``; ``ablated_predictions``: ``(B, L)`` the class predicted with
    block i ablated; ``prediction`` ``(B,)`` ŷ and ``probability`` ``(B,)`` p_ŷ(x), unablated;
    ``references``: how many inputs the means were taken over; ``methods``: per layer, ``"mean-ablation"`` or
    ``"skip"``; ``residual``: per layer, whether its block was measured residual (skippable)."""

    drops: Tensor
    ablated_predictions: Tensor
    prediction: Tensor
    probability: Tensor
    references: int
    methods: tuple[str, ...] = ()
    residual: tuple[bool, ...] = field(default=())

    @property
    def flips(self) -> Tensor:
        """``(B, L)`` True where ablating block i changes the predicted class."""
        return self.ablated_predictions != self.prediction.unsqueeze(1)


def block_ablation(model: LayerwiseClassifier, x: Tensor, reference: Tensor, skip: bool = False) -> BlockAblation:
    """Ablate each block of ``model.backbone`` in turn for the batch ``x`` ``(B, C, H, W)``: mean-ablated, the means
    taken over ``reference`` ``(R, C, H, W)`` (preprocessed as ``x``), or with ``skip`` skipped where residual
    (:func:`~laya.analysis.network.interventions.intervene` on the stages, mean-ablation the fallback).
    Raises ``ValueError`` for a backbone whose layers have no modules to hook, or inputs of different shapes."""
    if x.shape[1:] != reference.shape[1:] or len(reference) == 0:
        raise ValueError(f"reference must be (R >= 1, {', '.join(map(str, x.shape[1:]))}), got {tuple(reference.shape)}")
    stages = network_stages(model.backbone)
    profile = intervene(model, x, stages, "skip" if skip else "mean", reference, "mean", "output")
    return BlockAblation(profile.drops, profile.ablated_predictions, profile.prediction, profile.probability,
                         len(reference), profile.methods, profile.residual)  # fmt: skip


def ablate_bytes(checkpoint: Checkpoint, data: bytes, references: Sequence[bytes], skip: bool = False) -> BlockAblation:
    """Decode an uploaded file and the reference images (see :mod:`laya.data.images`; e.g. the checkpoint's
    bundled examples) and :func:`block_ablation` the one input, means over the references."""
    spec = checkpoint.meta.input
    if not references:
        raise ValueError("block ablation needs at least one reference image for the means, got none")
    images = [load_image_tensor(b, spec.channels, spec.source_size) for b in (data, *references)]
    device = next(checkpoint.model.parameters()).device
    x = checkpoint.preprocess(torch.stack(images).to(device))
    return block_ablation(checkpoint.model, x[:1], x[1:], skip)


__all__ = ["MEAN", "METHOD", "SKIP", "BlockAblation", "ablate_bytes", "block_ablation"]
