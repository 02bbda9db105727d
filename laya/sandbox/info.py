"""What the dashboard's pages need of a loaded model, without the model: the same for a checkpoint loaded
in the server process and one loaded in a sandboxed worker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laya.model.checkpoint import FORMAT, FORMAT_VERSION, Checkpoint, CheckpointMeta, display_name


@dataclass(frozen=True)
class ModelInfo:
    """A loaded checkpoint's metadata, layer names, ablation modes, load warnings, size in memory (bytes) and
    per-layer feature widths (what the pages need without the model)."""

    meta: CheckpointMeta
    path: Path
    layer_names: tuple[str, ...]
    modes: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    nbytes: int = 0
    layer_dims: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return display_name(self.meta)

    @classmethod
    def of(cls, checkpoint: Checkpoint) -> ModelInfo:
        tensors = [*checkpoint.model.parameters(), *checkpoint.model.buffers()]
        return cls(
            checkpoint.meta,
            Path(checkpoint.path),
            tuple(checkpoint.layer_names),
            tuple(checkpoint.model.head.modes),
            tuple(checkpoint.warnings),
            sum(t.numel() * t.element_size() for t in tensors),
            tuple(int(d) for d in checkpoint.model.backbone.layer_dims),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"meta": self.meta.to_dict(), "path": str(self.path), "layer_names": list(self.layer_names),
                "modes": list(self.modes), "warnings": list(self.warnings), "nbytes": self.nbytes,
                "layer_dims": list(self.layer_dims)}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelInfo:
        """Inverse of :meth:`to_dict`; the metadata is validated again (:meth:`CheckpointMeta.from_dict`)."""
        meta = dict(data["meta"], format=FORMAT, format_version=FORMAT_VERSION)
        return cls(
            CheckpointMeta.from_dict(meta),
            Path(data["path"]),
            tuple(map(str, data["layer_names"])),
            tuple(map(str, data["modes"])),
            tuple(map(str, data["warnings"])),
            int(data["nbytes"]),
            tuple(map(int, data["layer_dims"])),
        )


__all__ = ["ModelInfo"]
