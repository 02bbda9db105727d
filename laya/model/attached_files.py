"""The files an attached setting stores beside a checkpoint, read as untrusted input, as checkpoints are.

``laya attach`` and ``laya network`` write the tuned lens (``tuned_lens.json`` + ``.safetensors``), the network
report (``network.json`` + ``.safetensors``) and the sample's thumbnails (``sample_images.png``) beside a head; a
visitor can upload them and a shared models folder can hold anything. Each is read here:

* confined (:func:`attached_file`): its real path (symlinks and ``..`` resolved, :func:`laya.paths.canonical_path`)
  must lie inside the setting folder (the checkpoint folder's parent), the rule of the bundled examples;
* bounded: a JSON file's bytes before it is read (:func:`read_json`: depth and integer digits too), a safetensors
  file's header (:mod:`laya.model.header`) against the shapes its JSON implies, and its element count against
  ``LAYA_MAX_PARAMS``, before a tensor is read or a module built (:func:`read_tensors`).

Every refusal is an :class:`AttachedFileError` (a ``ValueError``) whose message names the file by its name (never
its server path) and what is wrong, so that a caller degrades exactly the view that needs the file.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

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


def read_json(path: Path, name: str, max_bytes: int) -> Any:
    """The JSON value of ``path`` (a real path from :func:`attached_file`), at most ``max_bytes`` read.

    Raises:
        AttachedFileError: over ``max_bytes``, not JSON, nested too deeply, an integer of too many digits.
    """
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise AttachedFileError(name, f"{name} is over {max_bytes:,} bytes; it is not read")
    try:
        return json.loads(data, parse_int=parse_int)
    except RecursionError:
        raise AttachedFileError(name, f"{name} is nested too deeply") from None
    except CheckpointError as error:  # parse_int: an integer of too many digits
        raise AttachedFileError(name, f"{name}: {str(error).removeprefix('model.json ')}") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise AttachedFileError(name, f"{name} is not valid JSON ({type(error).__name__})") from None


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


__all__ = ["MAX_UNITS", "MAX_WIDTH", "AttachedFileError", "attached_file", "field_error", "read_json", "read_tensors",
           "tensor_header"]
