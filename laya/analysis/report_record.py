"""The fields of a stored evaluation report (``report.json``, :mod:`laya.analysis.report`) that the pages read, each
checked before a view is built, down to the cells: the file is untrusted (:mod:`laya.model.attached_files`), and a
field that does not fit is refused with an :class:`~laya.model.attached_files.AttachedFileError` that names it
(``report.json: faithfulness['mean']['signed']['saliency'].top1.low = 'x': must be a finite number or null``). The
arrays of its per-input values (``per_input.safetensors``) are read by :func:`read_per_input`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import Tensor

from laya.analysis.head.attribution import REDUCTION_LABELS
from laya.analysis.head.faithfulness import METRIC_LABELS, METRICS, ROBUST_METRICS
from laya.model.attached_files import (
    KINDS,
    MAX_UNITS,
    AttachedFileError,
    attached_file,
    check_record,
    check_records,
    check_value,
    field_error,
    read_tensors,
    tensor_header,
)
from laya.model.heads import ABLATION_MODES

REPORT_FILE = "report.json"
PER_INPUT_FILE = "per_input.safetensors"
MAX_REPORT_JSON = 64 << 20  # a report.json is a few hundred KB (per-class tables and deletion curves of 20 layers)
TEXTS = ("classes", "layer_names", "methods", "modes", "reductions")  # lists of texts, all but the methods never empty
KNOWN = {"modes": ABLATION_MODES, "reductions": tuple(REDUCTION_LABELS)}  # the names the pages look their help up by
CI = dict.fromkeys(("estimate", "low", "high"), "finite")  # a 95 % interval: {estimate, low, high}
ENTRY = {"status": "note", "n_testable": "count", "n_spearman": "count"}  # one method's faithfulness
COMPARISON = {**dict.fromkeys(("mode", "a", "b", "reduction_a", "reduction_b"), "text"), "p_value": "real",
              "tie": "flag"}  # fmt: skip
LAYER_ROW = {"layer": "text", "layer_index": "count", "mean": "finite", "std": "finite", "count": "count",
             "ci_low": "finite", "ci_high": "finite"}  # fmt: skip
CLASS_ROW = {"class": "text", "class_index": "count", "layer": "text", "layer_index": "count", "subset": "text",
             "mean": "finite", "std": "finite", "count": "count"}  # fmt: skip


def _nested(value: Any, field: str, levels: int) -> Iterator[tuple[str, Any]]:
    """``(field['a']['b'], leaf)`` for each leaf of JSON objects nested ``levels`` deep (mode -> reduction ->
    method), each level checked to be an object."""
    check_value(value, REPORT_FILE, field, "object")
    for key, inner in value.items():
        name = f"{field}[{key[:40]!r}]"
        if levels == 1:
            yield name, inner
        else:
            yield from _nested(inner, name, levels - 1)


def _intervals(values: Any, field: str, length: int) -> None:
    """``values``: ``length`` intervals (:data:`CI`), one per layer."""
    if not isinstance(values, list) or len(values) != length:
        raise field_error(REPORT_FILE, field, values, f"must be {length} intervals, one per layer")
    for i, ci in enumerate(values):
        check_record(ci, REPORT_FILE, f"{field}[{i}]", CI)


def _entry(entry: Any, field: str) -> None:
    """One method's faithfulness: its status (null where it was measured) and counts, each metric's interval (null
    only where the status says why)."""
    check_record(entry, REPORT_FILE, field, ENTRY)
    for metric in METRICS + ROBUST_METRICS:
        if entry.get(metric) is not None:
            check_record(entry[metric], REPORT_FILE, f"{field}.{metric}", CI)
        elif metric in METRICS and entry["status"] is None:
            raise field_error(REPORT_FILE, f"{field}.{metric}", entry.get(metric), "must be an interval where the "
                                                                                   "status is null")  # fmt: skip


def _profiles(profiles: Any) -> None:
    """The layer profiles per reduction and method, the class x layer tables of scores and LOO drops (one row per
    subset, class and layer: the heatmaps pivot them) and the LOO table's mode."""
    check_value(profiles, REPORT_FILE, "profiles", "object")
    for name, rows in _nested(profiles.get("layer", {}), "profiles['layer']", 2):
        check_records(rows, REPORT_FILE, name, LAYER_ROW)
    for key in ("class_layer", "class_loo"):
        rows = check_records(profiles.get(key, []), REPORT_FILE, f"profiles.{key}", CLASS_ROW)
        cells = [(r["subset"], r["class_index"], r["layer_index"]) for r in rows]
        if len(set(cells)) != len(cells):
            raise field_error(REPORT_FILE, f"profiles.{key}", f"{len(cells) - len(set(cells))} repeated cells",
                              "must hold one row per subset, class and layer")  # fmt: skip
    check_value(profiles.get("class_loo_mode"), REPORT_FILE, "profiles.class_loo_mode", "text")


