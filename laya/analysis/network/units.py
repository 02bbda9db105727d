"""The network's own units: its residual units by their module names, grouped into the stages a backbone reads.

A backbone reads a few stages; inside them the network repeats *units* (:mod:`laya.model.backbones.units`: ResNet's
``layer3.1``, timm's ``blocks.7`` and ``stages.2.blocks.1``, transformers' ``encoder.stages.1.layers.0``, torchvision's
``encoder.layers.encoder_layer_7``). Each :class:`Unit` carries the name the network gives it, its stage (the module
the backbone reads, by the network's name too), the hook targets that see its output and input (a
:class:`~laya.analysis.patching.Block`; torchvision's traced graph runs no unit as a module, so its taps) and two
measured facts:

* ``residual``: the unit keeps its input, its output is a *stream* plus a *branch*: reached from its input through
  additions to it alone (and ReLUs of such sums where the input is nonnegative), ``h_out = x + f(x)``; or from a
  *shortcut* of it, ``h_out = s(x) + f(x)`` through additions and ReLUs (a ResNet unit's ``downsample``, timm's and
  transformers' ``shortcut``, RegNet's ``proj``). Removing the branch then keeps the input (:class:`Streams`, a
  :class:`~torch.overrides.TorchFunctionMode` that follows the tensors by identity through one traced pass). The
  shortcut is found by tracing, not by module names: at an addition of two tensors both computed from the input and
  neither on a stream yet, the addend with fewer operations on its longest path from the input is ``s(x)`` (a
  projection is one conv and its norm, the branch a stack of them), the other ``f(x)``; the unit is residual with it
  where its output is reached from that addition. ``shortcut`` names the module that returned ``s(x)`` (None: the
  stream is the input itself; "" no module of the unit's did) and ``rectified`` whether a ReLU lies between the
  addition and the output: the unit's output without its branch, its *stream* ``σ(x)``, is then ``relu(s(x))``,
  else ``s(x)`` (the input ``x`` for an identity shortcut). A unit with no shortcut at all (a stem, an inverted
  residual with a stride, a transition) is not residual: an intervention replaces its whole output;
* ``branches``: for a residual unit that adds to its stream more than once (a transformer block:
  ``x + attn(norm1(x))``, then ``+ mlp(norm2(·))``), per addition the unit's child with the most weights among those
  that ran since the previous one (``blocks.7.attn``, ``blocks.7.mlp``).

:func:`network_stages` gives the stages in the same form (a pre-logits layer: no module, ``block`` None), so every
intervention of :mod:`laya.analysis.network.interventions` takes either granularity.
"""

from __future__ import annotations

import itertools
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
from laya.model.hooks import Hooks, layer_tensor, probe_input, tensors_in

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
    shortcut: str | None = None
    rectified: bool = False


@dataclass
class _Shortcut:
    """A candidate stream of one unit's pass: ``value`` the shallower addend of an addition of two tensors computed
    from the unit's input (a clone, taken before the addition), ``name`` the module that returned it ("" none);
    ``reached`` ``{id: (tensor, rectified)}`` the tensors reached from that addition by additions and ReLUs, and
    whether a ReLU lies on the way."""

    value: Tensor
    name: str
    reached: dict[int, tuple[Tensor, bool]]


@dataclass
class _Pass:
    """One unit's pass so far: ``stream`` the tensors reached from its input ``stream[0]`` by additions to it (and
    ReLUs where the input is nonnegative); ``depth`` ``{id: (tensor, n)}`` every tensor computed from the input, ``n``
    the operations on its longest path from it; ``parents`` ``{id: ids}`` the tensors each was computed from;
    ``shortcuts`` the candidate shortcut streams."""

    stream: list[Tensor]
    nonnegative: bool
    depth: dict[int, tuple[Tensor, int]]
    parents: dict[int, list[int]] = field(default_factory=dict)
    shortcuts: list[_Shortcut] = field(default_factory=list)


