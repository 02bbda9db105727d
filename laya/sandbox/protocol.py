"""The wire format between the dashboard and its sandboxed workers: JSON and raw bytes, never pickle.

A message is one frame::

    b"LAYA" | u32 json length | u64 blob length | UTF-8 JSON object | blob

Requests carry their arguments in the JSON and an image or uploaded files in the blob; replies
carry plain values in the JSON and tensors as a safetensors blob (:func:`pack` / :func:`unpack`).
Both lengths are checked against caps before anything is read, so a confused or hostile peer
cannot make the reader allocate more than :data:`MAX_JSON` + :data:`MAX_BLOB` bytes.
"""

from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO

from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from torch import Tensor

MAGIC = b"LAYA"
HEADER = struct.Struct("<4sIQ")
MAX_JSON = 16 << 20
MAX_BLOB = 1 << 30


class ProtocolError(RuntimeError):
    """A frame that breaks the format: wrong magic, over-long parts, truncated, not a JSON object."""


def encode(message: dict[str, Any], blob: bytes = b"") -> bytes:
    """One frame (``message`` must be JSON-serialisable; NaN and Inf are allowed, as Python's json writes them)."""
    text = json.dumps(message, separators=(",", ":")).encode()
    if len(text) > MAX_JSON or len(blob) > MAX_BLOB:
        raise ProtocolError(f"message too large ({len(text)} B JSON, {len(blob)} B blob)")
    return HEADER.pack(MAGIC, len(text), len(blob)) + text + blob


def _read_exactly(stream: BinaryIO, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError(f"the peer closed the pipe {n - left} of {n} bytes into a frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_frame(stream: BinaryIO, message: dict[str, Any], blob: bytes = b"") -> None:
    stream.write(encode(message, blob))
    stream.flush()


def check_header(head: bytes) -> tuple[int, int]:
    """``(JSON length, blob length)`` of a frame header. Raises :class:`ProtocolError` past the caps."""
    magic, n_json, n_blob = HEADER.unpack(head)
    if magic != MAGIC or n_json > MAX_JSON or n_blob > MAX_BLOB:
        raise ProtocolError(f"bad frame header (magic {magic!r}, {n_json} B JSON, {n_blob} B blob)")
    return n_json, n_blob


def parse_json(text: bytes) -> dict[str, Any]:
    """A frame's JSON part. Raises :class:`ProtocolError` if it is not a JSON object."""
    try:
        message = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ProtocolError(f"frame JSON does not parse: {error}") from error
    if not isinstance(message, dict):
        raise ProtocolError("frame JSON is not an object")
    return message


def read_frame(stream: BinaryIO) -> tuple[dict[str, Any], bytes]:
    """The next frame's JSON object and blob. Raises ``EOFError`` (the peer closed the pipe, between or inside
    frames) or :class:`ProtocolError`."""
    head = stream.read(HEADER.size)
    if not head:
        raise EOFError("the peer closed the pipe")
    if len(head) < HEADER.size:
        head += _read_exactly(stream, HEADER.size - len(head))
    n_json, n_blob = check_header(head)
    message = parse_json(_read_exactly(stream, n_json))
    return message, _read_exactly(stream, n_blob)


def pack(tensors: dict[str, Tensor]) -> bytes:
    """Tensors as a safetensors blob (each one copied contiguous, so views of one storage can be saved)."""
    return save_tensors({k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}) if tensors else b""


def unpack(blob: bytes) -> dict[str, Tensor]:
    """The tensors of a :func:`pack` blob. Raises :class:`ProtocolError` for anything else."""
    if not blob:
        return {}
    try:
        return load_tensors(blob)
    except Exception as error:  # safetensors raises its own error types for malformed headers
        raise ProtocolError(f"reply tensors do not parse: {type(error).__name__}") from error


def join_files(files: dict[str, bytes]) -> tuple[list[list[Any]], bytes]:
    """Several named files as one blob: ``([[name, length], ...], concatenated bytes)``."""
    return [[name, len(data)] for name, data in files.items()], b"".join(files.values())


def split_files(index: list[list[Any]], blob: bytes) -> dict[str, bytes]:
    """Inverse of :func:`join_files`. Raises :class:`ProtocolError` if the lengths do not add up."""
    files, start = {}, 0
    for name, length in index:
        if not isinstance(name, str) or not isinstance(length, int) or length < 0:
            raise ProtocolError("bad file index")
        files[name] = blob[start : start + length]
        start += length
    if start != len(blob):
        raise ProtocolError("file index does not match the blob")
    return files


__all__ = [
    "HEADER",
    "MAX_BLOB",
    "MAX_JSON",
    "ProtocolError",
    "check_header",
    "encode",
    "join_files",
    "pack",
    "parse_json",
    "read_frame",
    "split_files",
    "unpack",
    "write_frame",
]
