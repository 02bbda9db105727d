"""Numbers as tables print them: ``digits`` decimals, at least ``digits`` significant digits, never a string of
zeros before the first one.

``number_text(0.81234) -> "0.812"``, ``number_text(1.0) -> "1.000"``, ``number_text(0.0415) -> "0.0415"``,
``number_text(2.3e-10) -> "2.3e-10"``, and below ``floor`` (default ``1e-12``: float64 noise on a unit-scale
quantity) ``"< 1e-12"`` (``"> -1e-12"`` for a tiny negative); ``"–"`` for a missing value. Every display table of
the dashboard formats its plain numbers with :func:`number_text`, intervals with :func:`ci_text` (``0.812 [0.790,
0.833]``, a column of them with :func:`ci_cells`), rates with :func:`percent`, p-values with :func:`p_text` and
counts with their total with :func:`count_of`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

MISSING = "–"


def number_text(value: float | None, digits: int = 3, floor: float = 1e-12) -> str:
    """``value`` with ``digits`` decimals, more below 0.1 so that ``digits`` significant digits show, in
    scientific notation below 1e-3 and as a bound below ``floor`` in magnitude; exact zero prints ``0``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    value = float(value)
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if digits < 1:
        raise ValueError(f"digits must be >= 1, got {digits}")
    size = abs(value)
    if size == 0:
        return "0"
    if size < floor:
        return f"< {floor:g}" if value > 0 else f"> -{floor:g}"
    if size < 1e-3:
        mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"  # 2.30e-10 -> 2.3e-10
    decimals = max(digits, digits - 1 - math.floor(math.log10(size)))
    return f"{value:.{decimals}f}"


def is_missing(value: object) -> bool:
    """Whether ``value`` is None or a float NaN (numpy's included): shown as :data:`MISSING`."""
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value))


def percent(value: float | None, digits: int = 1) -> str:
    """``0.0415`` -> ``4.2%``; ``–`` if missing."""
    return MISSING if is_missing(value) else f"{100 * value:.{digits}f}%"


def p_text(p: float | None) -> str:
    """A p-value as it is read: ``p < 0.001`` under 0.001 (a resampled p of 0 is not zero), else 3 digits."""
    if is_missing(p):
        return MISSING
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def count_of(k: int, n: int) -> str:
    """``2 of 3``: a count with its total, never a fraction such as 0.6667."""
    return f"{k} of {n}"


def ci_text(entry: Mapping[str, float] | None, digits: int = 3) -> str:
    """``0.812 [0.790, 0.833]`` from an ``{estimate, low, high}`` dict; ``–`` if missing."""
    if not entry or is_missing(entry.get("estimate")):
        return MISSING
    if is_missing(entry.get("low")) or is_missing(entry.get("high")):
        return number_text(entry["estimate"], digits)
    return f"{entry['estimate']:.{digits}f} [{entry['low']:.{digits}f}, {entry['high']:.{digits}f}]"


def ci_cells(frame: pd.DataFrame, column: str, digits: int = 3) -> list[str]:
    """``estimate [low, high]`` per row from ``column``, ``column_low``, ``column_high`` (``–`` if missing)."""
    return [
        ci_text({"estimate": e, "low": lo, "high": hi}, digits) if not is_missing(e) else MISSING
        for e, lo, hi in zip(frame[column], frame[f"{column}_low"], frame[f"{column}_high"])
    ]


__all__ = [
    "MISSING",
    "ci_cells",
    "ci_text",
    "count_of",
    "is_missing",
    "number_text",
    "p_text",
    "percent",
]
