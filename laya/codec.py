"""One codec for result dataclasses: a dataclass <-> ``(tensors, values)``, named tensors and JSON-ready plain values.

How a sandboxed worker hands a result over (:mod:`laya.sandbox`: the tensors as safetensors, the values as JSON)
and how a depth fit is stored (``depth_fit.safetensors``). Driven by the dataclass's fields and their type hints:

* ``Tensor``: one tensor under the field's name; ``Tensor | None`` is left out when None (None when missing).
* ``list[Tensor]`` / ``list[Tensor | None]``: one tensor per entry under ``key.format(i)`` (default
  ``"<field>.{}"``), None entries left out; the length is a plain value (``index=``) or the rows of another
  tensor field (``rows_of=``).
* ``dict[str, Tensor]``: one tensor per entry under ``key.format(name)``; the names, in order, a plain value
  (``index=``).
* a dataclass: its tensors under ``"<field>."``, its plain values (where it has any) as one plain value, None
  when the field is None; an optional one without plain values is there when one of its tensors is.
* anything else: a plain value (tuples as lists), read back by the type hint: ``str``, ``int``, ``float``,
  ``bool``, ``tuple[X, ...]``, ``dict[K, V]``, ``X | None``.

A field's stored form that differs from this is declared on the field, ``field(metadata=stored(...))``: another
key, where a list's length is, a tensor stored in another dtype. Fields with ``init=False`` are not stored; a
missing plain value of a field with a default gives the default. Whatever else does not fit raises ``ValueError``
naming the class, the field and the key.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import Tensor

CODEC = "laya.codec"  # the field metadata's key
T = TypeVar("T")
E = TypeVar("E", bound="Encoded")


@dataclass(frozen=True)
class Stored:
    """How one field is stored where it differs from the default (see :func:`stored`)."""

    key: str | None = None
    index: str | None = None
    rows_of: str | None = None
    dtype: tuple[torch.dtype, torch.dtype] | None = None


def stored(
    key: str | None = None,
    *,
    index: str | None = None,
    rows_of: str | None = None,
    dtype: tuple[torch.dtype, torch.dtype] | None = None,
) -> dict[str, Stored]:
    """Field metadata: ``key`` the stored name (a template with ``{}`` for a list's or a dict's entries);
    ``index`` the plain value holding a list's length or a dict's names; ``rows_of`` the tensor field whose rows
    count a list's entries; ``dtype`` ``(stored, loaded)``, e.g. ``(torch.uint8, torch.bool)``."""
    return {CODEC: Stored(key, index, rows_of, dtype)}


@dataclass(frozen=True)
class _Field:
    """One stored field: its name, kind (tensor, list, dict, nested, value), type hint and stored form."""

    name: str
    kind: str
    hint: Any
    optional: bool
    has_default: bool
    spec: Stored

    @property
    def key(self) -> str:
        return self.spec.key or (f"{self.name}.{{}}" if self.kind in ("list", "dict") else self.name)


def _without_none(hint: Any) -> tuple[Any, bool]:
    """``(hint without None, whether None was allowed)``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return hint, False


def _kind(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Tensor:
        return "tensor"
    if origin is list and _without_none(args[0])[0] is Tensor:
        return "list"
    if origin is dict and args[1] is Tensor:
        return "dict"
    return "nested" if dataclasses.is_dataclass(hint) else "value"


@functools.cache
def _plan(cls: type) -> tuple[_Field, ...]:
    """The stored fields of dataclass ``cls``, in field order."""
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint, optional = _without_none(hints[f.name])
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        plan.append(_Field(f.name, _kind(hint), hint, optional, has_default, f.metadata.get(CODEC, Stored())))
    return tuple(plan)


def _is_value(f: _Field) -> bool:
    """Whether field ``f`` stores a plain value: its own, a list's length or a dict's names, or a nested one's."""
    return f.kind == "value" or bool(f.spec.index) or (f.kind == "nested" and _has_values(f.hint))


def _has_values(cls: type) -> bool:
    """Whether ``cls`` stores any plain value (a nested one then stores them as one value of its parent)."""
    return any(_is_value(f) for f in _plan(cls))


