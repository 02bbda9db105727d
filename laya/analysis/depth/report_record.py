"""The fields of a stored ``depth.json`` (:mod:`laya.analysis.depth.report`) that the pages read, each checked for
its kind before a view is built: the file is untrusted (:mod:`laya.model.attached_files`), and a field of the wrong
kind is refused with an :class:`~laya.model.attached_files.AttachedFileError` that names it."""

from __future__ import annotations

from typing import Any

from laya.model.attached_files import MAX_UNITS, check_record, check_records, check_value, field_error

DEPTH_FILE = "depth.json"
MAX_DEPTH_JSON = 64 << 20  # a depth.json is a few hundred KB (ROC curves thinned to 200 points per score and task)
DEPTH = {"class": "text", "n": "count", "errors": "count", **dict.fromkeys(
    [f"{m}{e}" for m in ("prediction_depth", "overthinking_rate", "overthought_errors") for e in ("", "_low", "_high")],
    "finite")}  # fmt: skip
TABLES: dict[tuple[str, ...], dict[str, str]] = {  # where each table lies, and the columns the views read
    ("readout_accuracy",): dict.fromkeys(("estimate", "low", "high", "level"), "finite"),
    ("prediction_depth",): DEPTH,
    ("prediction_depth_probes",): DEPTH,
    ("logit_attribution",): {"class": "text", "layer": "text", "layer_index": "count", "mean": "finite",
                             "count": "count"},
    ("pruning",): {"criterion": "text", "layers_kept": "count", "orders": "count", "removed": "text",
                   "removes_deepest": "flag", **dict.fromkeys(("accuracy", "accuracy_low", "accuracy_high",
                   "refit_accuracy", "refit_low", "refit_high", "speedup"), "finite")},
    ("early_exit", "curve"): dict.fromkeys(("threshold", "accuracy", "accuracy_low", "accuracy_high", "exited",
                                            "mean_depth", "cost"), "finite"),
    ("detection", "table"): {"score": "text", "label": "text", "task": "text", "n": "count", "positives": "count",
                             **dict.fromkeys(("auroc", "auroc_low", "auroc_high", "aupr", "fpr95", "vs_msp"),
                                             "finite")},
    ("detection", "roc"): {"score": "text", "task": "text", "fpr": "finite", "tpr": "finite"},
}  # fmt: skip  # numbers finite or null (a NaN written as null): the tables read them as float columns, null as NaN
FIELDS = {("command",): "text", ("readout_source",): "text", ("n_test",): "count", ("n_train",): "count",
          ("accuracy",): "real", ("early_exit", "at_1pt", "threshold"): "finite",
          ("early_exit", "at_1pt", "saved"): "real"}  # fmt: skip


def _at(record: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = record
    for i, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            raise field_error(DEPTH_FILE, ".".join(path[: i + 1]), "(missing)", "the depth report needs it")
        node = node[key]
    return node


def checked_depth(record: Any) -> dict[str, Any]:
    """``depth.json``'s fields that the pages read, each of its kind: ``classes`` and ``layer_names`` texts, the
    command, counts and headline numbers, every table (:data:`TABLES`) a list of records holding the columns the
    views read, the detection's named sets and thresholds objects. Fields it does not know are kept unread."""
    if not isinstance(record, dict):
        raise field_error(DEPTH_FILE, "(the file)", record, "must be a JSON object")
    for field in ("classes", "layer_names"):
        value = _at(record, (field,))
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_UNITS or not all(isinstance(v, str)
                                                                                      for v in value):  # fmt: skip
            raise field_error(DEPTH_FILE, field, value, f"must be a list of 1 to {MAX_UNITS} texts")
    for path, kind in FIELDS.items():
        check_value(_at(record, path), DEPTH_FILE, ".".join(path), kind)
    for path, columns in TABLES.items():
        if path[0] in record or path[0] != "prediction_depth_probes":  # absent from a report before the probes
            check_records(_at(record, path), DEPTH_FILE, ".".join(path), columns)
    if len(record["readout_accuracy"]) != len(record["layer_names"]):
        raise field_error(DEPTH_FILE, "readout_accuracy", f"{len(record['readout_accuracy'])} rows",
                          f"must hold one row per layer ({len(record['layer_names'])})")  # fmt: skip
    detection = _at(record, ("detection",))
    for field in ("ood_descriptions", "flag_thresholds", "ood_sets"):
        if not isinstance(detection.get(field, {}), dict):
            raise field_error(DEPTH_FILE, f"detection.{field}", detection[field], "must be a JSON object")
    thresholds = detection.get("flag_thresholds", {})
    check_record(thresholds, DEPTH_FILE, "detection.flag_thresholds", dict.fromkeys(thresholds, "finite"))
    check_value(detection.get("flag_rate", 0.05), DEPTH_FILE, "detection.flag_rate", "real")
    if not isinstance(record.get("options", {}), dict):
        raise field_error(DEPTH_FILE, "options", record["options"], "must be a JSON object")
    if not isinstance(record.get("readout_kind", ""), str) or not isinstance(record.get("covariance", ""), str):
        raise field_error(DEPTH_FILE, "readout_kind/covariance", [record.get("readout_kind"),
                          record.get("covariance")], "must be texts")  # fmt: skip
    return record


__all__ = ["DEPTH_FILE", "FIELDS", "MAX_DEPTH_JSON", "TABLES", "checked_depth"]
