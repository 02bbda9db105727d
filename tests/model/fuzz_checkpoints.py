"""Hostile checkpoints for the fuzzer (tests/model/test_fuzz.py): strategies that mutate a good checkpoint's
``model.json`` (structure, sizes, indices, names, values) and its weights (dtypes, values, names, shapes,
raw header and body bytes),
and :func:`attempt`, which takes one through the dashboard's sandboxed path: the upload check, a load and
one explained image, each in a worker of a :class:`~laya.sandbox.pool.WorkerPool`.

The files an attached setting stores beside its own head are fuzzed the same way: :data:`LENS_EDITS` and
:data:`REPORT_EDITS` mutate ``tuned_lens.json`` and ``network.json`` (fields, sizes, the whole file), the weight
edits their safetensors files; :func:`attempt_lens` explains one image by the network's units in a worker (the
lens read there), :func:`attempt_report` reads the network report as the pages do and builds its views.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hypothesis import strategies as st
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from laya.analysis.network.report_files import load_network_report
from laya.analysis.overflow import OutputOverflow
from laya.app import gradcam_views, lesion_views
from laya.app import network_views as nv
from laya.data.images import ImageError
from laya.model.attached_files import AttachedFileError
from laya.model.checkpoint import META_FILE, WEIGHTS_FILE, CheckpointError, CheckpointMeta, Confinement, build_model
from laya.model.checkpoint import save_checkpoint
from laya.sandbox.client import ModelFailed, Sandboxed, check_upload_in_worker
from laya.sandbox.pool import WorkerPool

HUGE = 1e18  # weights this large may overflow to Inf in a forward pass (a square, such as a variance, passes float32's
# 3.4e38 from about 1.8e19): the refusal saying the output overflowed (laya.analysis.overflow) is then right


def vit_checkpoint(good: Path, dest: Path, indices: list[int] | None = None, recorded: Any = None) -> Path:
    """A timm ``test_vit`` (patch 4) with random weights on ``good``'s task, 8 px inputs, built with ``indices``;
    ``recorded``: the ``backbone.indices`` then written in its model.json instead (what no build would accept,
    e.g. ``[0, 0, 0]`` on the weights of ``[0]``)."""
    record = json.loads((good / META_FILE).read_text())
    record.pop("layer_names", None)
    record["backbone"] = {"name": "timm", "model": "test_vit", "in_channels": 3, "input_size": 8,
                          "model_kwargs": {"patch_size": 4}, "indices": indices}  # fmt: skip
    meta = CheckpointMeta.from_dict(record)
    torch.manual_seed(0)
    path = save_checkpoint(build_model(meta), meta, dest)
    if recorded is not None:
        written = json.loads((path / META_FILE).read_text())
        written["backbone"]["indices"] = recorded
        (path / META_FILE).write_text(json.dumps(written))
    return path


# ---------------------------------------------------------------- strategies

TEXTS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["~", "~/../proc/self/environ", "../../../etc/passwd", "/etc/passwd", "a\x00b", "\ud800",
                     "![x](http://127.0.0.1:9/p.png)", "<img src=x>", "cifar10", "timm", "model.safetensors",
                     "é" * 300]),
)  # fmt: skip
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, -1, 2, 3, 8, 64, 4096, 65536, 10**6, 2**31, 2**63, 10**39]),
    st.floats(allow_nan=True, allow_infinity=True),
)
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, TEXTS),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXTS, inner, max_size=3)),
    max_leaves=8,
)
FIELDS = [("format_version",), ("classes",), ("classes", 0), ("dataset",), ("layer_names",), ("weights",),
          ("weights", "dtype"), ("weights", "sha256"), ("backbone",), ("backbone", "name"),
          ("backbone", "in_channels"), ("backbone", "input_size"), ("backbone", "widths"), ("backbone", "widths", 0),
          ("backbone", "model"), ("backbone", "model_kwargs"), ("backbone", "weights"), ("backbone", "indices"),
          ("backbone", "pool"), ("backbone", "pre_logits"), ("backbone", "layer_names"), ("head",), ("head", "name"),
          ("head", "d_star"), ("head", "tau"), ("head", "scorer_hidden"), ("input", "channels"), ("input", "size"),
          ("input", "source_size"), ("input", "mean"), ("input", "std"), ("extra",)]  # fmt: skip
SMALL = st.integers(-7, 7)
ALIASES = st.sampled_from([0, 1, 5, -5, -6])  # blocks of the 2-layer test_vit base: -6 is 0, -5 is 1 of 6 blocks
INDICES = st.one_of(st.lists(ALIASES, min_size=1, max_size=4), st.lists(SMALL, max_size=4), SMALL)
PLAUSIBLE = st.one_of(  # values that pass validation often, so that the model gets built and run
    st.tuples(st.just(("backbone", "indices")), INDICES),
    st.tuples(st.just(("backbone", "indices")), INDICES),  # twice: the layer count decides what the head fits
    st.tuples(st.just(("backbone", "name")), st.sampled_from(["mlp", "cnn", "timm", "torchvision", "wrapped"])),
    st.tuples(st.just(("backbone", "model")), st.sampled_from(["test_vit", "test_resnet", "test_efficientnet"])),
    st.tuples(st.just(("backbone", "model_kwargs")),
              st.dictionaries(st.sampled_from(["patch_size", "embed_dim", "depth", "num_heads"]), SMALL, max_size=3)),
    st.tuples(st.just(("backbone", "widths")), st.lists(st.integers(0, 40), max_size=4)),
    st.tuples(st.just(("backbone", "pool")), st.sampled_from(["auto", "cls", "avg", "max"])),
    st.tuples(st.just(("backbone", "pre_logits")), st.booleans()),
    st.tuples(st.just(("head", "name")), st.sampled_from(["laya", "concat", "scalarmix", "lastlayer"])),
    st.tuples(st.just(("head", "d_star")), st.integers(0, 40)),
    st.tuples(st.just(("head", "tau")), st.sampled_from([1e-3, 0.5, 1e3, 3e38])),
    st.tuples(st.just(("classes",)), st.lists(TEXTS, max_size=4)),
    st.tuples(st.just(("input", "size")), st.integers(0, 40)),
    st.tuples(st.just(("input", "source_size")), st.integers(0, 40)),
    st.tuples(st.just(("weights", "dtype")), st.sampled_from(["float32", "float16", "bfloat16", "float64", "int8"])),
)  # fmt: skip
RECORD_EDITS = st.lists(st.one_of(st.tuples(st.sampled_from(FIELDS), VALUES), PLAUSIBLE), max_size=4)
DTYPES = [torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.bool]
WEIGHT_EDITS = st.lists(
    st.one_of(
        st.tuples(st.just("dtype"), st.integers(0, 99), st.sampled_from(DTYPES)),
        st.tuples(st.just("fill"), st.integers(0, 99), st.sampled_from([3e38, -3e38, 1e30, 0.0, 1e-45, 65504.0])),
        st.tuples(st.just("nonfinite"), st.integers(0, 99), st.sampled_from([math.nan, math.inf, -math.inf])),
        st.tuples(st.just("rename"), st.integers(0, 99), TEXTS),
        st.tuples(st.just("resize"), st.integers(0, 99), st.integers(-2, 2)),
        st.tuples(st.just("drop"), st.integers(0, 99), st.none()),
        st.tuples(st.just("bytes"), st.integers(0, 99), st.binary(min_size=1, max_size=16)),  # header or body
        st.tuples(st.just("truncate"), st.integers(0, 99), st.none()),
    ),
    max_size=3,
)
# a server file that exists and one that does not, in the fields that name files
PROBES = [("/etc/passwd", "/etc/no-such-laya-file"), ("../../../../etc/hostname", "../../../../etc/no-such-laya-file"),
          ("/proc/self/environ", "/proc/self/no-such-laya-file"), ("/", "/no-such-laya-dir/"),
          ("~/.bashrc", "~/.no-such-laya-file")]  # fmt: skip


def edit_record(record: dict, edits: list[tuple[tuple, Any]]) -> dict:
    """``record`` with each ``(path, value)`` set where the path exists up to its last key."""
    record = json.loads(json.dumps(record))
    for path, value in edits:
        node = record
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node[path[-1]] = value
        elif isinstance(node, list) and isinstance(path[-1], int) and path[-1] < len(node):
            node[path[-1]] = value
    return record


def edit_weights(
    weights: bytes, edits: list[tuple[str, int, Any]], metadata: Callable[[dict], dict] | None = None
) -> tuple[bytes, bool]:
    """The safetensors bytes with tensors recast, filled, renamed, cut or dropped, then bytes overwritten or the
    file truncated; and whether a value is ``HUGE`` or more (a forward pass may then overflow legitimately). The
    header's metadata is kept, or changed by ``metadata``."""
    tensors = load_tensors(weights)
    kept = _metadata(weights)
    kept = metadata(kept) if metadata else kept
    huge = False
    for op, index, arg in [e for e in edits if e[0] not in ("bytes", "truncate")]:
        if not tensors:
            break
        name = sorted(tensors)[index % len(tensors)]
        tensor = tensors[name]
        if op == "dtype":
            tensors[name] = tensor.to(arg)
        elif op in ("fill", "nonfinite") and tensor.is_floating_point():
            tensors[name] = torch.full(tensor.shape, arg).to(tensor.dtype)  # 3e38 in float16: Inf
            huge |= op == "fill" and abs(arg) >= HUGE
        elif op == "rename" and arg not in tensors:
            tensors[str(arg).encode("utf-8", "replace").decode()] = tensors.pop(name)
        elif op == "resize" and tensor.ndim:
            size = max(0, tensor.shape[0] + arg)
            grown = torch.zeros((size, *tensor.shape[1:]), dtype=tensor.dtype)
            grown[: min(size, tensor.shape[0])] = tensor[:size]
            tensors[name] = grown
        elif op == "drop":
            del tensors[name]
    data = save_tensors({k: v.contiguous() for k, v in tensors.items()}, kept or None) if tensors else b""
    for op, index, arg in [e for e in edits if e[0] in ("bytes", "truncate")]:  # raw bytes, after the tensors
        at = len(data) * index // 100
        data = data[:at] if op == "truncate" else data[:at] + arg + data[at + len(arg) :]
    return data, huge or _largest(data) >= HUGE  # raw bytes can write any value


