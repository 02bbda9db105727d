"""Values for strict JSON: what every report (``report.json``, ``depth.json``, ``exits.json``, ``network.json``)
passes through before it is written."""

from __future__ import annotations

import math
from typing import Any


def json_safe(value: Any) -> Any:
    """``value`` for strict JSON: dicts and lists (tuples as lists) converted throughout, NaN and infinities as None,
    numpy and torch scalars as Python numbers."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    return None if isinstance(value, float) and not math.isfinite(value) else value


def split_table(table: Any) -> dict[str, Any]:
    """A DataFrame in pandas' ``split`` layout as plain lists (``index``, ``columns``, ``data``), the form the
    reports store tables in."""
    split = table.to_dict(orient="split")
    return {"index": list(split["index"]), "columns": list(split["columns"]), "data": split["data"]}


__all__ = ["json_safe", "split_table"]
