"""The measured early-exit report (``exits.json``, ``python -m laya exits``, :mod:`laya.analysis.depth.measured`) as
the pages and ``laya exits --readout-only`` read it back: the file is untrusted (:mod:`laya.model.attached_files`),
so it is confined to the setting folder, bounded, and every field they read is checked before a view is built;
one that does not fit is refused with an :class:`~laya.model.attached_files.AttachedFileError` naming it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from laya.model.attached_files import attached_file, check_records, check_value, field_error, read_json

EXITS_FILE = "exits.json"
MAX_EXITS_JSON = 16 << 20  # an exits.json is tens of KB (one run per policy and exit kind)
MAX_BATCHES = 16  # batch sizes a report times (the bundled ones: 1, 64, 1024)
RUN = {"policy": "text", "exits": "text", "parameter": "finite",
       **dict.fromkeys(("accuracy", "accuracy_low", "accuracy_high", "macs", "macs_saved"), "real")}  # fmt: skip
BATCH = re.compile(r"saved_b([0-9]{1,7})")  # a run's wall-clock saving at one batch size


def checked_exits(record: Any) -> dict[str, Any]:
    """``exits.json``'s fields that are read, each of its kind: ``command`` a text and ``n_test`` a count; ``runs``
    records of ``policy`` and ``exits`` texts, finite accuracies (with their CI) and MACs, a threshold or level
    (``parameter``, null for the full model), and at every batch size the report times (``saved_b<B>``, at most
    :data:`MAX_BATCHES`) the saving and the plain timing (``plain_ms_b<B>``), finite or null; per exit kind one
    full-model run and a confidence run with its threshold (what the verdict compares); ``truncation`` and
    ``alpha_vs_confidence`` null or lists of records, ``kept`` null or an object. Fields it does not know are kept
    unread."""
    check_value(record, EXITS_FILE, "(the file)", "object")
    check_value(record.get("command"), EXITS_FILE, "command", "text")
    check_value(record.get("n_test"), EXITS_FILE, "n_test", "count")
    runs = record.get("runs")
    if not isinstance(runs, list) or not runs:
        raise field_error(EXITS_FILE, "runs", runs, "must be a non-empty list of records")
    keys = {k for run in runs if isinstance(run, dict) for k in run if k.startswith("saved_b")}
    odd = sorted(k for k in keys if not BATCH.fullmatch(k))
    if odd or len(keys) > MAX_BATCHES:
        raise field_error(EXITS_FILE, "runs", sorted(keys), f"must time at most {MAX_BATCHES} batch sizes, each "
                                                           "saved_b<B> with B a whole number")  # fmt: skip
    timed = {f"{what}_b{k.removeprefix('saved_b')}": "finite" for k in sorted(keys) for what in ("saved", "plain_ms")}
    check_records(runs, EXITS_FILE, "runs", RUN | timed)
    for kind in dict.fromkeys(run["exits"] for run in runs):
        part = [run for run in runs if run["exits"] == kind]
        full = [run for run in part if run["policy"] == "full model"]
        if len(full) != 1 or not any(run["policy"].startswith("confidence") and run["parameter"] is not None
                                     for run in part):  # fmt: skip
            raise field_error(EXITS_FILE, "runs", kind, "each exit kind needs one 'full model' run and a "
                                                        "'confidence' run with its threshold")  # fmt: skip
    for field in ("truncation", "alpha_vs_confidence"):
        if record.get(field) is not None:
            check_records(record[field], EXITS_FILE, field, {})
    if record.get("kept") is not None:
        check_value(record["kept"], EXITS_FILE, "kept", "object")
    return record


def load_exits(directory: str | Path) -> dict[str, Any] | None:
    """The ``exits.json`` beside a checkpoint, or None where there is none: confined to the setting folder, at most
    :data:`MAX_EXITS_JSON` bytes, its fields checked (:func:`checked_exits`).

    Raises:
        AttachedFileError: a file that does not read or a field that does not fit (its message names both).
    """
    path = attached_file(Path(directory), EXITS_FILE)
    return None if path is None else checked_exits(read_json(path, EXITS_FILE, MAX_EXITS_JSON))


__all__ = ["EXITS_FILE", "MAX_EXITS_JSON", "checked_exits", "load_exits"]
