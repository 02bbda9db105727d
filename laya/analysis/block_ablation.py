"""Block ablation inside the backbone: the total effect of each block on the head's decision, post hoc.

For an input ``x`` with the head's unablated prediction ``ŷ`` and layers ``h_1..h_L``, block ``i``'s
output is **mean-ablated**: replaced, inside the network, by its mean over a reference batch ``R``
(the module's output averaged over ``R``'s rows), and every deeper block runs on from it:

    drop_i(x) = p_ŷ(x) - p_ŷ(x | h_i <- mean_{r in R} h_i(r))

The mean is taken over a given reference batch of inputs, never the checkpoint's stored training
means: those are of the *pooled* hidden states the head reads, while the ablation replaces a block's
unpooled output inside the backbone. A layer with no module to hook (a pre-logits layer: the input of
the network's own classifier) is the last one, so its mean is given to the head directly. The hooks are those of activation patching (:func:`~laya.analysis.patching.layer_modules`).
One pass for the reference and the input together, then one pass of the batch per block; heads in float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from laya.analysis.ablation import float64_head
from laya.analysis.patching import _record_output, _replace_output, layer_modules
from laya.data.images import load_image_tensor
from laya.model.checkpoint import Checkpoint
from laya.model.classifier import LayerwiseClassifier

METHOD = "mean-ablation"


@dataclass
class BlockAblation:
    """``drops``: ``(B, L)`` ``drop_i(x)``; ``ablated_predictions``: ``(B, L)`` the class predicted with
    block i mean-ablated; ``prediction`` ``(B,)`` ŷ and ``probability`` ``(B,)`` p_ŷ(x), unablated;
    ``references``: how many inputs the means were taken over."""

    drops: Tensor
    ablated_predictions: Tensor
    prediction: Tensor
    probability: Tensor
    references: int
    method: str = METHOD

    @property
    def flips(self) -> Tensor:
        """``(B, L)`` True where ablating block i changes the predicted class."""
        return self.ablated_predictions != self.prediction.unsqueeze(1)


@torch.inference_mode()
def block_ablation(model: LayerwiseClassifier, x: Tensor, reference: Tensor) -> BlockAblation:
    """Mean-ablate each block of ``model.backbone`` in turn for the batch ``x`` ``(B, C, H, W)``, the means
    taken over ``reference`` ``(R, C, H, W)`` (preprocessed as ``x``). Raises ``ValueError`` for a backbone
    whose layers have no modules to hook, or inputs of different shapes."""
    if x.shape[1:] != reference.shape[1:] or len(reference) == 0:
        raise ValueError(f"reference must be (R >= 1, {', '.join(map(str, x.shape[1:]))}), got {tuple(reference.shape)}")
    modules = layer_modules(model.backbone)
    R, B = len(reference), len(x)
    head = float64_head(model.head)
    acts: list[Tensor] = []
    hooked = [m for m in modules if m is not None]
    with _record_output(hooked, acts):  # reference and input in one pass
        hidden = model.backbone(torch.cat([reference, x]))
    if len(acts) != len(hooked):  # a module run twice in one pass has no single output to replace
        raise ValueError(f"expected one output from each of the {len(hooked)} layer modules, got {len(acts)}")
    base = torch.softmax(head([h[R:].double() for h in hidden]).logits, -1)
    prediction = base.argmax(-1)
    means = iter(a[:R].mean(0, keepdim=True) for a in acts)
    ablated = []
    for i, module in enumerate(modules):
        if module is None:  # the last layer, read by the head only
            given = [h[R:].double() for h in hidden]
            given[i] = hidden[i][:R].double().mean(0, keepdim=True).expand(B, -1)
            ablated.append(head(given).logits)
            continue
        mean = next(means)
        with _replace_output(module, mean.expand(B, *mean.shape[1:])):
            ablated.append(head([h.double() for h in model.backbone(x)]).logits)
    p = torch.softmax(torch.stack(ablated, 1), -1)  # (B, L, C)
    kept = p.gather(2, prediction.view(-1, 1, 1).expand(-1, len(modules), 1))[..., 0]
    probability = base.gather(1, prediction.view(-1, 1))[:, 0]
    return BlockAblation(probability.unsqueeze(1) - kept, p.argmax(-1), prediction, probability, R)


def ablate_bytes(checkpoint: Checkpoint, data: bytes, references: Sequence[bytes]) -> BlockAblation:
    """Decode an uploaded file and the reference images (see :mod:`laya.data.images`; e.g. the checkpoint's
    bundled examples) and :func:`block_ablation` the one input, means over the references."""
    spec = checkpoint.meta.input
    if not references:
        raise ValueError("block ablation needs at least one reference image for the means, got none")
    images = [load_image_tensor(b, spec.channels, spec.source_size) for b in (data, *references)]
    device = next(checkpoint.model.parameters()).device
    x = checkpoint.preprocess(torch.stack(images).to(device))
    return block_ablation(checkpoint.model, x[:1], x[1:])


__all__ = ["METHOD", "BlockAblation", "ablate_bytes", "block_ablation"]
