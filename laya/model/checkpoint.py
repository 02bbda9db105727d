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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from laya import __version__
from laya.data.datasets import Images, InputSpec, Preprocess, dataset_label, load_dataset
from laya.model.backbones import BackboneConfig, build_backbone, family
from laya.model.budget import check_budget
from laya.model.classifier import LayerwiseClassifier
from laya.model.devices import resolve_device
from laya.model.header import check_header, read_header
from laya.model.heads import HeadConfig, build_head
from laya.model.own_head import is_own_head
from laya.model.validation import CheckpointError, check_record, parse_int, refuse
from laya.model.weights import SOURCES
from laya.paths import PathRefused, canonical_path

FORMAT = "laya-checkpoint"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
META_FILE = "model.json"


KNOWN_DATASETS = ("fashion-mnist", "cifar10")


@dataclass(frozen=True)
class Confinement:
    """Where a checkpoint from an untrusted source may point (the dashboard's uploads and path box).

    ``backbone.weights`` must be a named source (:data:`laya.model.weights.SOURCES`) or a file
    inside ``weights_root``; ``dataset`` a known name or a folder inside one of ``data_roots``.
    Refusals of a path outside never say whether the named file exists; inside, a missing file is named
    by the text the checkpoint gave, never by its server path.
    """

    weights_root: Path
    data_roots: tuple[Path, ...] = ()
    allow_import: bool = False  # a wrapped module's recorded import path may be run (the operator's own folder only)


def check_confined(meta: CheckpointMeta, confine: Confinement, directory: Path, exists: bool = True) -> str | None:
    """Refuse ``backbone.weights`` outside ``confine`` (see :class:`Confinement`); returns the spec to build
    with: a named source as is, a file as its real path (:func:`laya.paths.canonical_path`), the very path
    that is then opened (``exists``: and it must be a file). The dataset is checked when it is loaded
    (:meth:`Checkpoint.load_data`)."""
    if not family(meta.backbone.name).from_config and not confine.allow_import:
        raise refuse(
            "backbone.name",
            meta.backbone.name,
            "a wrapped Python module is rebuilt only from Python (load_checkpoint(path, module=...)); the dashboard "
            "opens it only from its own model folder, started with `laya dashboard --allow-import`",
        )
    spec = meta.backbone.weights
    if spec == "timm":
        raise refuse(
            "backbone.weights", spec, "downloads are not allowed for this checkpoint; name a local source or file"
        )
    if spec is None or spec in SOURCES:
        return spec
    try:
        real = canonical_path(spec, directory, [confine.weights_root])
    except PathRefused as error:
        raise refuse(
            "backbone.weights",
            spec,
            f"must be a named source ({', '.join(SOURCES)}) or a file inside the checkpoint's own folder "
            f"(server models: their model folder); {error}",
        ) from None
    if exists and not real.is_file():  # inside the allowed folder: saying so reveals nothing else
        raise refuse("backbone.weights", spec, "no such file in the checkpoint's folder")
    return str(real)


