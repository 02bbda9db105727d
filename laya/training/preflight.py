"""What ``laya attach`` checks before any long step: within seconds, in the user's words.

:func:`preflight` runs before a feature is computed or a progress bar starts, and raises :class:`AttachRefused`
(a ``ValueError``: the command line prints it on its own line and exits with status 2, no traceback):

* the architecture's name is one its family knows (else the closest names are suggested);
* the setting folder is new, or ``overwrite`` replaces it (once the new one is whole:
  :func:`~laya.training.attach.whole_folder`);
* the weights file is found, within budget and holds tensors only (:func:`laya.model.weights.read_state_dict`:
  a pickled model is refused with the reason; nothing in it is executed);
* the dataset is found, has at least two classes, and the same ones in ``train/`` and ``test/``;
* the network is built at the requested input size (a dry forward of one input) with the weights fitted exactly
  by name (:func:`laya.model.weights.fit_state_dict`). A classifier of another class count than the dataset's
  names both; a size the network (or its weights' position embeddings) cannot take names the sizes that work;
  any other misfit lists the missing, unexpected and mismatched keys;
* the network ends in a linear classifier (its own head) with one output per class of the dataset.

What it establishes (:class:`Checked`) is what ``attach`` goes on with: the input (:func:`input_spec`) and the
frozen backbone's config (:func:`backbone_config`) derived from the :class:`~laya.training.attach_config.AttachConfig`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from laya.data.datasets import InputSpec, load_dataset
from laya.model.backbones import Backbone, BackboneConfig, build_backbone
from laya.model.backbones.base import candidate_sides
from laya.model.devices import model_device
from laya.model.own_head import own_head
from laya.model.weights import Fit, WeightsMismatch, read_state_dict, resolve_path

if TYPE_CHECKING:
    from laya.training.attach_config import AttachConfig

BUILD_ERRORS = (RuntimeError, AssertionError, IndexError, ZeroDivisionError, TypeError)  # a size it cannot take
SIDES_TRIED = 10  # candidate input sides tried when the requested one fails
MIN_SIDE = 16  # below this a network sees mostly padding (a ResNet's 1x1 input runs, and explains nothing)
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLASS_COUNT_KWARG = {"timm": "num_classes", "torchvision": "num_classes", "transformers": "num_labels"}


class AttachRefused(ValueError):
    """``laya attach`` cannot go on; the message says why in the user's words and what to change."""


@dataclass
class Checked:
    """What :func:`preflight` established: the dataset's classes, the input, the backbone config and the built
    backbone (the user's weights loaded), and the seconds the checks took."""

    classes: tuple[str, ...]
    spec: InputSpec
    backbone_config: BackboneConfig
    backbone: Backbone
    seconds: float


def input_spec(config: AttachConfig, channels: int, source: int) -> InputSpec:
    """The input the network was trained on: ``config.image_size`` (default ``source``) and its normalisation."""
    default = (IMAGENET_MEAN, IMAGENET_STD) if channels == 3 else ((0.5,) * channels, (0.5,) * channels)
    mean, std = tuple(config.mean or default[0]), tuple(config.std or default[1])
    if len(mean) != channels or len(std) != channels:
        raise ValueError(f"mean and std need {channels} values (one per channel); got {list(mean)} and {list(std)}")
    return InputSpec(channels, source, config.image_size or source, mean, std)


def backbone_config(config: AttachConfig, spec: InputSpec, num_classes: int) -> BackboneConfig:
    """The frozen backbone with the network's classifier kept and its pre-logits features as the last layer."""
    kwargs = dict(config.model_kwargs)
    if config.family in CLASS_COUNT_KWARG:
        kwargs.setdefault(CLASS_COUNT_KWARG[config.family], num_classes)
    weights = None if config.weights is None else str(Path(config.weights).resolve())
    data = BackboneConfig(
        name=config.family, in_channels=spec.channels, input_size=spec.size, model=config.import_path
        if config.family == "wrapped" else config.model, model_kwargs=kwargs, pre_logits=True, weights=weights,
        weights_by_order=config.weights_by_order, freeze=True, layers=config.layers,
    ).to_dict()  # fmt: skip
    return BackboneConfig.from_dict(data)  # the checks a checkpoint of it will pass


