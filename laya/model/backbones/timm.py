"""``timm``: any timm model with ``forward_intermediates`` (timm >= 1.0), at any input size it supports.

CNN stages are pooled by global average; transformer blocks by the CLS token or the mean of the
patch tokens (:func:`~laya.model.backbones.base.pool_hidden`). Layers are named ``block N`` where every
intermediate has one resolution (:func:`single_resolution`) and ``stage N`` for hierarchical stages.
The input size is passed to timm as ``img_size`` wherever the model's class accepts one (ViT, DeiT,
Swin, BEiT, EVA, Mixer, LeViT, CoAtNet, MaxViT, ...: position embeddings, window and grid partitions follow it). A size the
architecture cannot take is refused with the sizes that would work, found by shape-only passes on
PyTorch's ``meta`` device.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from laya.model.backbones.base import SIZE_ERRORS, Backbone, BackboneConfig, accepts, candidate_sides, pool_hidden
from laya.model.backbones.base import size_refusal as refusal
from laya.model.backbones.calls import Call, forward_call, observing
from laya.model.backbones.pre_logits import PRE_LOGITS, PreLogits, check_logits, classifier_linears
from laya.model.backbones.registry import register_backbone
from laya.model.validation import TIMM_KWARGS, check_kwargs, check_value, refuse
from laya.model.weights import load_weights


def timm_models():
    """The ``timm`` package, with laya's own timm models registered in it (:mod:`laya.model.cifar_resnets`: He et
    al.'s CIFAR ResNets and their plain twins); imported on first use, not when the dashboard starts."""
    import timm

    import laya.model.cifar_resnets  # noqa: F401  (registers cifar_resnet*, cifar_plain*)

    return timm


def native_size(name: str) -> int:
    """The side of the input a timm model was designed for (its ``pretrained_cfg['input_size']``)."""
    timm = timm_models()
    cfg = timm.get_pretrained_cfg(name)
    size = getattr(cfg, "input_size", None) if cfg is not None else None
    return int(size[-1]) if size else 224


def classifier_names(name: str) -> tuple[str, ...]:
    """The module name(s) of timm model ``name``'s classifier (its ``pretrained_cfg['classifier']``: ``fc``,
    ``head.fc``, or a distilled model's two), whose keys a backbone built with ``num_classes=0`` does not have."""
    timm = timm_models()
    cfg = timm.get_pretrained_cfg(name)
    names = getattr(cfg, "classifier", None) if cfg is not None else None
    return (names,) if isinstance(names, str) else tuple(names or ("head", "fc", "classifier"))


@functools.lru_cache(maxsize=256)
def takes_img_size(name: str) -> bool:
    """Whether timm model ``name``'s class accepts ``img_size`` (its class, built once on the meta device)."""
    timm = timm_models()
    with torch.device("meta"):
        return accepts(type(timm.create_model(name, pretrained=False, num_classes=0)), "img_size")


def single_resolution(model: nn.Module) -> bool:
    """Whether every intermediate of a timm model has the same resolution (its ``feature_info`` reductions):
    blocks of an isotropic model (ViT, CaiT, XCiT, ConViT, Mixer), not hierarchical stages (ResNet, Swin, PiT)."""
    info = getattr(model, "feature_info", None)
    reductions = {f.get("reduction") for f in info} if isinstance(info, list) else set()
    return len(reductions) == 1


def create(name: str, size: int, in_channels: int, kwargs: dict[str, Any], pretrained: bool = False) -> nn.Module:
    """``timm.create_model`` with ``img_size=size`` added where the model's class accepts it."""
    timm = timm_models()
    kwargs = {"num_classes": 0, **kwargs}
    if "img_size" not in kwargs and takes_img_size(name):
        kwargs["img_size"] = size
    return timm.create_model(name, pretrained=pretrained, in_chans=in_channels, **kwargs)