def _metadata(data: bytes) -> dict[str, str]:
    """The ``__metadata__`` of a (good) safetensors file's header."""
    length = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + length]).get("__metadata__") or {}


def _largest(data: bytes) -> float:
    """The largest finite |value| among the file's floating tensors (0 when the file does not parse)."""
    try:
        tensors = load_tensors(data)
    except Exception:  # noqa: BLE001 - a file the edits broke holds no value to weigh
        return 0.0
    values = [t.double().abs().nan_to_num(0.0, 0.0, 0.0).max().item() for t in tensors.values()
              if t.is_floating_point() and t.numel()]  # fmt: skip
    return max(values, default=0.0)


def checkpoint_files(record: dict, weights: bytes) -> dict[str, bytes]:
    """The two uploaded files; ``weights.sha256`` is set to the weights' digest unless an edit set it."""
    record = json.loads(json.dumps(record))
    if isinstance(record.get("weights"), dict) and isinstance(record["weights"].get("sha256"), str):
        if len(record["weights"]["sha256"]) == 64:  # the good one's: follow the edited weights
            record["weights"]["sha256"] = hashlib.sha256(weights).hexdigest()
    text = json.dumps(record, allow_nan=True).encode("utf-8", "surrogatepass")
    return {META_FILE: text, WEIGHTS_FILE: weights}


