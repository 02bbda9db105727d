"""Backbone families by name (as timm's ``_registry``): ``name -> class``, and the one constructor.

A family is a :class:`~laya.model.backbones.base.Backbone` subclass registered with
:func:`register_backbone`; a checkpoint can only name a registered family, never a class path.
The registry is a leaf: it imports nothing of :mod:`laya.model.backbones` (the base imports it), so no
import circle can form through it; it holds the classes as ``nn.Module`` classes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from torch import nn

B = TypeVar("B", bound=type[nn.Module])

BACKBONES: dict[str, type[nn.Module]] = {}  # each a laya.model.backbones.base.Backbone subclass


def register_backbone(name: str) -> Callable[[B], B]:
    """Class decorator: ``@register_backbone("timm") class TimmBackbone(Backbone): ...``."""

    def add(cls: B) -> B:
        if name in BACKBONES and BACKBONES[name] is not cls:
            raise ValueError(f"backbone family {name!r} is already registered ({BACKBONES[name].__name__})")
        BACKBONES[name] = cls
        return cls

    return add


def family(name: str) -> type[nn.Module]:
    """The class of a registered family."""
    if name not in BACKBONES:
        raise ValueError(f"unknown backbone {name!r}; expected one of {sorted(BACKBONES)}")
    return BACKBONES[name]


def build_backbone(config: Any, base_dir: Path | None = None, **options: Any) -> nn.Module:
    """Construct the backbone family named by ``config.name`` (``config``: a
    :class:`~laya.model.backbones.base.BackboneConfig`; the result: that family's
    :class:`~laya.model.backbones.base.Backbone`).

    ``base_dir`` resolves a relative ``config.weights`` path (a checkpoint's directory); ``options``
    go to the family (``wrapped``: ``module=``, ``allow_import=``).
    """
    return family(config.name)(config, base_dir=base_dir, **options)


__all__ = ["BACKBONES", "build_backbone", "family", "register_backbone"]
