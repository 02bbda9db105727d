"""Numbers as tables print them: ``digits`` decimals, at least ``digits`` significant digits, never a string of
zeros before the first one.

``number_text(0.81234) -> "0.812"``, ``number_text(1.0) -> "1.000"``, ``number_text(0.0415) -> "0.0415"``,
``number_text(2.3e-10) -> "2.3e-10"``, and below ``floor`` (default ``1e-12``: float64 noise on a unit-scale
quantity) ``"< 1e-12"`` (``"> -1e-12"`` for a tiny negative); ``"–"`` for a missing value. Every display table of
the dashboard formats its plain numbers with :func:`number_text` (intervals: :func:`laya.app.views.ci_text`).
"""

from __future__ import annotations

import math

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


__all__ = ["MISSING", "number_text"]
