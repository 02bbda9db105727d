"""What the dashboard asks of a sandboxed worker, as typed calls: the same results as the in-process functions.

Each call sends one request through a :class:`~laya.sandbox.pool.WorkerPool` and rebuilds the
result from JSON and tensors (``from_tensors``/``from_dict``). A refusal comes back as the
exception the in-process function would raise (:class:`CheckpointError`, :class:`ImageError`,
:class:`DatasetNotFoundError`, :class:`OutputOverflow`), an exception of the model's own code as :class:`ModelFailed` (a
:class:`CheckpointError` naming what failed); a worker that could not answer raises
:class:`~laya.sandbox.pool.WorkerError`, whose message is meant for the visitor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from laya.analysis.block_ablation import BlockAblation
from laya.analysis.depth.input_depth import InputDepth
from laya.analysis.head.explain import Explanation
from laya.analysis.head.spatial import ClassMaps
from laya.analysis.network.explain import NetworkExplanation
from laya.analysis.network.unit_patching import UnitPatch
from laya.analysis.overflow import OutputOverflow
from laya.analysis.patching import NoLayerModules, PatchEffects
from laya.analysis.report import Report
from laya.data.datasets import DatasetNotFoundError
from laya.data.images import ImageError
from laya.model.checkpoint import CheckpointError, Confinement
from laya.sandbox.info import ModelInfo
from laya.sandbox.pool import Progress, Refused, WorkerPool
from laya.sandbox.protocol import join_files, unpack


class ModelFailed(CheckpointError):
    """The model's own code raised while answering (a checkpoint that passed every check); the worker lives on."""


ERRORS = {"checkpoint": CheckpointError, "image": ImageError, "dataset": DatasetNotFoundError, "error": ModelFailed,
          "overflow": OutputOverflow, "no-layer-modules": NoLayerModules}  # fmt: skip


@dataclass(frozen=True)
class Sandboxed:
    """One checkpoint served by the pool: its path, the "load anyway" choice, what it may read."""

    pool: WorkerPool
    path: str
    allow_nonfinite: bool = False
    confine: Confinement | None = None

    def _fields(self) -> dict[str, Any]:
        confine = None
        if self.confine is not None:
            confine = {"weights_root": str(self.confine.weights_root),
                       "data_roots": [str(p) for p in self.confine.data_roots]}  # fmt: skip
        return {"path": self.path, "allow_nonfinite": self.allow_nonfinite, "confine": confine}

    def _call(self, op: str, blob: bytes = b"", progress: Progress | None = None, **args: Any) -> tuple[dict, bytes]:
        try:
            return self.pool.call({"op": op, **self._fields(), **args}, blob, progress)
        except Refused as refusal:
            raise ERRORS.get(refusal.kind, CheckpointError)(str(refusal)) from None

    def info(self) -> ModelInfo:
        """Load the checkpoint in a worker. Raises :class:`CheckpointError` (refused), ``WorkerError``."""
        return ModelInfo.from_dict(self._call("load")[0]["info"])

    def explain(
        self, data: bytes, mode: str = "mean", posthoc: tuple[str, ...] = (), approximate: bool = True,
        ood: bool | tuple[str, ...] = False,
    ) -> Explanation:  # fmt: skip
        """:func:`laya.analysis.head.explain.explain_bytes` in a worker (``ood``: under the stored depth fit). Raises
        :class:`ImageError` for a bad image."""
        reply, blob = self._call("explain", data, mode=mode, posthoc=list(posthoc), approximate=approximate,
                                 ood=ood if isinstance(ood, bool) else list(ood))  # fmt: skip
        return Explanation.from_tensors(unpack(blob), reply["values"])

    def depth(self, data: bytes) -> InputDepth:
        """:func:`laya.analysis.depth.input_depth.input_depth` (with the stored fit) in a worker."""
        reply, blob = self._call("depth", data)
        return InputDepth.from_tensors(unpack(blob), reply["values"])

    def patch(self, target: bytes, source: bytes, where: str = "head") -> PatchEffects:
        """:func:`laya.analysis.patching.patch_bytes` in a worker. Raises :class:`ImageError` for a bad image."""
        index, blob = join_files({"target": target, "source": source})
        reply, tensors = self._call("patch", blob, where=where, files=index)
        return PatchEffects.from_tensors(unpack(tensors), reply["values"])

    def patch_units(self, target: bytes, source: bytes, branch: str = "block") -> UnitPatch:
        """:func:`laya.analysis.network.unit_patching.patch_units_bytes` in a worker. Raises :class:`ImageError` for
        a bad image."""
        index, blob = join_files({"target": target, "source": source})
        reply, tensors = self._call("units", blob, branch=branch, files=index)
        return UnitPatch.from_tensors(unpack(tensors), reply["values"])

    def ablate(self, data: bytes, references: Sequence[bytes], skip: bool = False) -> BlockAblation:
        """:func:`laya.analysis.block_ablation.ablate_bytes` in a worker. Raises :class:`ImageError` for a bad image,
        :class:`NoLayerModules` for a backbone whose layers have no modules to hook."""
        files = {"input": data} | {f"reference {i}": image for i, image in enumerate(references)}
        index, blob = join_files(files)
        reply, tensors = self._call("ablate", blob, skip=skip, files=index)
        return BlockAblation.from_tensors(unpack(tensors), reply["values"])

    def network(
        self, data: bytes, method: str = "resample", granularity: str = "unit", cam_class: int | None = None,
        examples: Sequence[bytes] = (), branch: str = "block",
    ) -> NetworkExplanation:  # fmt: skip
        """:func:`laya.analysis.network.explain.network_bytes` in a worker (``examples``: the bundled example
        images, the references where the training split is not there). Raises :class:`ImageError` for a bad image."""
        files = {"input": data} | {f"example {i}": image for i, image in enumerate(examples)}
        index, blob = join_files(files)
        reply, tensors = self._call("network", blob, method=method, granularity=granularity, cam_class=cam_class,
                                    branch=branch, files=index)  # fmt: skip
        return NetworkExplanation.from_tensors(unpack(tensors), reply["values"])

    def class_maps(self) -> ClassMaps:
        """:func:`laya.analysis.head.spatial.sample_class_maps` in a worker (a missing sample: ``WorkerError``)."""
        reply, blob = self._call("maps")
        return ClassMaps.from_tensors(unpack(blob), reply["values"])

    def evaluate(self, limit: int | None = None, progress: Progress | None = None) -> Report:
        """:func:`laya.app.classwise_views.evaluate_locally` in a worker (progress frames reach ``progress``)."""
        return Report(self._call("evaluate", progress=progress, limit=limit or 0)[0]["report"])

    def forget(self) -> None:
        self.pool.forget(self.path)


def check_upload_in_worker(pool: WorkerPool, files: Mapping[str, bytes]) -> None:
    """:func:`laya.app.uploads.check_upload` in a worker. Raises :class:`CheckpointError` naming the problem."""
    index, blob = join_files(dict(files))
    try:
        pool.call({"op": "check", "files": index}, blob)
    except Refused as refusal:
        raise (ModelFailed if refusal.kind == "error" else CheckpointError)(str(refusal)) from None


__all__ = ["ModelFailed", "Sandboxed", "check_upload_in_worker"]

