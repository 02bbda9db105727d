"""The network's own units: its residual units by their module names, grouped into the stages a backbone reads.

A backbone reads a few stages; inside them the network repeats *units* (:mod:`laya.model.backbones.units`: ResNet's
``layer3.1``, timm's ``blocks.7`` and ``stages.2.blocks.1``, transformers' ``encoder.stages.1.layers.0``, torchvision's
``encoder.layers.encoder_layer_7``). Each :class:`Unit` carries the name the network gives it, its stage (the module
the backbone reads, by the network's name too), the hook targets that see its output and input (a
:class:`~laya.analysis.patching.Block`; torchvision's traced graph runs no unit as a module, so its taps) and two
measured facts:

* ``residual``: the unit's output is reached from its input through additions to it alone (and ReLUs of such sums
  where the input is nonnegative): ``h_out = x + f(x)``, so removing the unit keeps the stream (:class:`Streams`,
  a :class:`~torch.overrides.TorchFunctionMode` that follows the tensors by identity through one traced pass);
* ``branches``: for a residual unit that adds to its stream more than once (a transformer block:
  ``x + attn(norm1(x))``, then ``+ mlp(norm2(·))``), per addition the unit's child with the most weights among those
  that ran since the previous one (``blocks.7.attn``, ``blocks.7.mlp``).

:func:`network_stages` gives the stages in the same form (a pre-logits layer: no module, ``block`` None), so every
intervention of :mod:`laya.analysis.network.interventions` takes either granularity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from laya.analysis.patching import Block, layer_blocks, on_input
from laya.model.backbones import Backbone, CNNBackbone, MLPBackbone, TorchvisionBackbone, WrappedBackbone
from laya.model.backbones.pre_logits import PRE_LOGITS
from laya.model.backbones.units import unit_names
from laya.model.hooks import Hooks, layer_tensor, probe_input

ADDITIONS = frozenset({"add", "add_", "__add__", "__radd__", "__iadd__"})
RELUS = frozenset({"relu", "relu_"})


@dataclass(frozen=True)
class Unit:
    """One unit (or stage): ``name`` as the network names it; ``stage`` the name of the stage it is in and ``layer``
    that stage's index among the backbone's layers; ``residual`` and ``branches`` measured (module docstring);
    ``block`` its hook targets (None: a pre-logits layer, replaced at the head)."""

    name: str
    stage: str
    layer: int
    residual: bool = False
    branches: tuple[str, ...] = ()
    block: Block | None = field(default=None, compare=False, repr=False)


class Streams(TorchFunctionMode):
    """While a block runs, the tensors reached from its input by additions to it (and ReLUs of them, where the
    input is nonnegative); ``residual[i]``: whether block i's output was one of them; ``additions[i]``: per addition
    to block i's stream, the names of ``children[i]`` (``{module: name}``, optional) that ran since the previous.
    Its hooks (:class:`~laya.model.hooks.Hooks`) act in the calling thread and are removed on leaving the block."""

    def __init__(self, blocks: Sequence[Block | None], children: Sequence[dict[nn.Module, str]] = ()) -> None:
        super().__init__()
        self.open: dict[int, tuple[list[Tensor], bool]] = {}
        self.residual = [False] * len(blocks)
        self.additions: list[list[list[str]]] = [[] for _ in blocks]
        self.ran: dict[int, list[str]] = {}
        self.hooks = Hooks()
        for i, block in enumerate(blocks):
            if block is not None and block.entry is not None:
                on_input(self.hooks, block, lambda x, i=i: self._start(i, x))
                self.hooks.after(block.module, lambda m, a, out, i=i: self._end(i, out))
        for i, named in enumerate(children):
            for module, name in named.items():
                self.hooks.before(module, lambda m, a, i=i, n=name: self._ran(i, n))

    def _start(self, i: int, x: Tensor | None) -> None:
        if x is not None:
            self.open[i] = ([x], bool((x >= 0).all()))
            self.ran[i], self.additions[i] = [], []

    def _ran(self, i: int, name: str) -> None:
        if i in self.open:
            self.ran[i].append(name)

    def _end(self, i: int, out: Any) -> None:
        stream, _ = self.open.pop(i, ([], False))
        output = layer_tensor(out)
        self.residual[i] = any(t is output for t in stream[1:])

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if (name in ADDITIONS or name in RELUS) and isinstance(out, Tensor):
            operands = [a for a in args[: 2 if name in ADDITIONS else 1] if isinstance(a, Tensor)]
            for i, (stream, nonnegative) in self.open.items():
                reached = any(o is t for o in operands for t in stream)
                if reached and out.shape == stream[0].shape and (name in ADDITIONS or nonnegative):
                    stream.append(out)
                    if name in ADDITIONS:
                        self.additions[i].append(self.ran[i])
                        self.ran[i] = []
        return out

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self.hooks.release()


def network_root(backbone: Backbone) -> nn.Module:
    """The module whose names are the network's (the backbone itself for LAYA's own MLP / CNN)."""
    return backbone if isinstance(backbone, (MLPBackbone, CNNBackbone)) else backbone.model


def _stage_names(backbone: Backbone, blocks: Sequence[Block | None]) -> list[str]:
    if isinstance(backbone, (TorchvisionBackbone, WrappedBackbone)):
        names = list(backbone.layers)
    else:
        by_module = {id(m): n for n, m in network_root(backbone).named_modules()}
        names = [by_module[id(b.module)] for b in blocks if b is not None]
    return names + [PRE_LOGITS] * (len(blocks) - len(names))


def network_stages(backbone: Backbone) -> list[Unit]:
    """The stages the backbone reads, one per layer, as :class:`Unit` (``residual`` not measured here: False)."""
    blocks = layer_blocks(backbone)
    names = _stage_names(backbone, blocks)
    return [Unit(name, name, i, block=block) for i, (name, block) in enumerate(zip(names, blocks))]


def _branches(root: nn.Module, additions: list[list[str]]) -> tuple[str, ...]:
    def weights(name: str) -> int:
        return sum(p.numel() for p in root.get_submodule(name).parameters())

    if len(additions) < 2 or not all(additions):
        return ()
    return tuple(max(dict.fromkeys(ran), key=weights) for ran in additions)


@torch.inference_mode()
def network_units(backbone: Backbone, x: Tensor | None = None) -> list[Unit]:
    """Every unit of the network inside the stages the backbone reads, in the order they run, measured on one pass
    of ``x`` ``(B, C, H, W)`` (preprocessed; default a zero image). Raises
    :class:`~laya.analysis.patching.NoLayerModules` for a backbone with no layer modules."""
    was = backbone.training
    backbone.eval()  # a probe of one input: batch statistics would refuse it
    try:
        return _measured(backbone, x)
    finally:
        backbone.train(was)


def _measured(backbone: Backbone, x: Tensor | None) -> list[Unit]:
    root = network_root(backbone)
    stages = [s for s in network_stages(backbone) if s.block is not None]
    if isinstance(backbone, TorchvisionBackbone):
        found = backbone.units
        blocks = [Block(out, entry) for out, entry in backbone.unit_taps]
    else:
        found = unit_names(root, [s.name for s in stages])
        modules = dict(root.named_modules())
        blocks = [Block(modules[name], modules[name]) for _, name in found]
    children: list[dict[nn.Module, str]] = []
    for _, name in found:
        inside = [(n, m) for n, m in root.named_modules() if n.startswith(name + ".")]
        children.append({m: f"{name}.{n[len(name) + 1 :].split('.')[0]}" for n, m in inside})
    with Streams(blocks, children) as streams:
        backbone(probe_input(backbone) if x is None else x)
    return [
        Unit(name, stages[i].name, stages[i].layer, streams.residual[u],
             _branches(root, streams.additions[u]) if streams.residual[u] else (), blocks[u])
        for u, (i, name) in enumerate(found)
    ]  # fmt: skip


__all__ = ["Streams", "Unit", "network_root", "network_stages", "network_units"]
