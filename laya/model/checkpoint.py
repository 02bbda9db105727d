"""Self-describing checkpoints: ``model.safetensors`` (weights) + ``model.json`` (everything else).

``model.json`` holds the backbone and head configs, class names, dataset, input spec
(channels, sizes, normalisation), training config, seed, metrics, library version and the
sha256 of the weights file. The head's reference vectors (mean hidden state per layer, for
``mean`` ablation and as the IG baseline) are buffers inside the weights. Loading never
unpickles. A frozen backbone's weights are stored once, outside the head checkpoint: its
``backbone.weights`` spec names the file or source, and ``backbone_sha256`` pins it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from laya import __version__
from laya.data.datasets import Images, InputSpec, Preprocess, dataset_label, load_dataset
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.classifier import LayerwiseClassifier
from laya.model.devices import resolve_device
from laya.model.heads import HeadConfig, build_head

FORMAT = "laya-checkpoint"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
META_FILE = "model.json"


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names the problem."""


@dataclass
class CheckpointMeta:
    """Everything needed to rebuild and use a model, besides its weights."""

    backbone: BackboneConfig
    head: HeadConfig
    classes: tuple[str, ...]
    dataset: str
    input: InputSpec
    seed: int = 0
    train: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backbone": self.backbone.to_dict(),
            "head": self.head.to_dict(),
            "classes": list(self.classes),
            "dataset": self.dataset,
            "input": self.input.to_dict(),
            "seed": self.seed,
            "train": self.train,
            "metrics": self.metrics,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckpointMeta:
        return cls(
            backbone=BackboneConfig.from_dict(data["backbone"]),
            head=HeadConfig.from_dict(data["head"]),
            classes=tuple(data["classes"]),
            dataset=str(data["dataset"]),
            input=InputSpec.from_dict(data["input"]),
            seed=int(data.get("seed", 0)),
            train=dict(data.get("train", {})),
            metrics=dict(data.get("metrics", {})),
        )


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (eval mode), its metadata, preprocessing and location."""

    model: LayerwiseClassifier
    meta: CheckpointMeta
    preprocess: Preprocess
    path: Path

    @property
    def layer_names(self) -> tuple[str, ...]:
        return self.model.layer_names

    def load_data(self, split: str = "test", dataset: str | None = None, stream: bool | None = None) -> Images:
        """The checkpoint's dataset (or ``dataset``), decoded as the model was trained: same size, channels
        (``stream``: see :func:`~laya.data.datasets.load_dataset`).

        Raises:
            DatasetNotFoundError: the dataset is not on this machine; the message says where to get it.
        """
        spec = self.meta.input
        return load_dataset(dataset or self.meta.dataset, split, spec.source_size, spec.channels, stream)

    @property
    def name(self) -> str:
        return f"{dataset_label(self.meta.dataset)} / {self.meta.backbone.model or self.meta.backbone.name} / {self.meta.head.name}"


def build_model(meta: CheckpointMeta, base_dir: Path | None = None) -> LayerwiseClassifier:
    """A model with the architecture ``meta`` describes (backbone weights loaded if it names any)."""
    backbone = build_backbone(meta.backbone, base_dir)
    head = build_head(meta.head, backbone.layer_dims, len(meta.classes))
    return LayerwiseClassifier(backbone, head)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _publish(tmp: str, path: Path) -> None:
    """Give ``tmp`` the permissions a plain ``open`` would (mkstemp and safetensors use 0600), then move it to ``path``."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, path)


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        _publish(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_tensors(path: Path, tensors: dict[str, Tensor], header: dict[str, str] | None = None) -> None:
    """Write a safetensors file via a temporary file and ``os.replace`` (never half-written)."""
    state = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    _atomic_write(path, lambda tmp: save_file(state, tmp, metadata=header))


def atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON via a temporary file and ``os.replace`` (never half-written)."""
    _atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(data, indent=2) + "\n"))


def save_checkpoint(
    model: LayerwiseClassifier,
    meta: CheckpointMeta,
    directory: str | Path,
    dtype: torch.dtype = torch.float32,
) -> Path:
    """Write ``directory/model.safetensors`` and ``directory/model.json``; returns the directory.

    A frozen backbone with a weights spec is not copied: the JSON points to it and pins its sha256.
    Floating-point tensors are stored as ``dtype`` (float16 halves the size).
    """
    directory = Path(directory)
    state = model.state_dict()
    external_backbone = meta.backbone.freeze and bool(meta.backbone.weights)
    if external_backbone:
        state = {k: v for k, v in state.items() if not k.startswith("backbone.")}
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    weights = directory / WEIGHTS_FILE
    atomic_write_tensors(weights, state, {"format": FORMAT})
    record = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "laya_version": __version__,
        **meta.to_dict(),
        "layer_names": list(model.layer_names),
        "weights": {"file": WEIGHTS_FILE, "sha256": sha256_file(weights), "dtype": str(dtype).removeprefix("torch.")},
        "backbone_sha256": model.backbone.fingerprint() if external_backbone else None,
    }
    atomic_write_json(directory / META_FILE, record)
    return directory


def _locate(path: str | Path) -> Path:
    path = Path(path)
    directory = path.parent if path.is_file() else path
    if not (directory / META_FILE).is_file() or not (directory / WEIGHTS_FILE).is_file():
        raise CheckpointError(
            f"no LAYA checkpoint at {path}: expected a directory holding {META_FILE} and {WEIGHTS_FILE}"
        )
    return directory


def read_meta(path: str | Path) -> dict[str, Any]:
    """The raw, validated ``model.json`` of a checkpoint (no weights are read)."""
    directory = _locate(path)
    try:
        record = json.loads((directory / META_FILE).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{directory / META_FILE} is not valid JSON ({error}); the file is damaged") from error
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise CheckpointError(f'{directory / META_FILE} is not a LAYA checkpoint (no "format": "{FORMAT}")')
    if record.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(
            f"{directory} uses checkpoint format {record['format_version']}, newer than this laya ({FORMAT_VERSION}); upgrade laya"
        )
    return record


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Load a checkpoint directory (or either of its two files) into an eval-mode model on ``map_location``
    (``auto|cpu|cuda|cuda:N``, see :func:`laya.model.devices.resolve_device`); any checkpoint loads on any device.

    Raises:
        CheckpointError: missing, foreign, truncated or mismatched files, with the reason.
    """
    directory = _locate(path)
    map_location = resolve_device(map_location)
    record = read_meta(directory)
    try:
        meta = CheckpointMeta.from_dict(record)
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{directory / META_FILE} has invalid metadata: {error!r}") from error
    weights = directory / WEIGHTS_FILE
    expected = record.get("weights", {}).get("sha256")
    if expected and sha256_file(weights) != expected:
        raise CheckpointError(
            f"{weights} does not match {META_FILE} (sha256 differs): the weights file is truncated, "
            "corrupted or belongs to another checkpoint"
        )
    try:
        state = load_file(str(weights), device=str(map_location))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{weights} is not a readable safetensors file: {error}") from error
    try:
        model = build_model(meta, directory)
    except (FileNotFoundError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"cannot build the model described by {directory / META_FILE}: {error}") from error
    external_backbone = record.get("backbone_sha256") is not None
    if external_backbone and model.backbone.fingerprint() != record["backbone_sha256"]:
        raise CheckpointError(
            f"the frozen backbone weights ({meta.backbone.weights!r}) differ from those the head in {directory} "
            "was trained on (sha256 mismatch)"
        )
    target = model.state_dict()
    if external_backbone:
        target = {k: v for k, v in target.items() if not k.startswith("backbone.")}
    missing, unexpected = sorted(set(target) - set(state)), sorted(set(state) - set(target))
    wrong = [k for k in set(target) & set(state) if target[k].shape != state[k].shape]
    if missing or unexpected or wrong:
        raise CheckpointError(
            f"{weights} does not fit the model described in {META_FILE}: "
            f"missing {missing[:5]}, unexpected {unexpected[:5]}, wrong shape {sorted(wrong)[:5]}"
        )
    model.load_state_dict({k: v.to(target[k].dtype) for k, v in state.items()}, strict=not external_backbone)
    model.to(map_location).eval()
    return Checkpoint(model, meta, Preprocess(meta.input).to(map_location), directory)


__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointMeta",
    "atomic_write_json",
    "atomic_write_tensors",
    "build_model",
    "load_checkpoint",
    "read_meta",
    "save_checkpoint",
    "sha256_file",
]
