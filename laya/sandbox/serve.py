"""The request loop of a sandboxed worker: load checkpoints, run the dashboard's analyses, reply in frames.

Requests (JSON, :mod:`laya.sandbox.protocol`) name an ``op``; those on a model also carry
``path``, ``allow_nonfinite`` and ``confine`` (``weights_root``, ``data_roots``: what the
checkpoint may read, decided by the server). Replies are ``{"ok": true, ...}`` with tensors in
the blob, or ``{"ok": false, "kind", "error"}``:

======== ===================================== ==========================================
op       request                               reply
======== ===================================== ==========================================
hello    (sent by the worker once it is ready) ``network``, ``address_space``, ``open_files``
check    ``files`` index + files in the blob   the upload passes :func:`check_upload`
load     model fields                          ``info``: :meth:`ModelInfo.to_dict`
explain  model fields, ``mode``, ``posthoc``,  :meth:`Explanation.to_tensors`
         ``approximate``, ``ood``, image bytes
         in the blob
depth    model fields, image bytes in the blob :meth:`InputDepth.to_tensors`
patch    model fields, ``where``, ``files``    :meth:`PatchEffects.to_tensors`
         index (``target``, ``source``) + both
         images in the blob
units    model fields, ``branch``, ``files``   :meth:`UnitPatch.to_tensors`
         index (``target``, ``source``) + both
         images in the blob
ablate   model fields, ``skip``, ``files``     :meth:`BlockAblation.to_tensors`
         index (``input``, then the reference
         images) + the images in the blob
network  model fields, ``method``,            :meth:`NetworkExplanation.to_tensors`
         ``granularity``, ``cam_class``,
         ``branch``, ``files`` index
         (``input``, then the bundled example
         images) + the images in the blob
maps     model fields                          :meth:`ClassMaps.to_tensors` of the test-set sample
evaluate model fields, ``limit``               ``{"progress", "text"}`` frames, then ``report``
forget   ``path``                              ``models``: how many are still loaded
======== ===================================== ==========================================

Loaded models are kept in a cache capped by **bytes** (parameters + buffers,
``LAYA_WORKER_CACHE_MB``, default 1024), least recently used first out. Each request may use
``cpu_seconds`` of CPU time (``RLIMIT_CPU``; past it the kernel ends the worker with ``SIGXCPU``).
A ``MemoryError`` (the ``RLIMIT_AS`` ceiling) is answered, then the worker exits: its heap may be
fragmented or half-built, and the pool starts a fresh one. Any other exception (the model's own code
failing, e.g. an ``IndexError`` deep in an analysis) is answered ``kind: "error"`` with :func:`failure`'s
message, its traceback goes to the server log, and the worker serves the next request.
"""

from __future__ import annotations

import os
import resource
import sys
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Any, BinaryIO

import torch

from laya import settings
from laya.analysis.block_ablation import ablate_bytes
from laya.analysis.depth.fit import DepthFit
from laya.analysis.depth.input_depth import input_depth
from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.head.explain import explain_bytes
from laya.analysis.head.spatial import sample_class_maps
from laya.analysis.network.explain import network_bytes
from laya.analysis.network.unit_patching import patch_units_bytes
from laya.analysis.overflow import OutputOverflow
from laya.analysis.patching import NoLayerModules, patch_bytes
from laya.app.deploy import release_memory
from laya.app.uploads import check_upload
from laya.data.datasets import DatasetNotFoundError
from laya.data.images import ImageError, load_image_tensor
from laya.model.checkpoint import WEIGHTS_FILE, Checkpoint, CheckpointError, Confinement, load_checkpoint
from laya.sandbox.info import ModelInfo
from laya.sandbox.protocol import ProtocolError, pack, read_frame, split_files, write_frame

REFUSALS = {CheckpointError: "checkpoint", ImageError: "image", DatasetNotFoundError: "dataset",
            OutputOverflow: "overflow", NoLayerModules: "no-layer-modules"}  # fmt: skip
