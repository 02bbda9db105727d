"""The rows pass of :func:`~laya.analysis.network.interventions.intervene`: a batch laid out as ``[x (B); unit 1's
rows; unit 2's; ...]`` run through the backbone, each unit's rows joining the batch where they part from ``x``
(grown), a tensor kept from before a unit carried to the rows that joined after it (:class:`Carried`), or every row
run through the whole network (decision records ``unit-profile-rows.md``, ``carried-tensors.md``).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

from laya.analysis.patching import Block, on_input
from laya.model.classifier import LayerwiseClassifier
from laya.model.hooks import Hooks, layer_tensor, tensors_in, with_layer_tensor


class Carried(TorchFunctionMode):
    """While a grown pass runs (:func:`rows_pass`), an operation that fails on tensors of different row counts
    (a DenseNet layer concatenating the features of layers before a unit, with fewer rows, with one after it)
    gets the shorter ones carried to the longest: a tensor computed before rows joined holds, for each of them,
    the value of the input it comes from (:func:`_completed`). ``counts``: the row counts the pass goes through
    (``B``, then after each unit's rows); an operation whose tensors have other counts, an in-place one (the tensor
    it writes into has other owners), or one that still fails, raises as it would."""

    def __init__(self, source: Tensor, counts: set[int]) -> None:
        super().__init__()
        self.source, self.counts = source, counts

    def _carry(self, value: Any, rows: int) -> Any:
        if isinstance(value, Tensor) and value.ndim and len(value) in self.counts and len(value) < rows:
            return _completed(value, self.source, rows)
        if isinstance(value, (tuple, list)):
            return type(value)(self._carry(v, rows) for v in value)
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            return func(*args, **kwargs)
        except RuntimeError:
            name = getattr(func, "__name__", "")
            if name.startswith("__i") or (name.endswith("_") and not name.endswith("__")):
                raise
            tensors = [t for v in (*args, *kwargs.values()) for t in tensors_in(v)]
            counts = {len(t) for t in tensors if t.ndim and len(t) in self.counts}
            if len(counts) < 2:
                raise
            rows = max(counts)
            return func(*self._carry(args, rows), **{k: self._carry(v, rows) for k, v in kwargs.items()})


CARRIES: weakref.WeakKeyDictionary[torch.nn.Module, bool] = weakref.WeakKeyDictionary()  # backbones that need it


class Ungrown(RuntimeError):
    """The network did not carry the appended rows as :func:`rows_pass` expects (it keeps a tensor from before a
    unit and combines it with one after, or fixes the batch size): the rows are run whole instead."""


def _completed(t: Tensor, source: Tensor, rows: int) -> Tensor:
    """``t`` ``(r, ...)``, computed before the rows ``r..rows`` joined, with their values: their inputs',
    ``t[source[r:rows]]`` (``source[j]``: the input row ``j`` comes from)."""
    return torch.cat([t, t[source[len(t) : rows]]])


def _due(t: Tensor, rows: int) -> Tensor:
    """``t``, where a unit's rows join it: it must hold the ``rows`` before them (else :class:`Ungrown`)."""
    if len(t) != rows:
        raise Ungrown(f"{len(t)} rows where {rows} were due")
    return t


def rows_pass(
    model: LayerwiseClassifier,
    x: Tensor,
    targets: Sequence[Block | None],
    grow: Sequence[Block | None],
    at: Sequence[Tensor],
    values: Sequence[Tensor],
    layers: Sequence[int],
    grown: bool,
    carry: bool = False,
) -> list[Tensor]:
    """The backbone's hidden states ``(rows, ...)`` for the layout ``[x (B); unit 1's rows; unit 2's; ...]``, row
    ``at[u]`` of unit ``u`` being ``x``'s with ``targets[u]``'s output there replaced by ``values[u]``
    (``(len(at[u]), ...)``); ``layers[u]`` the index of the layer (stage) unit ``u`` is in. A unit without a target
    is replaced in the hidden state by the caller.

    ``grown``: the pass starts from ``x`` alone and each unit's rows join the batch where they part from ``x`` (at
    ``grow[u]``'s input where given, else as ``targets[u]``'s output), so no row reruns the modules before its unit;
    a layer read before a unit has no rows for it and takes ``x``'s, which is what they are there. Raises
    :class:`Ungrown` where the network does not carry the rows so (a layer of other than its rows so far);
    ``carry``: a tensor kept from before a unit is carried to the rows that joined after it (:class:`Carried`).
    Else every row runs the whole network."""
    B, rows = len(x), len(x) + sum(len(a) for a in at)
    source = torch.arange(rows, device=x.device) % B  # the input row of each row
    for a in at:
        source[a] = torch.arange(B, device=x.device).repeat_interleave(len(a) // B)
    with Hooks() as hooks:
        for target, entry, where, value in zip(targets, grow, at, values):
            if target is None:
                continue
            start = int(where[0]) if len(where) else rows  # the rows before this unit's

            def join(t: Tensor, n: int = len(where), start: int = start) -> Tensor:
                return torch.cat([_due(t, start), t[:B].repeat_interleave(n // B, 0)])

            def replace(m: Any, a: Any, out: Any, where: Tensor = where, value: Tensor = value, start: int = start,
                        joins: bool = grown and entry is None) -> Any:  # fmt: skip
                new = layer_tensor(out)
                if joins:  # the rows join here, as this output
                    return with_layer_tensor(out, torch.cat([_due(new, start), value.to(new.dtype)]))
                new = new.clone()  # a unit may hand its input on: write a copy
                new[where] = value.to(new.dtype)
                return with_layer_tensor(out, new)

            hooks.after(target.module, replace, prepend=True)
            if grown and entry is not None:
                on_input(hooks, entry, join)
        if not grown:
            return model.backbone(x[source])
        with Carried(source, {B} | {int(a[-1]) + 1 for a in at if len(a)}) if carry else nullcontext():
            hidden = model.backbone(x)
    out = []
    for i, h in enumerate(hidden):  # a layer read before unit u lacks its rows: x's value there, as their inputs'
        due = B + sum(len(a) for a, t, layer in zip(at, targets, layers) if t is not None and layer <= i)
        if len(h) != due:
            raise Ungrown(f"layer {i} has {len(h)} rows where {due} were due")
        out.append(_completed(h, source, rows))
    return out


__all__ = ["CARRIES", "Carried", "Ungrown", "rows_pass"]
