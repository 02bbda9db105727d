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
(a :class:`~torch.overrides.TorchFunctionMode` that follows the tensors by identity), so ResNet stages with a
downsampling shortcut, DenseNet's concatenations or a stem are found not residual and are mean-ablated.

The mean is taken over a given reference batch of inputs, never the checkpoint's stored training
means: those are of the *pooled* hidden states the head reads, while the ablation replaces a block's
unpooled output inside the backbone. A layer with no module to hook (a pre-logits layer: the input of
the network's own classifier) is the last one, so its mean is given to the head directly. The hooks are those of
activation patching (:func:`~laya.analysis.patching.layer_blocks`). One pass for the reference and the input
together, then one pass of the batch per block; heads in float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

from laya.analysis.ablation import float64_head
from laya.analysis.patching import (
    Block,
    _hooks,
    _record_output,
    _replace_output,
    _tensor,
    _with_first,
    layer_blocks,
    on_input,
    owned,
)
from laya.data.images import load_image_tensor
from laya.model.checkpoint import Checkpoint
from laya.model.classifier import LayerwiseClassifier

MEAN, SKIP = "mean-ablation", "skip"
METHOD = MEAN
ADDITIONS = frozenset({"add", "add_", "__add__", "__radd__", "__iadd__"})
RELUS = frozenset({"relu", "relu_"})


class _Streams(TorchFunctionMode):
    """While a block runs, the tensors reached from its input by additions to it (and ReLUs of them, where the
    input is nonnegative); ``residual[i]``: whether block i's output was one of them (see the module docstring)."""

    def __init__(self, blocks: Sequence[Block | None]) -> None:
        super().__init__()
        self.open: dict[int, tuple[list[Tensor], bool]] = {}
        self.residual = [False] * len(blocks)
        self.handles = []
        for i, block in enumerate(blocks):
            if block is not None and block.entry is not None:
                self.handles.append(on_input(block, lambda x, i=i: self._start(i, x)))
                self.handles.append(block.module.register_forward_hook(owned(lambda m, a, out, i=i: self._end(i, out))))

    def _start(self, i: int, x: Tensor | None) -> None:
        if x is not None:
            self.open[i] = ([x], bool((x >= 0).all()))

    def _end(self, i: int, out: Any) -> None:
        stream, _ = self.open.pop(i, ([], False))
        output = _tensor(out)
        self.residual[i] = any(t is output for t in stream[1:])

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if (name in ADDITIONS or name in RELUS) and isinstance(out, Tensor):
            operands = [a for a in args[: 2 if name in ADDITIONS else 1] if isinstance(a, Tensor)]
            for stream, nonnegative in self.open.values():
                reached = any(o is t for o in operands for t in stream)
                if reached and out.shape == stream[0].shape and (name in ADDITIONS or nonnegative):
                    stream.append(out)
        return out

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        for handle in self.handles:
            handle.remove()


def _skip(block: Block) -> Any:
    """Within it, ``block``'s output is its own input (copied at the start: a block may write over its input)."""
    given: list[Tensor] = []
    return _hooks(
        on_input(block, lambda x: given.append(x.clone())),
        block.module.register_forward_hook(owned(lambda m, a, out: _with_first(out, given.pop())), prepend=True),
    )


@dataclass
class BlockAblation:
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

    def to_tensors(self) -> tuple[dict[str, Tensor], dict[str, Any]]:
        """``(tensors, plain values)`` (how a sandboxed worker hands it over); :meth:`from_tensors` inverts it."""
        tensors = {"drops": self.drops, "ablated_predictions": self.ablated_predictions,
                   "prediction": self.prediction, "probability": self.probability}  # fmt: skip
        return tensors, {"references": self.references, "methods": list(self.methods), "residual": list(self.residual)}

    @classmethod
    def from_tensors(cls, tensors: dict[str, Tensor], values: dict[str, Any]) -> BlockAblation:
        """Inverse of :meth:`to_tensors`. Raises ``KeyError`` for a reply that does not fit."""
        return cls(tensors["drops"], tensors["ablated_predictions"], tensors["prediction"], tensors["probability"],
                   int(values["references"]), tuple(map(str, values["methods"])),
                   tuple(map(bool, values["residual"])))  # fmt: skip


@torch.inference_mode()
def block_ablation(model: LayerwiseClassifier, x: Tensor, reference: Tensor, skip: bool = False) -> BlockAblation:
    """Ablate each block of ``model.backbone`` in turn for the batch ``x`` ``(B, C, H, W)``: mean-ablated, the means
    taken over ``reference`` ``(R, C, H, W)`` (preprocessed as ``x``), or with ``skip`` skipped where residual.
    Raises ``ValueError`` for a backbone whose layers have no modules to hook, or inputs of different shapes."""
    if x.shape[1:] != reference.shape[1:] or len(reference) == 0:
        raise ValueError(f"reference must be (R >= 1, {', '.join(map(str, x.shape[1:]))}), got {tuple(reference.shape)}")
    blocks = layer_blocks(model.backbone)
    R, B = len(reference), len(x)
    head = float64_head(model.head)
    acts: list[Tensor] = []
    hooked = [b.module for b in blocks if b is not None]
    with _record_output(hooked, acts), _Streams(blocks) as streams:  # reference and input in one pass
        hidden = model.backbone(torch.cat([reference, x]))
    if len(acts) != len(hooked):  # a module run twice in one pass has no single output to replace
        raise ValueError(f"expected one output from each of the {len(hooked)} layer modules, got {len(acts)}")
    base = torch.softmax(head([h[R:].double() for h in hidden]).logits, -1)
    prediction = base.argmax(-1)
    means = iter(a[:R].mean(0, keepdim=True) for a in acts)
    ablated, methods = [], []
    for i, block in enumerate(blocks):
        if block is None:  # the last layer, read by the head only
            given = [h[R:].double() for h in hidden]
            given[i] = hidden[i][:R].double().mean(0, keepdim=True).expand(B, -1)
            ablated.append(head(given).logits)
            methods.append(MEAN)
            continue
        mean = next(means)
        skipped = skip and streams.residual[i]
        with _skip(block) if skipped else _replace_output(block.module, mean.expand(B, *mean.shape[1:]).clone()):
            ablated.append(head([h.double() for h in model.backbone(x)]).logits)
        methods.append(SKIP if skipped else MEAN)
    p = torch.softmax(torch.stack(ablated, 1), -1)  # (B, L, C)
    kept = p.gather(2, prediction.view(-1, 1, 1).expand(-1, len(blocks), 1))[..., 0]
    probability = base.gather(1, prediction.view(-1, 1))[:, 0]
    return BlockAblation(probability.unsqueeze(1) - kept, p.argmax(-1), prediction, probability, R, tuple(methods),
                         tuple(streams.residual))  # fmt: skip


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
