"""Forward hooks on a network's modules: the one place that adds them, and that removes them.

Two kinds, as the code that hooks a network needs them:

* **For one recording** (:class:`Hooks`): an analysis hooks a model for a forward or a few, to record what a module
  returns or is given, or to replace it, and removes every hook when it is done: on leaving the holder's ``with``
  block, whatever happened inside (a forward that raised included), as Captum's ``_forward_layer_eval`` and
  pytorch-grad-cam's ``ActivationsAndGradients`` do. A loaded model is shared by every dashboard session, each in
  its own thread, so each such hook acts only in the thread that made its holder: one session's patch, ablation
  or recording never reaches a forward another session runs meanwhile.
* **For the module's life** (:func:`forward_hook`, :func:`forward_pre_hook`): a backbone that reads its network
  through hooks (a wrapped module's layers, the pre-logits features) adds them once when it is built; they act in
  every thread and write into the running forward's own call (:mod:`laya.model.backbones.calls`), never onto the
  module.

A hook sees a module's output (or input) as the layer's tensor through :func:`layer_tensor` (a tuple's first
item: transformers' layers) and hands a new one back in its place with :func:`with_layer_tensor`.

A pass of many rows (the feature pass, the tuned lens's sample, the lesion study's settings, the Grad-CAM test's
perturbed images) is sized by memory, not by a count alone: :func:`pass_rows` caps its rows so that the largest
activation of the pass stays within :data:`PASS_BYTES`, measured on one row with hooks (at 224 px a ResNet's stem
returns 3.2 MB a row; 512 rows held gigabytes, 256 a feature pass's gigabyte and more). This module
imports nothing of ``laya``, so every part of it may hook a network without an import circle.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

PASS_BYTES = 2**28  # the largest activation of one batched pass, at most (256 MB)

Hook = Callable[..., Any]


def forward_hook(module: nn.Module, hook: Hook, *, prepend: bool = False) -> RemovableHandle:
    """``hook(module, args, output)`` after each forward of ``module``, in every thread, until the handle is removed;
    a value it returns replaces the output. ``prepend``: before the hooks already there."""
    return module.register_forward_hook(hook, prepend=prepend)


def forward_pre_hook(
    module: nn.Module, hook: Hook, *, prepend: bool = False, with_kwargs: bool = False
) -> RemovableHandle:
    """``hook(module, args)`` (``with_kwargs``: ``hook(module, args, kwargs)``) before each forward of ``module``, in
    every thread, until the handle is removed; a value it returns replaces the input."""
    return module.register_forward_pre_hook(hook, prepend=prepend, with_kwargs=with_kwargs)


class Hooks:
    """The hooks of one recording, each acting only in the thread that made the holder, all removed by
    :meth:`release`: on leaving ``with Hooks() as hooks:``, however it is left. Holders nest; each removes its own."""

    def __init__(self) -> None:
        self.owner = threading.get_ident()
        self.handles: list[RemovableHandle] = []

    def _owned(self, hook: Hook) -> Hook:
        owner = self.owner
        return lambda *args, **kwargs: hook(*args, **kwargs) if threading.get_ident() == owner else None

    def after(self, module: nn.Module, hook: Hook, *, prepend: bool = False) -> Hooks:
        """:func:`forward_hook` acting in the holder's thread only; returns the holder."""
        self.handles.append(forward_hook(module, self._owned(hook), prepend=prepend))
        return self

    def before(self, module: nn.Module, hook: Hook, *, prepend: bool = False, with_kwargs: bool = False) -> Hooks:
        """:func:`forward_pre_hook` acting in the holder's thread only; returns the holder."""
        self.handles.append(forward_pre_hook(module, self._owned(hook), prepend=prepend, with_kwargs=with_kwargs))
        return self

    def release(self) -> None:
        """Remove every hook added so far (again: nothing to do)."""
        while self.handles:
            self.handles.pop().remove()

    def __enter__(self) -> Hooks:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def layer_tensor(value: Any) -> Tensor | None:
    """A module's output (or input) as the layer's tensor: itself, or a tuple's first item (HF layers); else None."""
    if isinstance(value, (tuple, list)) and value:
        value = value[0]
    return value if isinstance(value, Tensor) else None


def tensors_in(value: Any) -> list[Tensor]:
    """The tensors in ``value``: itself, or those a tuple or list holds (one level deep)."""
    if isinstance(value, Tensor):
        return [value]
    return [v for v in value if isinstance(v, Tensor)] if isinstance(value, (tuple, list)) else []


def with_layer_tensor(out: Any, value: Tensor) -> Any:
    """``out`` with its layer tensor (:func:`layer_tensor`) replaced by ``value``."""
    return (value, *out[1:]) if isinstance(out, tuple) else value


def replacing_output(module: nn.Module, value: Tensor) -> Hooks:
    """Within the holder's block, ``module``'s output (its layer tensor) is ``value``, before any hook that reads it;
    in the calling thread only."""
    return Hooks().after(module, lambda m, a, out: with_layer_tensor(out, value), prepend=True)


def probe_input(backbone: nn.Module) -> Tensor:
    """A zero image ``(1, C, S, S)`` for one probe pass of ``backbone`` (a LAYA backbone: ``C`` and ``S`` from its
    ``config``), in its parameters' dtype and on their device."""
    p = next(backbone.parameters())
    size = backbone.config.input_size
    return torch.zeros(1, backbone.config.in_channels, size, size, dtype=p.dtype, device=p.device)


_LARGEST: weakref.WeakKeyDictionary[nn.Module, dict[tuple, int]] = weakref.WeakKeyDictionary()


def pass_rows(network: nn.Module, x: Tensor, rows: int, budget: int = PASS_BYTES) -> int:
    """At most ``rows`` rows a pass of ``network`` may take (at least 1) so that no module returns more than
    ``budget`` bytes: one forward of ``x[:1]`` measures the largest tensor a module returns for one row (once per
    network, input shape and dtype: kept while the network lives)."""
    key = (tuple(x.shape[1:]), x.dtype, x.device)
    known = _LARGEST.setdefault(network, {})
    if key not in known:
        largest = 0

        def measure(module: nn.Module, args: tuple, out: Any) -> None:
            nonlocal largest
            value = layer_tensor(out)
            if isinstance(value, Tensor):
                largest = max(largest, value.numel() * value.element_size())

        with Hooks() as hooks, torch.no_grad():
            for module in network.modules():
                hooks.after(module, measure)
            network(x[:1])
        known[key] = largest
    return max(1, min(rows, budget // max(1, known[key])))


__all__ = [
    "PASS_BYTES",
    "Hook",
    "Hooks",
    "forward_hook",
    "forward_pre_hook",
    "layer_tensor",
    "pass_rows",
    "probe_input",
    "replacing_output",
    "tensors_in",
    "with_layer_tensor",
]