class Streams(TorchFunctionMode):
    """While a block runs, the tensors reached from its input by additions to it (and ReLUs of them, where the
    input is nonnegative), and from a shortcut of it (module docstring; ReLUs always); ``residual[i]``: whether
    block i's output was one of them; ``shortcut[i]``: where it was reached from a shortcut, the module that
    returned the shortcut ("" none), else None; ``kept[i]``: then the shortcut's output ``s(x)`` and
    ``rectified[i]`` whether a ReLU lies between the addition and the output; ``additions[i]``: per addition to
    block i's input stream, the names of ``children[i]`` (``{module: name}``, optional) that ran since the previous.
    ``modules[i]`` (``{module: name}``, optional): the modules inside block i that may return its shortcut. Its hooks
    (:class:`~laya.model.hooks.Hooks`) act in the calling thread and are removed on leaving the block."""

    def __init__(
        self, blocks: Sequence[Block | None], children: Sequence[dict[nn.Module, str]] = (),
        modules: Sequence[dict[nn.Module, str]] = (),
    ) -> None:  # fmt: skip
        super().__init__()
        self.open: dict[int, _Pass] = {}
        self.residual = [False] * len(blocks)
        self.shortcut: list[str | None] = [None] * len(blocks)
        self.kept: list[Tensor | None] = [None] * len(blocks)
        self.rectified = [False] * len(blocks)
        self.additions: list[list[list[str]]] = [[] for _ in blocks]
        self.ran: dict[int, list[str]] = {}
        self.returned: dict[int, tuple[Tensor, str, int]] = {}  # id -> (tensor, the module that returned it, its start)
        self.fed: dict[str, list[Tensor]] = {}  # module name -> the tensors it was called with (its first argument)
        self.calls = itertools.count()
        self.hooks = Hooks()
        for i, block in enumerate(blocks):
            if block is not None and block.entry is not None:
                on_input(self.hooks, block, lambda x, i=i: self._start(i, x))
                self.hooks.after(block.module, lambda m, a, out, i=i: self._end(i, out))
        for i, named in enumerate(children):
            for module, name in named.items():
                self.hooks.before(module, lambda m, a, i=i, n=name: self._ran(i, n))
        starts: dict[int, list[int]] = {}
        for named in modules:
            for module, name in named.items():
                self.hooks.before(module, lambda m, a, n=name: self._called(n, a, starts.setdefault(id(m), [])))
                self.hooks.after(module, lambda m, a, out, n=name: self._returned(n, starts[id(m)].pop(), out))

    def _start(self, i: int, x: Tensor | None) -> None:
        if x is not None:
            self.open[i] = _Pass([x], bool((x >= 0).all()), {id(x): (x, 0)})
            self.ran[i], self.additions[i] = [], []

    def _ran(self, i: int, name: str) -> None:
        if i in self.open:
            self.ran[i].append(name)

    def _called(self, name: str, args: tuple, starts: list[int]) -> None:
        starts.append(next(self.calls))
        self.fed.setdefault(name, []).extend(tensors_in(args[:1]))

    def _returned(self, name: str, start: int, out: Any) -> None:
        """The first module to return a tensor names it, or the outermost of those that enclose it."""
        if (tensor := layer_tensor(out)) is not None:
            known = self.returned.get(id(tensor))
            if known is None or known[0] is not tensor or start < known[2]:
                self.returned[id(tensor)] = (tensor, name, start)

    def _end(self, i: int, out: Any) -> None:
        run = self.open.pop(i, None)
        output = layer_tensor(out)
        if run is None or output is None:
            return
        self.residual[i] = any(t is output for t in run.stream[1:])
        if self.residual[i]:
            return
        for shortcut in reversed(run.shortcuts):  # the last addition the output is reached from
            if (hit := shortcut.reached.get(id(output))) is not None and hit[0] is output:
                self.residual[i], self.shortcut[i], self.kept[i], self.rectified[i] = True, shortcut.name, \
                    shortcut.value, hit[1]  # fmt: skip
                return

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        addition = name in ADDITIONS
        operands = tensors_in(args[:2]) if addition else tensors_in(args[:1]) if name in RELUS else []
        fresh = [self._candidate(run, operands) for run in self.open.values()] if addition and len(operands) == 2 \
            else [None] * len(self.open)  # fmt: skip
        out = func(*args, **(kwargs or {}))
        if not isinstance(out, Tensor) and not tensors_in(out):
            return out
        inputs = tensors_in(args) + [v for v in (kwargs or {}).values() if isinstance(v, Tensor)]
        for (i, run), candidate in zip(self.open.items(), fresh):
            depths = [run.depth[id(t)][1] for t in inputs if id(t) in run.depth and run.depth[id(t)][0] is t]
            if depths:
                for t in tensors_in(out):
                    run.depth[id(t)] = (t, max(depths) + 1)
                    run.parents[id(t)] = [id(t) for t in inputs if id(t) in run.depth]
            if not isinstance(out, Tensor) or not operands:
                continue
            reached = any(o is t for o in operands for t in run.stream)
            if reached and out.shape == run.stream[0].shape and (addition or run.nonnegative):
                run.stream.append(out)
                if addition:
                    self.additions[i].append(self.ran[i])
                    self.ran[i] = []
                continue
            for shortcut in run.shortcuts:
                hits = [shortcut.reached[id(o)] for o in operands if id(o) in shortcut.reached]
                if any(t is o for t, _ in hits for o in operands):
                    shortcut.reached[id(out)] = (out, name in RELUS or any(r for _, r in hits))
            if candidate is not None:
                candidate.reached[id(out)] = (out, False)
                run.shortcuts.append(candidate)
        return out

    def _candidate(self, run: _Pass, operands: list[Tensor]) -> _Shortcut | None:
        """A shortcut stream where an addition adds two tensors computed from the input, neither on a stream yet:
        the shallower (fewer operations on its longest path from the input) is the shortcut ``s(x)``, the other
        the branch ``f(x)``; None where they are as deep or either is not from the input."""
        known = [run.depth.get(id(o)) for o in operands]
        if any(k is None or k[0] is not o for k, o in zip(known, operands)) or known[0][1] == known[1][1]:
            return None
        if any(o is t for o in operands for t in run.stream) or any(
            id(o) in s.reached for o in operands for s in run.shortcuts
        ):
            return None
        shallow = operands[0] if known[0][1] < known[1][1] else operands[1]
        name = self._module_of(run, shallow)
        return _Shortcut(shallow.clone(), name if self._reads_input(run, name) else "", {})

    def _reads_input(self, run: _Pass, name: str) -> bool:
        """Whether module ``name`` (or a module inside it: a traced graph runs ``downsample.0``, not ``downsample``)
        was called with the unit's input itself, so that it computes the shortcut from it; not so for an addition
        inside a later block of a unit that first downsamples (a timm EfficientViT stage)."""
        return not name or any(t is run.stream[0] for n, fed in self.fed.items()
                               if n == name or n.startswith(name + ".") for t in fed)  # fmt: skip

    def _module_of(self, run: _Pass, tensor: Tensor) -> str:
        """The module that computes ``tensor`` from the unit's input: the deepest module path enclosing every module
        that returned a tensor on the way ("" none; a traced graph runs ``downsample.0``, ``downsample.1`` but not
        ``downsample``)."""
        names, todo, seen = [], [id(tensor)], set()
        while todo:
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            known = self.returned.get(t)
            if known is not None and known[0] is run.depth[t][0]:
                names.append(known[1].split("."))
            todo.extend(p for p in run.parents.get(t, ()) if run.depth[p][1] > 0)
        common = names[0] if names else []
        for name in names[1:]:
            common = list(itertools.takewhile(lambda ab: ab[0] == ab[1], zip(common, name)))
            common = [a for a, _ in common]
        return ".".join(common)

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
    inside: list[dict[nn.Module, str]] = []
    for _, name in found:
        inside.append({m: n for n, m in root.named_modules() if n.startswith(name + ".")})
        children.append({m: f"{name}.{n[len(name) + 1 :].split('.')[0]}" for m, n in inside[-1].items()})
    with Streams(blocks, children, inside) as streams:
        backbone(probe_input(backbone) if x is None else x)
    return [
        Unit(name, stages[i].name, stages[i].layer, streams.residual[u],
             _branches(root, streams.additions[u]) if streams.residual[u] else (), blocks[u], streams.shortcut[u],
             streams.rectified[u])
        for u, (i, name) in enumerate(found)
    ]  # fmt: skip


__all__ = ["Streams", "Unit", "network_root", "network_stages", "network_units"]