def encode(obj: Any, prefix: str = "") -> tuple[dict[str, Tensor], dict[str, Any]]:
    """``(tensors, plain values)`` of the dataclass ``obj``; tensor names start with ``prefix``."""
    tensors: dict[str, Tensor] = {}
    values: dict[str, Any] = {}
    for f in _plan(type(obj)):
        value = getattr(obj, f.name)
        if f.kind in ("tensor", "list", "dict"):
            entries = enumerate(value) if f.kind == "list" else value.items() if f.kind == "dict" else [(0, value)]
            named = {f.key.format(i): t for i, t in entries if t is not None}
            tensors |= {prefix + k: t if f.spec.dtype is None else t.to(f.spec.dtype[0]) for k, t in named.items()}
            if f.spec.index:
                values[f.spec.index] = len(value) if f.kind == "list" else list(value)
        elif f.kind == "nested":
            inner = ({}, None) if value is None else encode(value, f"{prefix}{f.key}.")
            tensors |= inner[0]
            if _has_values(f.hint):
                values[f.key] = inner[1]
        else:
            values[f.key] = _plain(value)
    return tensors, values


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def decode(cls: type[T], tensors: dict[str, Tensor], values: dict[str, Any], prefix: str = "") -> T:
    """The dataclass ``cls`` from :func:`encode`'s ``(tensors, values)``. Raises ``ValueError`` naming the field
    for a missing key, a value of the wrong type or a tensor of the wrong dtype."""
    if not isinstance(values, dict):
        raise ValueError(f"{cls.__name__}: plain values must be a JSON object, got {type(values).__name__}")
    kwargs: dict[str, Any] = {}
    for f in _plan(cls):
        where, value_key = f"{cls.__name__}.{f.name}", f.spec.index or f.key
        if f.has_default and value_key not in values and _is_value(f):
            continue  # a plain value left out: the field's default
        if f.kind == "tensor":
            kwargs[f.name] = _tensor(where, tensors, prefix + f.key, f.optional, f.spec.dtype)
        elif f.kind in ("list", "dict"):
            if f.spec.rows_of:
                rows = next(g for g in _plan(cls) if g.name == f.spec.rows_of)
                index = range(len(_tensor(where, tensors, prefix + rows.key, False, None)))
            elif f.kind == "list":
                index = range(_value(where, values, f.spec.index, int, False))
            else:
                index = _value(where, values, f.spec.index, tuple[str, ...], False)
            optional = f.kind == "list" and _without_none(typing.get_args(f.hint)[0])[1]
            entries = {i: _tensor(where, tensors, prefix + f.key.format(i), optional, f.spec.dtype) for i in index}
            kwargs[f.name] = list(entries.values()) if f.kind == "list" else entries
        elif f.kind == "nested":
            inner = f"{prefix}{f.key}."
            if _has_values(f.hint):
                nested = _value(where, values, f.key, dict, f.optional)
                kwargs[f.name] = None if nested is None else decode(f.hint, tensors, nested, inner)
            elif f.optional and not any(k.startswith(inner) for k in tensors):
                kwargs[f.name] = None
            else:
                kwargs[f.name] = decode(f.hint, tensors, {}, inner)
        else:
            kwargs[f.name] = _value(where, values, f.key, f.hint, f.optional)
    return cls(**kwargs)


def _tensor(where: str, tensors: dict[str, Tensor], key: str, optional: bool, dtype: Any) -> Tensor | None:
    if key not in tensors:
        if optional:
            return None
        raise ValueError(f"{where}: no tensor {key!r} among the {len(tensors)} given")
    tensor = tensors[key]
    if not isinstance(tensor, Tensor):
        raise ValueError(f"{where}: {key!r} must be a tensor, got {type(tensor).__name__}")
    if dtype is None:
        return tensor
    if tensor.dtype != dtype[0]:
        raise ValueError(f"{where}: {key!r} must be stored as {dtype[0]}, got {tensor.dtype}")
    return tensor.to(dtype[1])


def _value(where: str, values: dict[str, Any], key: str | None, hint: Any, optional: bool) -> Any:
    if key not in values:
        raise ValueError(f"{where}: no value {key!r} among {sorted(values)}")
    value = values[key]
    if value is None and optional:
        return None
    try:
        return _read(hint, value)
    except (TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"{where}: {key!r} must be {_name(hint)}, got {value!r:.80}") from error


def _read(hint: Any, value: Any) -> Any:
    """``value`` (JSON) as the type ``hint`` says."""
    hint, optional = _without_none(hint)
    if value is None and optional:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in (str, int, float, bool):
        if isinstance(value, (list, dict)) or value is None:
            raise TypeError(f"{type(value).__name__} is not {hint.__name__}")
        return hint(value)
    if origin in (tuple, list):
        return origin(_read(args[0], v) for v in value)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise TypeError(f"{type(value).__name__} is not a dict")
        return {_read(args[0], k): _read(args[1], v) for k, v in value.items()} if args else value
    return value


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) if typing.get_origin(hint) is None else str(hint).replace("typing.", "")


class Encoded:
    """Mixin for a result dataclass: :meth:`to_tensors` and :meth:`from_tensors` by :func:`encode`/:func:`decode`."""

    def to_tensors(self) -> tuple[dict[str, Tensor], dict[str, Any]]:
        """``(tensors, plain values)`` (how a sandboxed worker hands it over); :meth:`from_tensors` inverts it."""
        return encode(self)

    @classmethod
    def from_tensors(cls: type[E], tensors: dict[str, Tensor], values: dict[str, Any]) -> E:
        """Inverse of :meth:`to_tensors`. Raises ``ValueError`` naming the field for a reply that does not fit."""
        return decode(cls, tensors, values)


__all__ = ["Encoded", "Stored", "decode", "encode", "stored"]
