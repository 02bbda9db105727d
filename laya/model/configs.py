"""Helpers shared by the dataclass configs (backbone, head, training): strict construction from dicts."""

from __future__ import annotations

from typing import Any, TypeVar

from laya.model.validation import check_fields

T = TypeVar("T")


def construct(cls: type[T], data: dict[str, Any], what: str) -> T:
    """``cls(**data)`` after :func:`laya.model.validation.check_fields`: unknown keys, wrong types and
    out-of-range values raise :class:`~laya.model.validation.CheckpointError` naming the field, value and rule."""
    check_fields(cls, data, what)
    return cls(**data)


__all__ = ["construct"]
