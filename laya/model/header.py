"""A safetensors file's header, read and checked without loading a tensor or building the model.

A safetensors file is ``N`` (8 bytes, little-endian) + ``N`` bytes of JSON + the tensor data. The
JSON maps each tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets into the
data), plus an optional ``"__metadata__"`` object of strings. :func:`read_header` parses and checks
that structure (dtypes known, shapes of non-negative integers, offsets that match the shapes and lie
inside the file); :func:`check_header` compares it with the state a model config describes
(:attr:`laya.model.budget.Budget.state`): the same names, shapes, and dtypes, the floating-point ones
being the checkpoint's declared ``weights.dtype``. So a 20 KB file cannot make the loader build a 2 GB
model, and int8 weights cannot stand in for float32 ones.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from laya.model.validation import CheckpointError

MAX_HEADER_BYTES = 16 * 2**20  # a header is about 100 bytes per tensor
DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
Header = dict[str, tuple[tuple[int, ...], torch.dtype]]


def _bad(name: str, why: str) -> CheckpointError:
    return CheckpointError(f"{name} is not a valid safetensors file: {why}")


def read_header(source: bytes | Path, name: str = "model.safetensors") -> Header:
    """Tensor name -> (shape, dtype) from a safetensors file (a path or its bytes), reading only the header.

    Raises:
        CheckpointError: truncated, over-long or malformed header, unknown dtype, offsets that do not
            match the shapes or leave the file; ``name`` is how the message calls the file.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        size, head = len(data), data[:8]
    else:
        size = Path(source).stat().st_size
        with open(source, "rb") as f:
            head = f.read(8)
            length = int.from_bytes(head, "little") if len(head) == 8 else 0
            data = head + f.read(min(length, MAX_HEADER_BYTES))
    if len(head) < 8:
        raise _bad(name, f"{size} bytes, shorter than the 8-byte header length")
    length = int.from_bytes(head, "little")
    if length > MAX_HEADER_BYTES or 8 + length > size:
        raise _bad(name, f"its header claims {length:,} bytes (file: {size:,} bytes, header limit {MAX_HEADER_BYTES:,})")
    try:
        raw = json.loads(data[8 : 8 + length])
    except (ValueError, RecursionError) as error:
        raise _bad(name, f"its header is not JSON ({type(error).__name__})") from None
    if not isinstance(raw, dict):
        raise _bad(name, "its header is not a JSON object")
    body = size - 8 - length
    header: Header = {}
    spans = []
    for key, entry in raw.items():
        if key == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise _bad(name, "__metadata__ must map names to strings")
            continue
        shown = repr(key[:80])
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise _bad(name, f"tensor {shown} needs exactly dtype, shape and data_offsets")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise _bad(name, f"tensor {shown} has dtype {str(dtype)[:20]!r}; known: {', '.join(DTYPES)}")
        if not isinstance(shape, list) or len(shape) > 16 or not all(type(d) is int and 0 <= d < 2**48 for d in shape):
            raise _bad(name, f"tensor {shown} has an invalid shape")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
            raise _bad(name, f"tensor {shown} has invalid data_offsets")
        begin, end = offsets
        nbytes = math.prod(shape) * DTYPES[dtype].itemsize
        if not 0 <= begin <= end <= body or end - begin != nbytes:
            raise _bad(name, f"tensor {shown}'s data_offsets do not match its shape or leave the file")
        spans.append((begin, end))
        header[key] = (tuple(shape), DTYPES[dtype])
    spans.sort()
    if any(b < a_end for (_, a_end), (b, _) in zip(spans, spans[1:])):
        raise _bad(name, "tensors' data overlap")
    return header


def check_header(
    header: Header,
    expected: Header,
    declared: torch.dtype,
    name: str = "model.safetensors",
    meta: str = "model.json",
) -> None:
    """Refuse a weights header that does not fit the model ``expected`` describes, before anything is built.

    Floating-point tensors must be stored as ``declared`` (``weights.dtype``); others (integer
    buffers such as BatchNorm's ``num_batches_tracked``) as the model's own dtype.

    Raises:
        CheckpointError: naming up to five missing, unexpected, wrong-shape and wrong-dtype tensors.
    """
    missing, unexpected = sorted(set(expected) - set(header)), sorted(set(header) - set(expected))
    shared = sorted(set(expected) & set(header))
    shape = [k for k in shared if header[k][0] != expected[k][0]]
    dtype = [
        k
        for k in shared
        if header[k][1] != (declared if expected[k][1].is_floating_point else expected[k][1])
    ]
    if missing or unexpected or shape:
        first = f" ({shape[0]}: {header[shape[0]][0]} in the file, {expected[shape[0]][0]} in the model)" if shape else ""
        raise CheckpointError(
            f"{name} does not fit the model described in {meta}: missing {missing[:5]}, unexpected "
            f"{[k[:80] for k in unexpected[:5]]}, wrong shape {shape[:5]}{first}"
        )
    if dtype:
        k = dtype[0]
        stored = str(header[k][1]).removeprefix("torch.")
        raise CheckpointError(
            f"{name} stores {len(dtype)} tensor(s) in another dtype than {meta} declares "
            f"({k}: {stored}, expected {str(declared).removeprefix('torch.')} for floating-point weights)"
        )


__all__ = ["DTYPES", "MAX_HEADER_BYTES", "Header", "check_header", "read_header"]