# ---------------------------------------------------------------- one attempt

@dataclass
class Outcome:
    """How one checkpoint went: ``refused`` (where, and the message), or ``answered``; the seconds it took."""

    stage: str  # "check", "load", "explain" (refused there), "overflow" (its output overflowed) or "answered"
    message: str = ""
    seconds: float = 0.0
    finite: bool = True


def attempt(pool: WorkerPool, files: dict[str, bytes], folder: Path, image: bytes) -> Outcome:
    """The upload check, a confined load from ``folder`` and one explained image, all in the pool's workers.

    Returns the stage that refused (:class:`CheckpointError`, :class:`ImageError`), ``overflow``
    (:class:`OutputOverflow`) or ``answered``. Raises
    :class:`ModelFailed` (the model's code raised after the checkpoint passed every check) and
    :class:`~laya.sandbox.pool.WorkerError` (no answer) for the fuzzer to judge."""
    start = time.monotonic()
    stage = "check"
    try:
        check_upload_in_worker(pool, files)
        folder.mkdir(parents=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        remote = Sandboxed(pool, str(folder), confine=Confinement(folder))
        stage = "load"
        remote.info()
        stage = "explain"
        result = remote.explain(image)
    except ModelFailed:
        raise
    except (CheckpointError, ImageError) as refusal:
        return Outcome(stage, str(refusal), time.monotonic() - start)
    except OutputOverflow as refusal:
        return Outcome("overflow", str(refusal), time.monotonic() - start)
    finite = bool(result.probs.isfinite().all())
    return Outcome("answered", "", time.monotonic() - start, finite)


# ---------------------------------------------------------------- an attached setting's stored files

def _units(n: int) -> list[str]:
    return [f"layer{i}" for i in range(n)]


SIZES = st.sampled_from([0, 1, 2, 6000, 65536, 65537, 10**12, -1])
WHOLE = st.one_of(  # the whole file replaced
    st.sampled_from([b"null", b"[]", b"{}", b"3", b'"x"', b"[" * 50_000 + b"]" * 50_000, b"\xff\xfe", b""]),
    st.binary(max_size=64),
)
FIT_FIELDS = [("fit",), ("fit", "constant"), ("fit", "constant", 0), ("fit", "epochs_run"), ("fit", "best_epoch"),
              ("fit", "exact"), ("fit", "kl"), ("fit", "logit_kl"), ("fit", "agreement")]  # fmt: skip
LENS_FIELDS = [("units",), ("units", 0), ("dims",), ("dims", 0), ("width",), ("classes",), ("space",), ("sample",),
               ("lr",), ("held_out",), ("patience",), ("command",), ("extra",), *FIT_FIELDS]  # fmt: skip
LENS_PLAUSIBLE = st.one_of(  # sizes a loader must compare with the weights before it allocates
    st.tuples(st.just(("width",)), SIZES),
    st.tuples(st.just(("dims", 0)), SIZES),
    st.tuples(st.just(("classes",)), SIZES),
    st.tuples(st.just(("units",)), st.sampled_from([0, 1, 1025, 200_000]).map(_units)),
    st.tuples(st.just(("dims",)), st.sampled_from([0, 1, 200_000]).map(lambda n: [64] * n)),
)
LENS_EDITS = st.one_of(
    st.lists(st.one_of(st.tuples(st.sampled_from(LENS_FIELDS), VALUES), LENS_PLAUSIBLE), max_size=3),
    WHOLE,
)
REPORT_FIELDS = [("units",), ("units", 0), ("stages",), ("stage_names",), ("residual",), ("residual", 0),
                 ("method",), ("methods",), ("classes",), ("agreement",), ("agreement", 0),
                 ("agreement", 0, "n"), ("agreement", 0, "spearman_mean"), ("agreement", 0, "score"), ("tables",),
                 ("tables", "lens_prob/true"), ("tables", "lens_prob/true", "data"),
                 ("tables", "lens_prob/true", "index"), ("tables", "drops/true", "columns"), ("shapes",),
                 ("shapes", "drops"), ("shapes", "indices"), ("references",), ("lens",), ("options",),
                 ("lens", "source"), ("lens", "units"), ("lens", "units", 0), ("lens", "units", 0, "agreement"),
                 ("lens", "units", 0, "kl"), ("lens", "units", 0, "unit"), *(("lens", *f) for f in FIT_FIELDS),
                 ("lesion",), ("lesion", "n"), ("lesion", "intact"), ("lesion", "intact", 0), ("lesion", "single"),
                 ("lesion", "single", 0), ("lesion", "single", 0, "unit"), ("lesion", "single", 0, "intervention"),
                 ("lesion", "single", 0, "method"), ("lesion", "single", 0, "accuracy"),
                 ("lesion", "single", 0, "drop"), ("lesion", "curve"), ("lesion", "curve", 0, "k"),
                 ("lesion", "curve", 0, "mean"), ("lesion", "classes"), ("lesion", "classes", "skip"),
                 ("lesion", "classes", "skip", "data")]  # fmt: skip
REPORT_EDITS = st.one_of(
    st.lists(st.tuples(st.sampled_from(REPORT_FIELDS), st.one_of(VALUES, st.just(math.nan),
                                                                 st.lists(SIZES, max_size=3))), max_size=3),
    WHOLE,
)  # fmt: skip


def stored_file(text: bytes, edits: list | bytes) -> bytes:
    """A stored JSON file (``text``) with :data:`LENS_EDITS` / :data:`REPORT_EDITS` applied: fields set, or the
    whole file replaced."""
    if isinstance(edits, bytes):
        return edits
    return json.dumps(edit_record(json.loads(text), edits), allow_nan=True).encode("utf-8", "surrogatepass")


@dataclass
class FileOutcome:
    """One stored file's fate: ``read``, or ``refused`` with the message (the AttachedFileError's, or for the lens
    the sentence the answer gives in its place); the seconds it took."""

    stage: str  # "read" or "refused"
    message: str = ""
    seconds: float = 0.0


def attempt_lens(remote: Sandboxed, image: bytes) -> FileOutcome:
    """One image explained by the network's units in a worker, whatever its stored lens: the unit profile must come
    back (finite drops, one per bar); the lens is there, or ``lens_source`` says why not."""
    start = time.monotonic()
    result = remote.network(image, examples=(image,))
    assert len(result.drops) == len(result.names) and bool(result.drops.isfinite().all()), "no unit profile"
    assert len(result.cam) == len(result.units), "no Grad-CAM strip"
    stage = "read" if result.log_q is not None else "refused"
    return FileOutcome(stage, "" if stage == "read" else result.lens_source, time.monotonic() - start)


def attempt_report(folder: Path) -> FileOutcome:
    """The network report read as the pages read it, then the views they build of it (the agreement table and its
    summary, every class x unit table, the tuned lens's summary, the lesion study of each intervention it holds and
    each unit's drop per class, the Grad-CAM test's figure, table and caption);
    only an AttachedFileError may refuse it."""
    start = time.monotonic()
    try:
        report = load_network_report(folder)
    except AttachedFileError as refusal:
        return FileOutcome("refused", str(refusal), time.monotonic() - start)
    apart = [u for u, kept in zip(report.units, report.residual) if not kept]  # as the pages pass them
    nv.agreement_view(report.agreement)
    for intervention in set(report.agreement["intervention"]):
        nv.agreement_summary(report.agreement, intervention, apart)
    for value in nv.CLASS_UNIT_VALUES:
        for by in nv.CLASS_GROUPS:
            if (table := nv.stored_class_units(report, value, by)) is not None:
                nv.class_unit_heatmap(table, value, apart=apart)
    nv.lens_summary_view(report.lens)
    if report.lesion is not None:
        for intervention in set(report.lesion.single["intervention"]):
            nv.lesion_figure(report.lesion, intervention, report.residual)
            for unit in lesion_views.lesion_class_units(report.lesion, intervention):
                lesion_views.lesion_class_figure(report.lesion, intervention, unit)
                lesion_views.lesion_class_table(report.lesion, intervention, unit)
    if report.gradcam is not None:
        gradcam_views.gradcam_choice_figure(report.gradcam)
        gradcam_views.gradcam_choice_table(report.gradcam)
        gradcam_views.gradcam_choice_caption(report.gradcam)
    return FileOutcome("read", "", time.monotonic() - start)


__all__ = ["LENS_EDITS", "REPORT_EDITS", "FileOutcome", "attempt_lens", "attempt_report", "stored_file",
           "NUMBERS", "PROBES", "RECORD_EDITS", "TEXTS", "VALUES", "WEIGHT_EDITS", "WHOLE", "Outcome", "attempt",
           "checkpoint_files", "edit_record", "edit_weights", "vit_checkpoint"]  # fmt: skip