DOING = {"check": "checking the upload", "load": "loading", "explain": "explaining the image",
         "depth": "analysing the image's depth", "patch": "patching the images",
         "units": "patching the images unit by unit", "ablate": "ablating the blocks",
         "network": "explaining the network by its units", "maps": "mapping the test-set sample",
         "evaluate": "evaluating on the test set"}  # fmt: skip
PACKAGE = Path(__file__).resolve().parents[1]  # laya/


class ModelCache:
    """Loaded checkpoints keyed by ``(path, weights mtime, allow_nonfinite)``, at most ``cap`` bytes together."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.models: OrderedDict[tuple[str, int, bool], tuple[Checkpoint, int]] = OrderedDict()

    def get(self, request: dict[str, Any]) -> Checkpoint:
        path, allow = str(request["path"]), bool(request.get("allow_nonfinite", False))
        try:
            stamp = (Path(path) / WEIGHTS_FILE).stat().st_mtime_ns
        except OSError:
            stamp = 0
        key = (path, stamp, allow)
        if key in self.models:
            self.models.move_to_end(key)
            return self.models[key][0]
        confine = request.get("confine")
        if confine is not None:
            confine = Confinement(Path(confine["weights_root"]), tuple(map(Path, confine["data_roots"])))
        checkpoint = load_checkpoint(path, "cpu", confine=confine, allow_nonfinite=allow)
        size = ModelInfo.of(checkpoint).nbytes
        if size > self.cap:
            raise CheckpointError(
                f"the model takes {size / 2**20:.0f} MB in memory; this server keeps at most "
                f"{self.cap / 2**20:.0f} MB of uploaded models per worker"
            )
        self.models[key] = (checkpoint, size)
        while sum(s for _, s in self.models.values()) > self.cap:
            self.models.popitem(last=False)
        return checkpoint

    def forget(self, path: str) -> int:
        """Drop every cached model under ``path``; returns how many models stay loaded."""
        for key in [k for k in self.models if k[0] == path or k[0].startswith(path.rstrip("/") + "/")]:
            del self.models[key]
        release_memory()
        return len(self.models)


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _allow_cpu(seconds: int) -> None:
    """The next request may use ``seconds`` more CPU time (soft ``RLIMIT_CPU``; the kernel sends ``SIGXCPU`` past
    it); 0: no limit."""
    if seconds <= 0:
        return
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = int(_cpu_used()) + seconds
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def handle(request: dict[str, Any], blob: bytes, models: ModelCache, out: BinaryIO) -> tuple[dict[str, Any], bytes]:
    """One request's reply ``(JSON, blob)``; refusals raise (see :data:`REFUSALS`)."""
    op = request.get("op")
    if op == "check":
        check_upload(split_files(request["files"], blob))
        return {}, b""
    if op == "forget":
        return {"models": models.forget(str(request["path"]))}, b""
    if op not in ("load", "explain", "depth", "patch", "units", "ablate", "network", "maps", "evaluate"):
        raise ProtocolError(f"unknown op {op!r}")
    checkpoint = models.get(request)
    if op == "load":
        return {"info": ModelInfo.of(checkpoint).to_dict()}, b""
    if op == "explain":
        raw = request.get("ood", False)  # True: every score; a list: the scores the page shows
        ood = tuple(str(k) for k in raw) if isinstance(raw, list) else bool(raw)
        fit, note = DepthFit.usable(checkpoint) if ood else (None, None)  # the note goes back to the page
        result = explain_bytes(checkpoint, blob, mode=str(request["mode"]), posthoc=tuple(request["posthoc"]),
                               approximate=bool(request.get("approximate", True)), ood=ood, fit=fit,
                               fit_note=note)  # fmt: skip
    elif op == "depth":
        spec = checkpoint.meta.input
        image = load_image_tensor(blob, spec.channels, spec.source_size)
        result = input_depth(checkpoint, image, *DepthFit.usable(checkpoint))
    elif op in ("patch", "units"):
        images = split_files(request["files"], blob)
        if set(images) != {"target", "source"}:
            raise ProtocolError(f"a {op} request carries exactly a target and a source image")
        if op == "patch":
            result = patch_bytes(checkpoint, images["target"], images["source"], str(request["where"]))
        else:
            result = patch_units_bytes(checkpoint, images["target"], images["source"], str(request["branch"]))
    elif op == "ablate":
        images = split_files(request["files"], blob)
        data = images.pop("input", None)
        if data is None or not images:
            raise ProtocolError("an ablate request carries an input and at least one reference image")
        result = ablate_bytes(checkpoint, data, list(images.values()), bool(request.get("skip", False)))
    elif op == "network":
        images = split_files(request["files"], blob)
        data = images.pop("input", None)
        if data is None:
            raise ProtocolError("a network request carries an input image")
        chosen = request.get("cam_class")
        result = network_bytes(checkpoint, data, str(request["method"]), str(request["granularity"]),
                               None if chosen is None else int(chosen), list(images.values()),
                               str(request.get("branch", "block")))  # fmt: skip
    elif op == "maps":
        result = sample_class_maps(checkpoint)
    else:
        data = checkpoint.load_data("test")
        limit = int(request.get("limit") or 0) or None

        def progress(fraction: float, text: str) -> None:
            write_frame(out, {"progress": float(fraction), "text": str(text)})

        return {"report": evaluate(checkpoint, data, EvalOptions(limit=limit), progress)}, b""
    tensors, values = result.to_tensors()
    return {"values": values}, pack(tensors)