def runs_at(name: str, sides: list[int], in_channels: int, kwargs: dict[str, Any]) -> list[int]:
    """The ``sides`` at which the model builds and runs ``forward_intermediates`` (shapes only, on the
    ``meta`` device: no memory, no weights). Built once when its class takes no ``img_size``."""
    kwargs = {k: v for k, v in kwargs.items() if k != "img_size"}
    works = []
    with torch.device("meta"), torch.no_grad():
        model = None if takes_img_size(name) else create(name, sides[0], in_channels, kwargs).eval()
        for side in sides:
            try:
                net = model if model is not None else create(name, side, in_channels, kwargs).eval()
                net.forward_intermediates(torch.zeros(1, in_channels, side, side), intermediates_only=True)
            except SIZE_ERRORS:
                continue
            works.append(side)
    return works


def working_sizes(name: str, size: int, in_channels: int, kwargs: dict[str, Any], limit: int = 6) -> list[int]:
    """Up to ``limit`` input sides near ``size`` (and the native one) at which the model runs."""
    return sorted(runs_at(name, candidate_sides(size, native_size(name), limit + 4), in_channels, kwargs)[:limit])


def size_refusal(name: str, size: int, in_channels: int, kwargs: dict[str, Any], error: Exception) -> ValueError:
    """The error for a size the model cannot take: names the model, the size and sizes that work."""
    sizes = working_sizes(name, size, in_channels, kwargs)
    return refusal(f"timm model {name!r}", size, kwargs, error, sizes, native_size(name))


