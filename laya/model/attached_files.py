"""The files a setting stores beside a checkpoint, read as untrusted input, as checkpoints are.

``laya attach`` (and ``laya evaluate``, ``depth``, ``network``, ``reproduce`` for the bundled settings) write beside a
head: the evaluation report (``report.json``, ``per_input.safetensors``), depth analytics (``depth.json``,
``depth_fit.json`` + ``.safetensors``, ``lens.csv``), the test-set sample (``sample.safetensors`` and its thumbnails
``sample_images.png``), the tuned lens (``tuned_lens.json`` + ``.safetensors``) and the network report
(``network.json`` + ``.safetensors``); the setting folder holds ``class_profiles.csv`` and the bundled example
images. A visitor can upload them and a shared models folder can hold anything. Each is read here, one mechanism
for an attached setting and a bundled one:

* confined (:func:`attached_file`): its real path (symlinks and ``..`` resolved, :func:`laya.paths.canonical_path`)
  must lie inside the setting folder (the checkpoint folder's parent), the rule of the bundled examples;
* bounded: a file's size before a byte is read (:func:`read_bytes`; JSON by :func:`read_json`, with its depth and
  integer digits, CSV by :func:`read_table`), a safetensors file's header (:mod:`laya.model.header`) against the
  shapes its JSON implies, and its element count against ``LAYA_MAX_PARAMS``, before a tensor is read or a module
  built (:func:`read_tensors`); an ``OSError`` is the file's refusal too (:func:`unreadable`).

Every refusal is an :class:`AttachedFileError` (a ``ValueError``) whose message names the file by its name (never
its server path) and what is wrong, so that a caller degrades exactly the view that needs the file.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from laya.model.budget import limits
from laya.model.header import Header, read_header
from laya.model.validation import CheckpointError, parse_int, refuse
from laya.paths import PathRefused, canonical_path

MAX_UNITS = 1024  # units of a network (a timm ViT-L has 24 blocks, a ResNet-152 50 bottlenecks)
MAX_WIDTH = 65536  # a unit's pooled width or a read-out's (as backbone.widths)


class AttachedFileError(ValueError):
    """A file stored beside a checkpoint that cannot be used; ``file`` its name, the message what is wrong."""

    def __init__(self, file: str, message: str) -> None:
        super().__init__(message)
        self.file = file


def field_error(file: str, field: str, value: Any, rule: str) -> AttachedFileError:
    """``"file: field = value: rule"``, the value shortened (:func:`laya.model.validation.refuse`)."""
    return AttachedFileError(file, f"{file}: {refuse(field, value, rule)}")


def attached_file(directory: str | Path, name: str, setting: str | Path | None = None) -> Path | None:
    """The real path of ``directory/name``, or None where there is no such entry.

    Raises:
        AttachedFileError: a link (or ``..``) leading outside the ``setting`` folder (default ``directory``'s
            parent), or an entry that is not a regular file.
    """
    directory = Path(directory)
    if not os.path.lexists(directory / name):
        return None
    try:
        real = canonical_path(directory / name, None, [Path(setting) if setting is not None else directory.parent])
    except PathRefused:
        raise AttachedFileError(name, f"{name} links outside its setting folder; it is not read") from None
    if not real.is_file():
        raise AttachedFileError(name, f"{name} is not a regular file")
    return real


def unreadable(name: str, error: OSError) -> AttachedFileError:
    """The refusal of a file the operating system would not read (permissions, a device error), naming its kind of
    error, never the server path the ``OSError`` holds."""
    return AttachedFileError(name, f"{name} cannot be read ({type(error).__name__})")


def read_bytes(path: Path, name: str, max_bytes: int) -> bytes:
    """The bytes of ``path`` (a real path from :func:`attached_file`), refused unread past ``max_bytes``.

    Raises:
        AttachedFileError: unreadable, or over ``max_bytes``.
    """
    try:
        if path.stat().st_size > max_bytes:
            raise AttachedFileError(name, f"{name} is over {max_bytes:,} bytes; it is not read")
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as error:
        raise unreadable(name, error) from None
    if len(data) > max_bytes:  # grown since its size was taken
        raise AttachedFileError(name, f"{name} is over {max_bytes:,} bytes; it is not read")
    return data


def read_json(path: Path, name: str, max_bytes: int) -> Any:
    """The JSON value of ``path`` (a real path from :func:`attached_file`), at most ``max_bytes`` read.

    Raises:
        AttachedFileError: unreadable, over ``max_bytes``, not JSON, nested too deeply, an integer of too many digits.
    """
    return parse_json(read_bytes(path, name, max_bytes), name)


def parse_json(data: bytes | str, name: str) -> Any:
    """``data`` (already bounded) as JSON, integers of at most ``MAX_INT_DIGITS`` digits.

    Raises:
        AttachedFileError: not JSON, nested too deeply, an integer of too many digits.
    """
    try:
        return json.loads(data, parse_int=parse_int)
    except RecursionError:
        raise AttachedFileError(name, f"{name} is nested too deeply") from None
    except CheckpointError as error:  # parse_int: an integer of too many digits
        raise AttachedFileError(name, f"{name}: {str(error).removeprefix('model.json ')}") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise AttachedFileError(name, f"{name} is not valid JSON ({type(error).__name__})") from None


LARGEST = 2**63  # a stored number's magnitude below it: a column of them stays int64 or float64 in pandas


def _real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) < LARGEST


KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "text": (lambda v: isinstance(v, str), "a text"),
    "note": (lambda v: v is None or isinstance(v, str), "a text or null"),
    "integer": (lambda v: type(v) is int, "an integer"),
    "count": (lambda v: type(v) is int and 0 <= v < LARGEST, "a non-negative integer"),
    "number": (lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)), "a number or null"),
    "real": (_real, "a finite number"),
    "finite": (lambda v: v is None or _real(v), "a finite number or null"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
    "object": (lambda v: isinstance(v, dict), "a JSON object"),
}  # a stored field's kinds (JSON), for check_value, check_record and check_records


def check_value(value: Any, file: str, field: str, kind: str) -> Any:
    """``value`` if it is of ``kind`` (:data:`KINDS`), else the refusal naming ``file`` and ``field``."""
    fits, rule = KINDS[kind]
    if not fits(value):
        raise field_error(file, field, value, f"must be {rule}")
    return value


def check_record(row: Any, file: str, field: str, columns: dict[str, str]) -> dict[str, Any]:
    """``row`` if a record (a JSON object) holding ``columns`` (name -> kind of :data:`KINDS`); its other fields
    are kept and never read. Refused naming ``file`` and the first field that does not fit, ``field.column``."""
    check_value(row, file, field, "object")
    for column, kind in columns.items():
        if column not in row:
            raise field_error(file, f"{field}.{column}", "(missing)", f"must be {KINDS[kind][1]}")
        check_value(row[column], file, f"{field}.{column}", kind)
    return row


def check_records(rows: Any, file: str, field: str, columns: dict[str, str]) -> list[dict[str, Any]]:
    """``rows`` if a list of records, each holding ``columns`` (:func:`check_record`, ``field[i]``)."""
    if not isinstance(rows, list):
        raise field_error(file, field, rows, "must be a list of records")
    for i, row in enumerate(rows):
        check_record(row, file, f"{field}[{i}]", columns)
    return rows


def read_table(path: Path, name: str, max_bytes: int, **options: Any) -> pd.DataFrame:
    """The CSV table of ``path`` (a real path from :func:`attached_file`), at most ``max_bytes`` read, parsed by
    ``pandas.read_csv(**options)``.

    Raises:
        AttachedFileError: unreadable, over ``max_bytes``, not a CSV table.
    """
    data = read_bytes(path, name, max_bytes)
    try:
        return pd.read_csv(io.BytesIO(data), **options)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:  # UnicodeDecodeError too
        raise AttachedFileError(name, f"{name} is not a CSV table ({type(error).__name__})") from None


def tensor_header(path: Path, name: str) -> Header:
    """Tensor name -> (shape, dtype) of the safetensors file ``path``, from its header alone
    (:func:`laya.model.header.read_header`), at most ``LAYA_MAX_PARAMS`` elements in all.

    Raises:
        AttachedFileError: a malformed header, or over the limit.
    """
    try:
        header = read_header(path, name)
    except CheckpointError as error:
        raise AttachedFileError(name, str(error)) from None
    except OSError as error:
        raise unreadable(name, error) from None
    total, limit = sum(math.prod(shape) for shape, _ in header.values()), limits().params
    if total > limit:
        raise AttachedFileError(name, f"{name} holds {total:,} elements, over the limit of {limit:,} "
                                      "(LAYA_MAX_PARAMS)")  # fmt: skip
    return header


def read_tensors(path: Path, name: str) -> dict[str, torch.Tensor]:
    """The tensors of ``path``, read once :func:`tensor_header` has been checked against what the caller expects.

    Raises:
        AttachedFileError: a body that does not read.
    """
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as error:
        raise AttachedFileError(name, f"{name} is not a readable safetensors file ({type(error).__name__})") from None


__all__ = ["KINDS", "LARGEST", "MAX_UNITS", "MAX_WIDTH", "AttachedFileError", "attached_file", "check_record",
           "check_records", "check_value", "field_error", "parse_json", "read_bytes", "read_json", "read_table",
           "read_tensors", "tensor_header", "unreadable"]