def failure(op: str, error: BaseException) -> str:
    """What failed, in words for the visitor: the request, the exception's type and the innermost ``laya`` file
    it passed through, e.g. ``the model failed while explaining the image (IndexError in
    laya/analysis/head/spatial.py)``. Never the exception's text, which may name server files."""
    where, tb = None, error.__traceback__
    while tb is not None:
        name = Path(os.path.abspath(tb.tb_frame.f_code.co_filename))
        if name.is_relative_to(PACKAGE):
            where = name.relative_to(PACKAGE.parent).as_posix()
        tb = tb.tb_next
    at = f" in {where}" if where else ""
    return f"the model failed while {DOING.get(op, 'answering')} ({type(error).__name__}{at})"


def serve(requests: BinaryIO, out: BinaryIO, hello: dict[str, Any], cpu_seconds: int) -> None:
    """Answer requests until stdin closes (see the module docstring)."""
    torch.set_num_threads(settings.integer("LAYA_WORKER_THREADS"))
    models = ModelCache(int(settings.number("LAYA_WORKER_CACHE_MB") * 2**20))
    write_frame(out, {"ok": True, "op": "hello", **hello})
    while True:
        try:
            request, blob = read_frame(requests)
        except EOFError:
            return
        _allow_cpu(cpu_seconds)
        try:
            reply, data = handle(request, blob, models, out)
            write_frame(out, {"ok": True, **reply}, data)
        except MemoryError:
            write_frame(out, {"ok": False, "kind": "memory", "error": "ran out of memory"})
            os._exit(3)  # no clean-up in a heap that just failed
        except tuple(REFUSALS) as error:
            kind = next(k for t, k in REFUSALS.items() if isinstance(error, t))
            write_frame(out, {"ok": False, "kind": kind, "error": str(error)})
        except ProtocolError as error:  # the server's request is malformed: its own words, no server data
            write_frame(out, {"ok": False, "kind": "error", "error": f"malformed request: {error}"})
        except Exception as error:  # the model's own code: refused, the worker lives on
            if "can't allocate memory" in str(error) or "out of memory" in str(error).lower():
                write_frame(out, {"ok": False, "kind": "memory", "error": "ran out of memory"})
                os._exit(3)
            traceback.print_exc(file=sys.stderr)  # the whole story goes to the server log
            write_frame(out, {"ok": False, "kind": "error", "error": failure(str(request.get("op")), error)})