@register_backbone("timm")
class TimmBackbone(Backbone):
    """Any timm model, read through ``forward_intermediates``.

    Outputs of shape ``(B, C, H, W)`` are average-pooled; token models
    (``num_prefix_tokens > 0``) give the CLS token (``pool="cls"``) or the mean of
    the patch tokens (``pool="avg"``). With ``pre_logits`` the network's own final features
    (``forward_head(final, pre_logits=True)``: e.g. EfficientNet's ``conv_head`` + ``bn2`` + pooling,
    1280-d; a ViT's normed, pooled token) are the last layer, so a LastLayer head is the usual linear probe.
    """

    takes_weights = True

    @classmethod
    def check_config(cls, data: dict[str, Any]) -> None:
        """A model name; ``model_kwargs`` only from :data:`~laya.model.validation.TIMM_KWARGS`."""
        if not data.get("model"):
            raise refuse("backbone.model", data.get("model"), "backbone 'timm' needs a model name (CLI --model)")
        kwargs = data.get("model_kwargs", {})
        check_value("backbone.model_kwargs", kwargs, dict[str, Any])
        check_kwargs("backbone.model_kwargs", kwargs, TIMM_KWARGS)

    @classmethod
    def model_names(cls) -> list[str]:
        timm = timm_models()
        return timm.list_models()

    def __init__(self, config: BackboneConfig, base_dir: Path | None = None) -> None:
        super().__init__(config)
        timm = timm_models()
        if config.model not in timm.list_models():
            raise ValueError(f"timm has no model {config.model!r}{self.closest(config.model)} (see timm.list_models())")
        pretrained = config.weights == "timm"
        size, channels = config.input_size, config.in_channels
        try:
            self.model = create(config.model, size, channels, config.model_kwargs, pretrained)
        except (OSError, RuntimeError) as error:
            if not pretrained:
                raise
            raise RuntimeError(
                f"could not fetch timm's pretrained weights for {config.model!r} ({error}). They need internet; "
                "offline, pass a local weights file instead (backbone weights = PATH)."
            ) from error
        except SIZE_ERRORS as error:
            raise size_refusal(config.model, size, channels, config.model_kwargs, error) from error
        if not hasattr(self.model, "forward_intermediates"):
            raise ValueError(f"timm model {config.model!r} has no forward_intermediates (needs timm >= 1.0)")
        if config.weights and not pretrained:  # a classifier the backbone dropped (num_classes=0) may be in the file
            dropped = () if config.pre_logits else classifier_names(config.model)
            by_order = config.weights_by_order
            loaded = load_weights(self.model, config.weights, base_dir, by_order, dropped)
            self.weights_mapping, self.weights_note = loaded.pairs, loaded.note
        options = inspect.signature(self.model.forward_intermediates).parameters
        # token models whose forward_intermediates can return the prefix (CLS) tokens; CaiT, for one, cannot
        tokens = getattr(self.model, "num_prefix_tokens", 0) > 0 and "return_prefix_tokens" in options
        self.pool = ("cls" if tokens else "avg") if config.pool == "auto" else config.pool
        if self.pool == "cls" and not tokens:
            raise ValueError(
                f"pool='cls' needs a model that returns its CLS token; {config.model!r} does not (use 'avg')"
            )
        self.tokens = tokens and "output_fmt" in options
        if config.pre_logits and getattr(self.model, "num_classes", 0):  # a classifier: its layers' inputs are read
            self.pre_logits = PreLogits(self.model, classifier_linears(self.model), self)
        with torch.no_grad():
            was_training = self.model.training
            self.model.eval()
            zeros = torch.zeros(1, channels, size, size)
            calls: list[Call] = []
            try:
                with observing(self, calls.append):
                    probe = self(zeros)
            except SIZE_ERRORS as error:
                raise size_refusal(config.model, size, channels, config.model_kwargs, error) from error
            self.take = self._take_indices(zeros, len(probe) - config.pre_logits)
            if self.pre_logits is not None:  # its layers, averaged, give the network's logits (timm's distilled heads)
                linear, what = self.final_layer()
                check_logits(linear, probe[-1], self.model.forward_head(calls[0].final), what)
            self.model.train(was_training)
        self.layer_dims = tuple(h.shape[1] for h in probe)
        kind = "block" if tokens or single_resolution(self.model) else "stage"
        names = [f"{kind} {i + 1}" for i in range(len(probe) - self.config.pre_logits)]
        self._finish(names + [PRE_LOGITS] * self.config.pre_logits)

    def _take_indices(self, probe: Tensor, count: int) -> list[int]:
        """timm's index of each of the ``count`` intermediate layers (``config.indices`` resolved) for
        :meth:`forward_to`; an int ``n`` (the last n) needs one probe pass to count all of them."""
        indices = self.config.indices
        if indices is None:
            return list(range(count))
        if isinstance(indices, int):
            total = len(self._intermediates(probe, None, intermediates_only=True))
            return list(range(total - indices, total))
        if len(indices) != count:  # timm returns each layer once, in order: [0, 0, 0] gives one layer, not three
            raise refuse("backbone.indices", indices, f"must name different layers (timm returned {count} of them)")
        return list(indices)

    def _intermediates(self, x: Tensor, indices, **kwargs):
        options = dict(self.config.intermediates_kwargs)
        if self.tokens:
            options.update(output_fmt="NLC", return_prefix_tokens=self.pool == "cls")
        return self.model.forward_intermediates(x, indices=indices, **options, **kwargs)

    @staticmethod
    def _pool(out: Tensor | tuple[Tensor, Tensor]) -> Tensor:
        return pool_hidden(out, "avg")

    def forward(self, x: Tensor) -> list[Tensor]:
        with forward_call(self) as call:
            outputs = self._intermediates(x, self.config.indices, intermediates_only=not self.config.pre_logits)
            if self.config.pre_logits:
                call.final, outputs = outputs
            hidden = [self._pool(out) for out in outputs]
            if self.config.pre_logits:
                call.features = self.head_input(call.final)
                hidden.append(call.features)
            call.layers = list(outputs)
        return hidden

    def head_input(self, final: Tensor) -> Tensor:
        """The pre-logits features ``(B, D)`` of ``final`` (``forward_head``'s input): what the classifier's layers
        read, joined (:class:`~laya.model.backbones.pre_logits.PreLogits`: a distilled model's two heads), or
        ``forward_head(pre_logits=True)`` for a model built without a classifier (``num_classes=0``)."""
        if self.pre_logits is None:
            return self.model.forward_head(final, pre_logits=True).flatten(1)
        with forward_call(self) as call:
            self.model.forward_head(final)
            return self.pre_logits.read(call)

    def forward_to(self, x: Tensor, layer: int) -> Tensor:
        """``forward_intermediates(indices=[k], stop_early=True)``; the pre-logits layer needs the full pass."""
        self._check_layer(layer)
        if self.config.pre_logits and layer == len(self.layer_dims) - 1:
            return self(x)[-1]
        (out,) = self._intermediates(x, [self.take[layer]], stop_early=True, intermediates_only=True)
        return self._pool(out)


__all__ = [
    "TimmBackbone",
    "classifier_names",
    "create",
    "native_size",
    "runs_at",
    "single_resolution",
    "takes_img_size",
    "timm_models",
    "working_sizes",
]
