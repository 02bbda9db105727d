"""The sections of a stored evaluation report (``report.json``, :mod:`laya.analysis.report`), each checked for its
kind before a page reads it: the file is untrusted (:mod:`laya.model.attached_files`), and a section of the wrong
kind is refused with an :class:`~laya.model.attached_files.AttachedFileError` that names it. The arrays of its
per-input values (``per_input.safetensors``) are read by :func:`read_per_input`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from laya.model.attached_files import (
    MAX_UNITS,
    AttachedFileError,
    attached_file,
    check_records,
    check_value,
    field_error,
    read_tensors,
    tensor_header,
)

REPORT_FILE = "report.json"
PER_INPUT_FILE = "per_input.safetensors"
MAX_REPORT_JSON = 64 << 20  # a report.json is a few hundred KB (per-class tables and deletion curves of 20 layers)
TEXTS = ("classes", "layer_names", "methods", "modes", "reductions")
OBJECTS = ("faithfulness", "deletion_curves", "loo", "profiles", "options", "headline", "dataset")


def checked_report(data: Any) -> dict[str, Any]:
    """``report.json``'s sections, each of its kind: ``accuracy`` a number, ``primary_method`` a text, the lists of
    texts (:data:`TEXTS`), the sections that map modes, reductions and methods to their values objects
    (:data:`OBJECTS`), ``comparisons`` a list of records (``mode``, ``metric``, ``a``, ``b`` texts). Their cells are
    read by the views as :func:`laya.analysis.evaluate.evaluate` writes them."""
    if not isinstance(data, dict) or "faithfulness" not in data or "accuracy" not in data:
        raise AttachedFileError(REPORT_FILE, f"{REPORT_FILE} is not a LAYA evaluation report")
    if "reductions" not in data:
        raise AttachedFileError(REPORT_FILE, f"{REPORT_FILE} was written by an older laya (no CIs or reductions); "
                                             "rerun `python -m laya evaluate`")  # fmt: skip
    check_value(data["accuracy"], REPORT_FILE, "accuracy", "number")
    check_value(data.get("primary_method", ""), REPORT_FILE, "primary_method", "text")
    for field in TEXTS:
        value = data.get(field, [])
        if not isinstance(value, list) or len(value) > MAX_UNITS or not all(isinstance(v, str) for v in value):
            raise field_error(REPORT_FILE, field, value, f"must be a list of at most {MAX_UNITS} texts")
    for field in OBJECTS:
        if not isinstance(data.get(field, {}), dict):
            raise field_error(REPORT_FILE, field, data[field], "must be a JSON object")
    check_records(data.get("comparisons", []), REPORT_FILE, "comparisons", dict.fromkeys(("mode", "metric", "a", "b"),
                                                                                         "text"))  # fmt: skip
    return data


def read_per_input(directory: str | Path) -> dict[str, Tensor] | None:
    """The evaluation's per-input arrays (``per_input.safetensors`` beside ``report.json``, never pickled), or None
    where there is none: confined to the setting folder, the header within ``LAYA_MAX_PARAMS``, every array
    one-dimensional and of one length (one value per input), before one is read.

    Raises:
        AttachedFileError: a file that does not read or does not fit (its message names the file).
    """
    path = attached_file(Path(directory), PER_INPUT_FILE)
    if path is None:
        return None
    header = tensor_header(path, PER_INPUT_FILE)
    lengths = {shape[0] for shape, _ in header.values() if len(shape) == 1}
    odd = [k for k, (shape, _) in header.items() if len(shape) != 1]
    if odd or len(lengths) > 1:
        raise AttachedFileError(PER_INPUT_FILE, f"{PER_INPUT_FILE}: {[k[:60] for k in odd[:4]] or 'its arrays'} "
                                                "are not arrays of one length (one value per input)")
    return read_tensors(path, PER_INPUT_FILE)


__all__ = ["MAX_REPORT_JSON", "PER_INPUT_FILE", "REPORT_FILE", "checked_report", "read_per_input"]
