"""What one forward pass of a backbone records, kept per call and never on the (shared) module.

A loaded model is shared by every dashboard session, each in its own thread, so nothing a forward computes may
live on the module between calls: one session would read another's features, or clear them before the other
read them. A backbone's ``forward`` opens :func:`forward_call`, a fresh :class:`Call` held in a
:class:`contextvars.ContextVar` (one value per thread and per asyncio task) until it returns; hooks on the
network's modules write into the :class:`Call` of their backbone (:func:`current_call`) and do nothing outside
one. :func:`observing` lets a caller see the finished calls of a backbone that run in its own context (the
spatial maps of :mod:`laya.analysis.head.spatial`), with no hook added to the module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor


@dataclass(eq=False)
class Call:
    """One forward pass of ``owner`` (a backbone).

    ``outputs``: layer name -> the module's output, as hooks saw it (wrapped modules); ``stop_after``: the layer
    whose hook ends the pass (early exit); ``classifier_inputs``: what each layer of the network's own classifier
    read, by name; ``features``: those joined, ``(B, D)`` (pre-logits); ``layers``: set when the pass is complete,
    per layer but the pre-logits one the pre-pool output that became ``h_i`` (a feature map ``(B, C, H, W)``,
    tokens ``(B, N, D)``, timm's ``(patches, prefix)``) or None where the family records none; ``final``: the
    tensor the network's own head pooled into ``features`` where known (timm's ``forward_head`` input)."""

    owner: object
    parent: Call | None = None
    outputs: dict[str, Tensor] = field(default_factory=dict)
    stop_after: str | None = None
    classifier_inputs: dict[str, Tensor] = field(default_factory=dict)
    features: Tensor | None = None
    layers: list[Any] | None = None
    final: Tensor | None = None


_CALL: ContextVar[Call | None] = ContextVar("laya_backbone_call", default=None)
_OBSERVERS: ContextVar[tuple[tuple[object, Callable[[Call], None]], ...]] = ContextVar("laya_observers", default=())


@contextlib.contextmanager
def forward_call(owner: object, stop_after: str | None = None) -> Iterator[Call]:
    """A fresh :class:`Call` of ``owner`` for the block (the forward's body). On a normal exit with ``layers`` set,
    the callers :func:`observing` ``owner`` in this context are given it."""
    call = Call(owner, _CALL.get(), stop_after=stop_after)
    token = _CALL.set(call)
    try:
        yield call
    finally:
        _CALL.reset(token)
    if call.layers is not None:
        for watched, notify in _OBSERVERS.get():
            if watched is owner:
                notify(call)


def current_call(owner: object) -> Call | None:
    """The :class:`Call` of ``owner`` running in this context (the innermost), or None outside one."""
    call = _CALL.get()
    while call is not None and call.owner is not owner:
        call = call.parent
    return call


@contextlib.contextmanager
def observing(owner: object, notify: Callable[[Call], None]) -> Iterator[None]:
    """Within the block, ``notify(call)`` after each complete forward of ``owner`` in this context (not those
    that other threads run meanwhile)."""
    token = _OBSERVERS.set((*_OBSERVERS.get(), (owner, notify)))
    try:
        yield
    finally:
        _OBSERVERS.reset(token)


__all__ = ["Call", "current_call", "forward_call", "observing"]
