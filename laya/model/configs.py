"""Helpers shared by the dataclass configs (backbone, head, training): strict construction from dicts."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def construct(cls: type[T], data: dict[str, Any], what: str) -> T:
    """``cls(**data)``, refusing keys ``cls`` does not have with a message naming the valid ones."""
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown {what} config keys {sorted(unknown)}; expected a subset of {sorted(known)}")
    return cls(**data)


__all__ = ["construct"]
