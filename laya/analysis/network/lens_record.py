"""The tuned lens as stored: ``tuned_lens.json``'s fields and the fit summary it shares with ``network.json``'s
``lens`` section, each checked for its kind and size before anything is sized or computed by it.

Both files are untrusted (:mod:`laya.model.attached_files`): a field of the wrong kind is refused with an
:class:`~laya.model.attached_files.AttachedFileError` naming the file and the field (``tuned_lens.json:
fit.constant = ['x']: must be 10 finite non-negative numbers, one per class``).
"""

from __future__ import annotations

import math
from typing import Any

from laya.model.attached_files import MAX_UNITS, MAX_WIDTH, field_error

LENS_CONFIG = "tuned_lens.json"
SPACES = ("residual", "pre-logits")


def whole(value: Any, low: int, high: int) -> bool:
    """An integer (not a boolean) in ``[low, high]``."""
    return type(value) is int and low <= value <= high


def number(value: Any, finite: bool = False) -> bool:
    """A JSON number (not a boolean), finite where asked."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (not finite or math.isfinite(value))


def _numbers_or_null(value: Any, length: int) -> bool:
    return isinstance(value, list) and len(value) == length and all(v is None or number(v) for v in value)


def check_config(data: dict[str, Any]) -> None:
    """The types and ranges of a stored :class:`~laya.analysis.network.lens.TunedLensConfig`'s fields: up to
    :data:`~laya.model.attached_files.MAX_UNITS` units named by texts, one width per unit, widths and classes in
    ``[1, MAX_WIDTH]``, ``space``, the fit options (``held_out`` a share in ``[0, 1)``, ``lr`` a finite number,
    counts non-negative integers), ``command`` and ``fit`` (:func:`check_fit`)."""
    units, dims = data["units"], data["dims"]
    if not isinstance(units, list) or not 1 <= len(units) <= MAX_UNITS:
        raise field_error(LENS_CONFIG, "units", units, f"must be a list of 1 to {MAX_UNITS} unit names")
    if not all(isinstance(u, str) and 0 < len(u) <= 200 for u in units):
        raise field_error(LENS_CONFIG, "units", units, "must be module names (texts of 1 to 200 characters)")
    if not isinstance(dims, list) or len(dims) != len(units) or not all(whole(d, 1, MAX_WIDTH) for d in dims):
        raise field_error(LENS_CONFIG, "dims", dims, f"must be one width in [1, {MAX_WIDTH}] per unit "
                                                     f"({len(units)} units)")  # fmt: skip
    for name in ("width", "classes"):
        if not whole(data[name], 1, MAX_WIDTH):
            raise field_error(LENS_CONFIG, name, data[name], f"must be an integer in [1, {MAX_WIDTH}]")
    if data.get("space", "pre-logits") not in SPACES:
        raise field_error(LENS_CONFIG, "space", data.get("space"), f"must be one of {SPACES}")
    for name in ("sample", "epochs", "patience", "batch_size", "seed"):
        if name in data and not whole(data[name], 0, 2**63 - 1):
            raise field_error(LENS_CONFIG, name, data[name], "must be a non-negative integer")
    if "held_out" in data and not (number(data["held_out"]) and 0 <= data["held_out"] < 1):
        raise field_error(LENS_CONFIG, "held_out", data["held_out"], "must be a share in [0, 1)")
    if "lr" in data and not number(data["lr"], finite=True):
        raise field_error(LENS_CONFIG, "lr", data["lr"], "must be a finite number")
    if not isinstance(data.get("command", ""), str):
        raise field_error(LENS_CONFIG, "command", data["command"], "must be a text")
    check_fit(data.get("fit", {}), LENS_CONFIG, "fit", units, data["classes"])


def check_fit(fit: Any, file: str, field: str, units: list[str], classes: int) -> dict[str, Any]:
    """A tuned lens's fit summary (:func:`~laya.analysis.network.lens_fit.fit_tuned_lens`) at ``field`` of ``file``,
    for ``units`` and ``classes``: every field optional (a lens stored before early stopping has fewer), each of
    its kind where present: ``train``, ``held_out`` inputs; per unit ``epochs_run``, ``best_epoch`` (non-negative
    integers), ``kl``, ``agreement`` and ``logit_kl`` (numbers or null; ``logit_kl`` may be null as a whole);
    ``constant`` the best constant distribution (one finite non-negative number per class), ``constant_kl``,
    ``exact`` (units of the lens), ``split`` (a text). Fields it does not know are kept and never read."""
    if not isinstance(fit, dict):
        raise field_error(file, field, fit, "must be a JSON object")
    U = len(units)

    def count(v: Any) -> bool:
        return whole(v, 0, 2**63 - 1)

    def counts(v: Any) -> bool:
        return isinstance(v, list) and len(v) == U and all(map(count, v))

    per_unit = f"must be one number or null per unit ({U})"
    rules: dict[str, tuple[Any, str]] = {
        "train": (count, "must be a non-negative integer"),
        "held_out": (count, "must be a non-negative integer"),
        "epochs_run": (counts, f"must be one non-negative integer per unit ({U})"),
        "best_epoch": (counts, f"must be one non-negative integer per unit ({U})"),
        "kl": (lambda v: _numbers_or_null(v, U), per_unit),
        "agreement": (lambda v: _numbers_or_null(v, U), per_unit),
        "logit_kl": (lambda v: v is None or _numbers_or_null(v, U),
                     f"must be null or one number or null per unit ({U})"),
        "constant": (lambda v: isinstance(v, list) and len(v) == classes
                     and all(number(c, finite=True) and c >= 0 for c in v),
                     f"must be {classes} finite non-negative numbers, one per class"),
        "constant_kl": (lambda v: v is None or number(v), "must be a number or null"),
        "exact": (lambda v: isinstance(v, list) and all(isinstance(u, str) for u in v) and set(v) <= set(units),
                  "must be a list of units of the lens"),
        "split": (lambda v: isinstance(v, str), "must be a text"),
    }  # fmt: skip
    for name, (fits, rule) in rules.items():
        if name in fit and not fits(fit[name]):
            raise field_error(file, f"{field}.{name}", fit[name], rule)
    return fit


__all__ = ["LENS_CONFIG", "SPACES", "check_config", "check_fit", "number", "whole"]