def check_dataset(name: str, confine: Confinement) -> str:
    """Refuse a ``dataset`` that is neither a known name nor a folder inside ``confine.data_roots``; returns
    the name, or the folder's real path (the one then read)."""
    if name in KNOWN_DATASETS:
        return name
    try:
        return str(canonical_path(name, None, confine.data_roots))
    except PathRefused as error:
        raise refuse(
            "dataset",
            name,
            f"must be a known dataset ({', '.join(KNOWN_DATASETS)}) or a folder inside the data roots this server "
            f"allows; {error}",
        ) from None


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
    def from_dict(cls, data: dict[str, Any], checked: bool = False) -> CheckpointMeta:
        """Rebuild from ``model.json``, checking every field (:mod:`laya.model.validation`) and the input
        spec against the backbone. Raises :class:`CheckpointError` naming the field, value and rule.
        ``checked``: the record's top level already passed :func:`~laya.model.validation.check_record`
        (:func:`parse_meta`), so it is not walked twice."""
        if not checked:
            check_record(data, FORMAT, FORMAT_VERSION, WEIGHTS_FILE)
        try:
            spec = InputSpec.from_dict(data["input"])
        except ValueError as error:  # e.g. an empty mean: a refusal like any other field's
            raise CheckpointError(str(error)) from None
        meta = cls(
            backbone=BackboneConfig.from_dict(data["backbone"]),
            head=HeadConfig.from_dict(data["head"]),
            classes=tuple(data["classes"]),
            dataset=data["dataset"],
            input=spec,
            seed=data.get("seed", 0),
            train=data.get("train", {}),
            metrics=data.get("metrics", {}),
        )
        backbone, spec = meta.backbone, meta.input
        for field_name, value, key, expected in (
            ("input.channels", spec.channels, "in_channels", backbone.in_channels),
            ("input.size", spec.size, "input_size", backbone.input_size),
        ):
            if value != expected:
                raise refuse(field_name, value, f"must equal the backbone's {key} ({expected})")
        if (
            backbone.name == "mlp"
            and backbone.layer_names is not None
            and len(backbone.layer_names) != len(backbone.widths)
        ):
            raise refuse("backbone.layer_names", backbone.layer_names, f"must name the {len(backbone.widths)} layers")
        return meta


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (eval mode), its metadata, preprocessing and location."""

    model: LayerwiseClassifier
    meta: CheckpointMeta
    preprocess: Preprocess
    path: Path
    warnings: tuple[str, ...] = ()  # problems loaded anyway (``allow_nonfinite``), for the UI to show
    confine: Confinement | None = None  # set for untrusted checkpoints: what they may read

    @property
    def layer_names(self) -> tuple[str, ...]:
        return self.model.layer_names

    def load_data(self, split: str = "test", dataset: str | None = None, stream: bool | None = None) -> Images:
        """The checkpoint's dataset (or ``dataset``), decoded as the model was trained: same size, channels
        (``stream``: see :func:`~laya.data.datasets.load_dataset`).

        Raises:
            DatasetNotFoundError: the dataset is not on this machine; the message says where to get it.
            CheckpointError: an untrusted checkpoint names a folder outside its allowed data roots.

        An untrusted checkpoint (``confine`` set, as every checkpoint the dashboard loads) never downloads.
        """
        spec = self.meta.input
        name = dataset or self.meta.dataset
        if self.confine is not None:  # untrusted: confined, and never a download
            name = check_dataset(name, self.confine)
            return load_dataset(name, split, spec.source_size, spec.channels, stream, download=False)
        return load_dataset(name, split, spec.source_size, spec.channels, stream)

    @property
    def name(self) -> str:
        return display_name(self.meta)


def display_name(meta: CheckpointMeta) -> str:
    """``dataset / backbone / head``: how the dashboard names a checkpoint (an attached network's own classifier:
    ``own classifier``, not the LastLayer head that holds it)."""
    head = "own classifier" if is_own_head(meta.train) else meta.head.name
    return f"{dataset_label(meta.dataset)} / {meta.backbone.model or meta.backbone.name} / {head}"


def build_model(meta: CheckpointMeta, base_dir: Path | None = None, **options) -> LayerwiseClassifier:
    """A model with the architecture ``meta`` describes (backbone weights loaded if it names any);
    ``options`` go to the backbone family (a wrapped module: ``module=``, ``allow_import=``)."""
    backbone = build_backbone(meta.backbone, base_dir, **options)
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
    """Write a safetensors file via a temporary file and ``os.replace`` (never half-written). A tensor sharing memory
    with an earlier one (tied weights; a traced torchvision graph's constants, MaxViT's) is written as a copy of its
    own, as safetensors requires; loading it back gives the same values."""
    state: dict[str, Tensor] = {}
    storages: set[int] = set()
    for k, v in tensors.items():
        v = v.detach().cpu().contiguous()
        storage = v.untyped_storage().data_ptr()
        state[k] = v.clone() if v.numel() and storage in storages else v
        storages.add(storage)
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


NONFINITE = "hold NaN or Inf values"
MAX_META_BYTES = 1 << 20  # a model.json is a few KB; larger ones are refused unread


def parse_meta(text: bytes | str) -> dict[str, Any]:
    """``model.json`` content -> its record, with the top-level fields checked (no file access)."""
    if len(text) > MAX_META_BYTES:
        raise refuse(META_FILE, f"{len(text):,} bytes", f"must be at most {MAX_META_BYTES:,} bytes")
    try:
        record = json.loads(text, parse_int=parse_int)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(
            f"{META_FILE} is not valid JSON (line {getattr(error, 'lineno', '?')}); the file is damaged"
        ) from error
    except RecursionError as error:
        raise CheckpointError(f"{META_FILE} is nested too deeply") from error
    check_record(record, FORMAT, FORMAT_VERSION, WEIGHTS_FILE)
    return record


def read_meta(path: str | Path) -> dict[str, Any]:
    """The raw, validated ``model.json`` of a checkpoint (no weights are read)."""
    directory = _locate(path)
    with open(directory / META_FILE, "rb") as f:
        return parse_meta(f.read(MAX_META_BYTES + 1))


def check_model(record: dict[str, Any], weights: bytes | Path | None = None) -> CheckpointMeta:
    """Everything about a checkpoint that needs no weights: fields, input spec against backbone, size and
    compute budget (:mod:`laya.model.budget`) and, given the ``weights`` file (path or bytes), its header's
    names, shapes and dtypes against the model's (:mod:`laya.model.header`).

    ``record`` comes from :func:`parse_meta` (top level already checked).

    Raises:
        CheckpointError: naming the field, the value and the rule; nothing has been allocated.
    """
    meta = CheckpointMeta.from_dict(record, checked=True)
    if not family(meta.backbone.name).from_config:
        return meta  # a wrapped module: the user's own object, sized by their Python, never from a JSON
    budget = check_budget(meta.backbone, meta.head, len(meta.classes))
    names = record.get("layer_names") or meta.backbone.layer_names
    if names and len(names) != len(budget.layer_dims):
        raise refuse("layer_names", names, f"must name the model's {len(budget.layer_dims)} layers")
    if weights is not None:
        expected = budget.state
        if record.get("backbone_sha256") is not None:  # a frozen backbone stored outside the head checkpoint
            expected = {k: v for k, v in expected.items() if not k.startswith("backbone.")}
        declared = getattr(torch, record.get("weights", {}).get("dtype", "float32"))
        check_header(read_header(weights, WEIGHTS_FILE), expected, declared, WEIGHTS_FILE, META_FILE)
    return meta


def check_finite_state(state: dict[str, Tensor]) -> list[str]:
    """Names of floating-point tensors holding NaN or Inf."""
    return sorted(k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all()))


def load_checkpoint(
    path: str | Path,
    map_location: str | torch.device = "cpu",
    confine: Confinement | None = None,
    allow_nonfinite: bool = False,
    module: torch.nn.Module | None = None,
    allow_import: bool = False,
) -> Checkpoint:
    """Load a checkpoint directory (or either of its two files) into an eval-mode model.

    Every field of ``model.json``, the model's size and compute (:mod:`laya.model.budget`) and the
    weights file's header (names, shapes, dtypes: :mod:`laya.model.header`) are checked before the
    weights are read or anything is built. ``confine``: the checkpoint comes from an
    untrusted source and may only point inside it (:class:`Confinement`). ``allow_nonfinite``:
    load weights holding NaN/Inf with a warning (listed in ``Checkpoint.warnings``) instead of refusing.
    ``module`` / ``allow_import``: a ``wrapped`` checkpoint's Python module, given, or imported from the
    path it records (runs that code: an explicit opt-in of the caller). Under ``confine`` only
    ``confine.allow_import`` counts (the dashboard sets it for its operator's model folder when started
    with ``laya dashboard --allow-import``, never for uploads).

    Raises:
        CheckpointError: invalid or over-budget metadata, missing, foreign, truncated, mismatched or
            non-finite files, with the reason; messages name files by their name, not their server path.
    """
    directory = _locate(path)
    map_location = resolve_device(map_location)
    record = read_meta(directory)
    weights = directory / WEIGHTS_FILE
    expected = record.get("weights", {}).get("sha256")
    if expected and sha256_file(weights) != expected:
        raise CheckpointError(
            f"{WEIGHTS_FILE} does not match {META_FILE} (sha256 differs): the weights file is truncated, "
            "corrupted or belongs to another checkpoint"
        )
    meta = check_model(record, weights)
    built = meta  # what is built: a confined weights file by the real path that was checked
    if confine is not None:
        built = replace(meta, backbone=replace(meta.backbone, weights=check_confined(meta, confine, directory)))
        allow_import = confine.allow_import  # never more than the confinement allows
    try:
        state = load_file(str(weights), device=str(map_location))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{WEIGHTS_FILE} is not a readable safetensors file ({type(error).__name__})") from error
    try:
        options = {"module": module, "allow_import": allow_import} if meta.backbone.name == "wrapped" else {}
        model = build_model(built, directory, **options)
    except (FileNotFoundError, ValueError, RuntimeError, ImportError, AttributeError, TypeError) as error:
        raise CheckpointError(f"cannot build the model described by {META_FILE}: {error}") from error
    external_backbone = record.get("backbone_sha256") is not None
    if external_backbone and model.backbone.fingerprint() != record["backbone_sha256"]:
        raise CheckpointError(
            f"the frozen backbone weights ({meta.backbone.weights!r}) differ from those the head "
            "was trained on (sha256 mismatch)"
        )
    target = model.state_dict()
    if external_backbone:
        target = {k: v for k, v in target.items() if not k.startswith("backbone.")}
    missing, unexpected = sorted(set(target) - set(state)), sorted(set(state) - set(target))
    wrong = [k for k in set(target) & set(state) if target[k].shape != state[k].shape]
    if missing or unexpected or wrong:
        raise CheckpointError(
            f"{WEIGHTS_FILE} does not fit the model described in {META_FILE}: "
            f"missing {missing[:5]}, unexpected {unexpected[:5]}, wrong shape {sorted(wrong)[:5]}"
        )
    warnings = []
    nonfinite = check_finite_state(state) + check_finite_state(model.state_dict() if external_backbone else {})
    if nonfinite:
        message = f"{len(nonfinite)} weight tensor(s) {NONFINITE}: {', '.join(nonfinite[:5])}"
        if not allow_nonfinite:
            raise CheckpointError(f"{message}; the model's outputs would be meaningless")
        warnings.append(f"{message}: predictions and scores may be NaN")
    model.load_state_dict({k: v.to(target[k].dtype) for k, v in state.items()}, strict=not external_backbone)
    model.to(map_location).eval()
    return Checkpoint(model, meta, Preprocess(meta.input).to(map_location), directory, tuple(warnings), confine)


__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointMeta",
    "Confinement",
    "atomic_write_json",
    "atomic_write_tensors",
    "build_model",
    "check_confined",
    "check_dataset",
    "check_model",
    "display_name",
    "load_checkpoint",
    "parse_meta",
    "read_meta",
    "save_checkpoint",
    "sha256_file",
]