def _classes(config: AttachConfig) -> tuple[tuple[str, ...], int, int]:
    """The dataset's classes (the same in both splits, at least two), channels and image side, without decoding
    an ImageFolder (it is opened as a stream)."""
    splits = {split: load_dataset(config.dataset, split, config.image_size, stream=True) for split in ("train", "test")}
    train, test = splits["train"], splits["test"]
    if len(train.classes) < 2:
        found = f"one class ({train.classes[0]})" if train.classes else "no class"
        raise AttachRefused(
            f"the dataset {config.dataset!r} has {found} in train/: a classifier needs at least two classes "
            "(one folder of images per class: DIR/train/<class>/, DIR/test/<class>/)"
        )
    if tuple(train.classes) != tuple(test.classes):
        raise AttachRefused(
            f"the dataset {config.dataset!r} has other classes in test/ ({', '.join(test.classes)}) than in train/ "
            f"({', '.join(train.classes)}); both need the same class folders"
        )
    return tuple(train.classes), train.channels, train.image_size


def _check_model(config: AttachConfig) -> None:
    """An architecture name the family knows (an unknown one is refused with the closest names) and
    ``model_kwargs`` it takes (an unknown one with those it allows), before any file or dataset is read."""
    from laya.model.backbones import family
    from laya.model.validation import CheckpointError

    names = family(config.family).model_names() if config.model else None
    if names is not None and config.model not in names:
        listed = {"timm": "timm.list_models()", "torchvision": "torchvision.models.list_models()"}
        where = listed.get(config.family, ", ".join(names))
        raise AttachRefused(
            f"{config.family} has no architecture {config.model!r}{family(config.family).closest(config.model)} "
            f"(all: {where})"
        )
    if config.family != "wrapped":  # a wrapped module's arguments are its own import path's (checked when built)
        data = {"name": config.family, "model": config.model, "model_kwargs": config.model_kwargs}
        try:
            family(config.family).check_config(data)
        except CheckpointError as error:
            raise AttachRefused(f"--model-kwargs: {error}") from None


def _check_destination(config: AttachConfig, module: nn.Module | None) -> None:
    """The setting folder is new, or ``overwrite`` replaces it (a file there is refused either way)."""
    setting = config.setting_path(module)
    if setting.exists() and not setting.is_dir():
        raise AttachRefused(f"{setting} is a file, not a setting folder; name another with --setting or --out")
    if setting.exists() and not config.overwrite:
        raise AttachRefused(
            f"the setting folder {setting} exists already (an earlier attach wrote it); pass --overwrite "
            "(overwrite=True) to replace it once the new one is whole, or name another with --setting or --out"
        )


def _weights_state(config: AttachConfig) -> dict[str, tuple[int, ...]] | None:
    """``name -> shape`` of the user's weights file, read safely and within budget (None: a wrapped module's own,
    or a Trainer folder's, read as the network is built)."""
    if config.weights is None:
        return None
    from laya.model.weights import split_entry, weights_folder

    if config.family == "transformers" and weights_folder(config.weights):  # a Trainer's folder: read as it is built
        return None
    file, entry = split_entry(config.weights)
    return {k: tuple(v.shape) for k, v in read_state_dict(resolve_path(file), entry=entry).items()}


def _class_count(fit: Fit, classes: int) -> int | None:
    """The weights' class count where the only misfit is the classifier's rows (``(K, ...)`` for the model's
    ``(classes, ...)``), else None."""
    if fit.missing or fit.unexpected or not fit.mismatched:
        return None
    counts = {file[0] for file, model in fit.mismatched.values() if file[1:] == model[1:] and model[0] == classes}
    return counts.pop() if len(counts) == 1 and len(fit.mismatched) <= 2 else None


def _sides(config: BackboneConfig, shapes: dict[str, tuple[int, ...]] | None, module: nn.Module | None) -> list[int]:
    """Input sides near the requested one at which the network builds and runs one input and, where the file's
    shapes are given, its weights fit (position embeddings follow the size): shape-only builds on the ``meta``
    device, or for a wrapped module, forwards of one zero image."""
    from laya.model.backbones.timm import native_size

    native = native_size(config.model) if config.name == "timm" else 224
    works = []
    for side in candidate_sides(config.input_size, native, SIDES_TRIED):
        try:
            if module is not None:
                with torch.no_grad():
                    module.eval()(torch.zeros(1, config.in_channels, side, side, device=model_device(module)))
            else:
                with torch.device("meta"):
                    net = build_backbone(replace(config, input_size=side, weights=None))
                if shapes is not None:
                    state = net.model.state_dict()
                    if any(tuple(v.shape) != shapes[k] for k, v in state.items() if k in shapes):
                        continue
        except (*BUILD_ERRORS, ValueError):
            continue
        works.append(side)
    return sorted(works)


