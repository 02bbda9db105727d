"""The network's own units, by structure: the repeated blocks inside the stages a backbone reads.

A backbone reads a few *stages* (ResNet's ``layer1..4``, a ViT's ``blocks.k``). A *unit* is one of the blocks the
network repeats inside them, named as the network names it (``layer3.1``, ``stages.2.blocks.1``, ``blocks.7``,
``vit.encoder.layer.7``). The rule is generic, not a table per model:

* a *repeat container* is an ``nn.Sequential`` / ``nn.ModuleList`` / ``nn.ModuleDict`` whose children with weights
  are all of one class and each has children of its own (``layer3``, ``blocks``; not ``Sequential(norm, conv)``);
* a stage read is descended where it is a repeat container or holds one (timm ConvNeXt's stage: ``downsample``,
  then ``blocks.0..``), and below it every repeat container; any other child is a unit (one without weights none),
  but a ``ModuleList`` / ``ModuleDict``, which is never called itself, gives its children as units (transformers
  ConvNeXt's ``downsampling_layer``: a norm, then a convolution);
* a stage that is itself one of a repeat container's children (a ViT block read at ``blocks.5``) takes its siblings
  since the previous stage read as units too (``blocks.3``, ``blocks.4``, ``blocks.5``): every block runs.

A stage with no unit inside it (a stem read at ``act1``) is its own single unit.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


def _weighted(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def _repeats(module: nn.Module) -> bool:
    """Whether ``module`` is a repeat container (see the module docstring)."""
    if not isinstance(module, CONTAINERS):
        return False
    kids = [c for c in module.children() if _weighted(c)]
    return bool(kids) and len({type(c) for c in kids}) == 1 and all(any(True for _ in c.children()) for c in kids)


def _units(module: nn.Module, name: str, stage: bool = True) -> list[str]:
    """The units inside ``module`` (named ``name``), or ``[name]`` where it is one. Below the ``stage`` read, only
    repeat containers are descended (a bottleneck's ``Sequential`` of three convolutions stays inside its unit)."""
    never_called = isinstance(module, (nn.ModuleList, nn.ModuleDict)) and not stage  # its children run, not it
    if not (_repeats(module) or never_called or (stage and any(_repeats(c) for c in module.children()))):
        return [name]
    found: list[str] = []
    for child_name, child in module.named_children():
        if _weighted(child):
            found += _units(child, f"{name}.{child_name}" if name else child_name, stage=False)
    return found or [name]


def unit_names(root: nn.Module, stages: Sequence[str]) -> list[tuple[int, str]]:
    """``(stage index, unit name)`` of every unit in the stages ``root`` is read at (module names of ``root``,
    in the order the network runs them), in order. Raises ``ValueError`` for a stage ``root`` has not."""
    modules = dict(root.named_modules())
    missing = [s for s in stages if s not in modules]
    if missing:
        raise ValueError(f"the network has no module(s) {missing[:5]} to find units in")
    found: list[tuple[int, str]] = []
    previous: dict[str, int] = {}  # parent -> position of the last stage read in it
    for i, stage in enumerate(stages):
        parent_name, _, own = stage.rpartition(".")
        parent = modules[parent_name] if parent_name or stage in dict(root.named_children()) else None
        span = [stage]
        if parent is not None and _repeats(parent):
            names = [n for n, _ in parent.named_children()]
            at = names.index(own)
            start = previous.get(parent_name, -1) + 1
            previous[parent_name] = at
            prefix = f"{parent_name}." if parent_name else ""
            span = [prefix + n for n in names[start : at + 1] if _weighted(modules[prefix + n])] or [stage]
        for name in span:
            found += [(i, unit) for unit in _units(modules[name], name)]
    return found


__all__ = ["unit_names"]