def checked_report(data: Any) -> dict[str, Any]:
    """``report.json``'s fields that the pages read, each of its kind: the lists of texts (:data:`TEXTS`: classes and
    layers never empty, modes and reductions known ones, no name twice); ``accuracy`` (``macro_f1``) and their intervals finite;
    ``faithfulness`` per mode, reduction and method (:func:`_entry`), the ``deletion_curves`` and ``loo``
    (every mode's) intervals one per layer, ``comparisons`` of known metrics with finite differences and p-values,
    the ``profiles`` (:func:`_profiles`), per-class accuracies and counts, the class x class confusion counts, the
    seed and the IG options. Fields it does not know are kept unread."""
    if not isinstance(data, dict) or "faithfulness" not in data or "accuracy" not in data:
        raise AttachedFileError(REPORT_FILE, f"{REPORT_FILE} is not a LAYA evaluation report")
    if "reductions" not in data:
        raise AttachedFileError(REPORT_FILE, f"{REPORT_FILE} was written by an older laya (no CIs or reductions); "
                                             "rerun `python -m laya evaluate`")  # fmt: skip
    for field in TEXTS:
        value, known = data.get(field), KNOWN.get(field)
        if (not isinstance(value, list) or len(value) > MAX_UNITS or not all(isinstance(v, str) for v in value)
                or (field != "methods" and not value) or (known and not set(value) <= set(known))):  # fmt: skip
            rule = f"must be a list of 1 to {MAX_UNITS} texts" + (f" among {list(known)}" if known else "")
            raise field_error(REPORT_FILE, field, value, rule)
        if len(set(value)) < len(value):  # a name twice: the pages' tables keyed by it would hold two columns as one
            twice = next(v for v in value if value.count(v) > 1)
            raise field_error(REPORT_FILE, field, value, f"must name each entry once ({twice!r} is there twice)")
    check_value(data.get("primary_method"), REPORT_FILE, "primary_method", "text")
    check_value(data["accuracy"], REPORT_FILE, "accuracy", "finite")
    check_value(data.get("macro_f1"), REPORT_FILE, "macro_f1", "finite")
    for field in ("accuracy_ci", "macro_f1_ci"):
        if data.get(field) is not None:
            check_record(data[field], REPORT_FILE, field, CI)
    for name, entry in _nested(data["faithfulness"], "faithfulness", 3):
        _entry(entry, name)
    layers = len(data["layer_names"])
    for name, curve in _nested(data.get("deletion_curves", {}), "deletion_curves", 3):
        _intervals(curve, name, layers)
    loo = check_value(data.get("loo"), REPORT_FILE, "loo", "object")
    for mode in data["modes"]:
        row = check_value(loo.get(mode), REPORT_FILE, f"loo[{mode!r}]", "object")
        for key in ("mean_drop_ci", "flip_rate_ci"):
            _intervals(row.get(key), f"loo[{mode!r}].{key}", layers)
    for i, comparison in enumerate(check_records(data.get("comparisons", []), REPORT_FILE, "comparisons", COMPARISON)):
        if comparison.get("metric") not in METRIC_LABELS:
            raise field_error(REPORT_FILE, f"comparisons[{i}].metric", comparison.get("metric"),
                              f"must be among {list(METRIC_LABELS)}")  # fmt: skip
        check_record(comparison.get("difference"), REPORT_FILE, f"comparisons[{i}].difference",
                     dict.fromkeys(CI, "real"))  # fmt: skip
    _profiles(data.get("profiles", {}))
    accuracies = check_value(data.get("per_class_accuracy", {}), REPORT_FILE, "per_class_accuracy", "object")
    check_record(accuracies, REPORT_FILE, "per_class_accuracy", dict.fromkeys(accuracies, "finite"))
    check_record(data.get("class_counts", {}), REPORT_FILE, "class_counts", dict.fromkeys(accuracies, "count"))
    classes = len(data["classes"])
    matrix = data.get("confusion_matrix")
    if not isinstance(matrix, list) or len(matrix) != classes or not all(
            isinstance(row, list) and len(row) == classes and all(map(KINDS["count"][0], row)) for row in matrix):
        raise field_error(REPORT_FILE, "confusion_matrix", matrix, f"must be {classes} x {classes} counts")
    check_value(data.get("checkpoint", {}).get("seed") if isinstance(data.get("checkpoint"), dict) else None,
                REPORT_FILE, "checkpoint.seed", "count")  # fmt: skip
    options = check_value(data.get("options", {}), REPORT_FILE, "options", "object")
    if not isinstance(options.get("ig"), str):
        check_value(options.get("ig_steps"), REPORT_FILE, "options.ig_steps", "count")
    for field in ("headline", "dataset"):
        check_value(data.get(field, {}), REPORT_FILE, field, "object")
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