def _size_refusal(what: str, config: BackboneConfig, works: list[int], detail: str) -> AttachRefused:
    size = config.input_size
    if not works:
        return AttachRefused(f"{what} cannot run at {size}x{size} ({detail}), nor at any side tried near it")
    return AttachRefused(
        f"{what} cannot take {size}x{size} inputs ({detail}); sizes that work: {', '.join(map(str, works))}. "
        "Set --image-size to one of them (the side the network was trained at)"
    )


def build_network(
    config: BackboneConfig, classes: tuple[str, ...], dataset: str, module: nn.Module | None = None,
    shapes: dict[str, tuple[int, ...]] | None = None,
) -> Backbone:  # fmt: skip
    """The backbone with the user's weights (a dry forward of one input included), its failures in words."""
    what = f"{config.name} {config.model or type(module).__name__!r}"
    if config.input_size < MIN_SIDE:
        detail = f"under {MIN_SIDE} px it sees padding, not an image"
        raise _size_refusal(what, config, [s for s in _sides(config, shapes, module) if s >= MIN_SIDE], detail)
    try:
        return build_backbone(config, **({"module": module} if module is not None else {}))
    except WeightsMismatch as error:
        count = _class_count(error.fit, len(classes))
        if count is not None:
            raise AttachRefused(
                f"the weights' classifier has {count} outputs; the dataset {dataset!r} has {len(classes)} classes "
                f"({', '.join(classes[:10])}{', ...' if len(classes) > 10 else ''}). Attach the network to the "
                "dataset it was trained on (the same classes, in sorted folder order)"
            ) from None
        works = _sides(config, shapes, module) if shapes is not None and not error.fit.missing else []
        if works and config.input_size not in works:
            raise _size_refusal(what, config, works, f"its weights: {error.fit.describe()}") from None
        raise AttachRefused(f"{what}: {error}") from None
    except BUILD_ERRORS as error:
        detail = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160] if str(error).strip() else ''}"
        raise _size_refusal(what, config, _sides(config, None, module), detail) from None


def preflight(config: AttachConfig, module: nn.Module | None = None, echo: bool = True) -> Checked:
    """Every check :mod:`laya.training.attach` can make before a long step (see the module docstring).
    ``echo``: print to stderr how the weights were fitted: a training checkpoint's entry read, a key prefix
    stripped (one line), a mapping matched in order (``--match-by-order``).

    Raises:
        AttachRefused / ValueError / FileNotFoundError: with a message in the user's words.
    """
    start = time.perf_counter()
    _check_model(config)
    _check_destination(config, module)
    shapes = _weights_state(config)
    classes, channels, side = _classes(config)
    spec = input_spec(config, channels, side)
    bb_config = backbone_config(config, spec, len(classes))
    backbone = build_network(bb_config, classes, config.dataset, module, shapes)
    if backbone.weights_note and echo:
        print(f"weights: {backbone.weights_note}", file=sys.stderr)
    if backbone.weights_mapping and echo:
        pairs = backbone.weights_mapping
        shown = "\n".join(f"  {src} -> {dst}" for src, dst in pairs)
        print(f"weights matched in order (--match-by-order), {len(pairs)} tensors:\n{shown}", file=sys.stderr)
    head = own_head(backbone)  # the network ends in a linear classifier (a ValueError says otherwise)
    if head.num_classes != len(classes):
        raise AttachRefused(
            f"the network's classifier has {head.num_classes} outputs; the dataset {config.dataset!r} has "
            f"{len(classes)} classes ({', '.join(classes[:10])})"
        )
    return Checked(classes, spec, bb_config, backbone, time.perf_counter() - start)


__all__ = ["AttachRefused", "Checked", "backbone_config", "build_network", "input_spec", "preflight"]
