"""Backbones that expose every layer: each returns the list of per-layer hidden vectors.

One wrapper per family, all with the same interface (``forward(x) -> [h_1, ..., h_L]``,
``h_i`` of shape ``(B, d_i)``, plus ``layer_dims`` and ``layer_names``):

* ``mlp``  — Linear -> LayerNorm -> GELU blocks; ``h_i`` after the GELU.
* ``cnn``  — Conv -> BatchNorm -> ReLU (-> ...) -> MaxPool blocks; ``h_i`` = global-average-pooled block output.
* ``timm`` — any timm model with ``forward_intermediates`` (timm >= 1.0). CNN stages are pooled by
  global average; transformer blocks by the CLS token or the mean of the patch tokens.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from laya.model.configs import construct
from laya.model.weights import load_weights


@dataclass
class BackboneConfig:
    """Which backbone and how to build it. Fields not used by a family are ignored by it."""

    name: Literal["mlp", "cnn", "timm"] = "mlp"
    in_channels: int | None = None  # None: taken from the dataset when training
    input_size: int | None = None  # side of the square input; None: the dataset's image size
    widths: tuple[int, ...] = (512, 256, 128)  # mlp: hidden widths; cnn: channels per block
    convs_per_block: int = 1  # cnn only
    model: str | None = None  # timm model name, e.g. "efficientnet_lite0", "vit_tiny_patch16_224"
    model_kwargs: dict[str, Any] = field(default_factory=dict)  # passed to timm.create_model
    pool: Literal["auto", "cls", "avg"] = "auto"  # timm: auto = cls for models with prefix tokens
    indices: int | list[int] | None = None  # timm forward_intermediates indices (None = all)
    intermediates_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. {"extra_blocks": true}
    pre_logits: bool = False  # timm: add the network's own final features (forward_head(pre_logits=True)) last
    weights: str | None = None  # None | "timm" | a source in laya.model.weights.SOURCES | a file path
    freeze: bool = False  # train only the head; the backbone stays in eval mode
    layer_names: list[str] | None = None  # display names; derived when None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["widths"] = list(self.widths)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackboneConfig:
        config = construct(cls, data, "backbone")
        config.widths = tuple(int(w) for w in config.widths)
        if config.name not in BACKBONES:
            raise ValueError(f"unknown backbone {config.name!r}; expected one of {sorted(BACKBONES)}")
        if config.name == "timm" and not config.model:
            raise ValueError("backbone 'timm' needs a model name (config key 'model', CLI --timm-model)")
        return config


class Backbone(nn.Module):
    """Base class: ``forward(x: (B, C, H, W)) -> list of L tensors (B, d_i)``."""

    layer_dims: tuple[int, ...]
    layer_names: tuple[str, ...]

    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        if config.in_channels is None or config.input_size is None:
            raise ValueError(f"backbone {config.name!r} needs in_channels and input_size, got {config}")
        self.config = config

    def _finish(self, default_names: list[str]) -> None:
        names = self.config.layer_names or default_names
        if len(names) != len(self.layer_dims):
            raise ValueError(f"{len(names)} layer names given for {len(self.layer_dims)} layers: {names}")
        self.layer_names = tuple(names)
        if self.config.freeze:
            for p in self.parameters():
                p.requires_grad_(False)

    def forward_to(self, x: Tensor, layer: int) -> Tensor:
        """Hidden state of ``layer`` (0-based) alone, ``(B, d_layer)``, running the network no deeper
        than that layer needs (early exit, backbone truncation)."""
        raise NotImplementedError

    def _check_layer(self, layer: int) -> None:
        if not 0 <= layer < len(self.layer_dims):
            raise ValueError(f"layer must be in 0..{len(self.layer_dims) - 1}, got {layer}")

    def train(self, mode: bool = True) -> Backbone:
        """A frozen backbone stays in eval mode (BatchNorm statistics and dropout fixed)."""
        return super().train(mode and not self.config.freeze)

    def fingerprint(self) -> str:
        """sha256 of the weights, to check that a frozen backbone is the one a head was trained on."""
        digest = hashlib.sha256()
        for name, tensor in sorted(self.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().float().numpy().tobytes())
        return digest.hexdigest()


class MLPBackbone(Backbone):
    """Flatten -> [Linear -> LayerNorm -> GELU] x L; ``h_i`` is the i-th block's output."""

    def __init__(self, config: BackboneConfig) -> None:
        super().__init__(config)
        d_in = config.in_channels * config.input_size**2
        blocks = []
        for width in config.widths:
            blocks.append(nn.Sequential(nn.Linear(d_in, width), nn.LayerNorm(width), nn.GELU()))
            d_in = width
        self.blocks = nn.ModuleList(blocks)
        self.layer_dims = tuple(config.widths)
        self._finish([f"block {i + 1}" for i in range(len(blocks))])

    def forward(self, x: Tensor) -> list[Tensor]:
        h = x.flatten(1)
        hidden = []
        for block in self.blocks:
            h = block(h)
            hidden.append(h)
        return hidden

    def forward_to(self, x: Tensor, layer: int) -> Tensor:
        self._check_layer(layer)
        h = x.flatten(1)
        for block in self.blocks[: layer + 1]:
            h = block(h)
        return h


class CNNBackbone(Backbone):
    """[Conv3x3 -> BN -> ReLU] x convs_per_block -> MaxPool2, per block; ``h_i`` = GAP of block i."""

    def __init__(self, config: BackboneConfig) -> None:
        super().__init__(config)
        c_in = config.in_channels
        blocks = []
        for width in config.widths:
            layers: list[nn.Module] = []
            for _ in range(config.convs_per_block):
                layers += [nn.Conv2d(c_in, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
                c_in = width
            layers.append(nn.MaxPool2d(2))
            blocks.append(nn.Sequential(*layers))
        self.blocks = nn.ModuleList(blocks)
        self.layer_dims = tuple(config.widths)
        self._finish([f"block {i + 1}" for i in range(len(blocks))])

    def forward(self, x: Tensor) -> list[Tensor]:
        hidden = []
        for block in self.blocks:
            x = block(x)
            hidden.append(x.mean(dim=(2, 3)))
        return hidden

    def forward_to(self, x: Tensor, layer: int) -> Tensor:
        self._check_layer(layer)
        for block in self.blocks[: layer + 1]:
            x = block(x)
        return x.mean(dim=(2, 3))


class TimmBackbone(Backbone):
    """Any timm model, read through ``forward_intermediates``.

    Outputs of shape ``(B, C, H, W)`` are average-pooled; token models
    (``num_prefix_tokens > 0``) give the CLS token (``pool="cls"``) or the mean of
    the patch tokens (``pool="avg"``). With ``pre_logits`` the network's own final features
    (``forward_head(final, pre_logits=True)``: e.g. EfficientNet's ``conv_head`` + ``bn2`` + pooling,
    1280-d; a ViT's normed, pooled token) are the last layer, so a LastLayer head is the usual linear probe.
    """

    def __init__(self, config: BackboneConfig, base_dir: Path | None = None) -> None:
        super().__init__(config)
        import timm

        kwargs = dict(config.model_kwargs)
        kwargs.setdefault("num_classes", 0)
        if config.model not in timm.list_models():
            raise ValueError(f"timm has no model {config.model!r} (see timm.list_models())")
        pretrained = config.weights == "timm"
        try:
            self.model = timm.create_model(config.model, pretrained=pretrained, in_chans=config.in_channels, **kwargs)
        except (OSError, RuntimeError) as error:
            if not pretrained:
                raise
            raise RuntimeError(
                f"could not fetch timm's pretrained weights for {config.model!r} ({error}). They need internet; "
                "offline, pass a local weights file instead (backbone weights = PATH)."
            ) from error
        if not hasattr(self.model, "forward_intermediates"):
            raise ValueError(f"timm model {config.model!r} has no forward_intermediates (needs timm >= 1.0)")
        if config.weights and not pretrained:
            load_weights(self.model, config.weights, base_dir)
        tokens = getattr(self.model, "num_prefix_tokens", 0) > 0
        self.pool = ("cls" if tokens else "avg") if config.pool == "auto" else config.pool
        if self.pool == "cls" and not tokens:
            raise ValueError(f"pool='cls' needs a model with a CLS token; {config.model!r} has none (use 'avg')")
        self.tokens = tokens
        with torch.no_grad():
            was_training = self.model.training
            self.model.eval()
            zeros = torch.zeros(1, config.in_channels, config.input_size, config.input_size)
            probe = self(zeros)
            self.take = self._take_indices(zeros, len(probe) - config.pre_logits)
            self.model.train(was_training)
        self.layer_dims = tuple(h.shape[1] for h in probe)
        kind = "block" if tokens else "stage"
        names = [f"{kind} {i + 1}" for i in range(len(probe) - self.config.pre_logits)]
        self._finish(names + ["pre-logits"] * self.config.pre_logits)

    def _take_indices(self, probe: Tensor, count: int) -> list[int]:
        """timm's index of each of the ``count`` intermediate layers (``config.indices`` resolved) for
        :meth:`forward_to`; an int ``n`` (the last n) needs one probe pass to count all of them."""
        indices = self.config.indices
        if indices is None:
            return list(range(count))
        if isinstance(indices, int):
            total = len(self._intermediates(probe, None, intermediates_only=True))
            return list(range(total - indices, total))
        return list(indices)

    def _intermediates(self, x: Tensor, indices, **kwargs):
        options = dict(self.config.intermediates_kwargs)
        if self.tokens:
            options.update(output_fmt="NLC", return_prefix_tokens=self.pool == "cls")
        return self.model.forward_intermediates(x, indices=indices, **options, **kwargs)

    @staticmethod
    def _pool(out: Tensor | tuple[Tensor, Tensor]) -> Tensor:
        if isinstance(out, tuple):  # (patch tokens, prefix tokens)
            return out[1][:, 0]
        if out.ndim == 3:  # (B, N, D) patch tokens
            return out.mean(dim=1)
        return out.mean(dim=(2, 3))  # (B, C, H, W)

    def forward(self, x: Tensor) -> list[Tensor]:
        outputs = self._intermediates(x, self.config.indices, intermediates_only=not self.config.pre_logits)
        if self.config.pre_logits:
            final, outputs = outputs
        hidden = [self._pool(out) for out in outputs]
        if self.config.pre_logits:
            hidden.append(self.model.forward_head(final, pre_logits=True).flatten(1))
        return hidden

    def forward_to(self, x: Tensor, layer: int) -> Tensor:
        """``forward_intermediates(indices=[k], stop_early=True)``; the pre-logits layer needs the full pass."""
        self._check_layer(layer)
        if self.config.pre_logits and layer == len(self.layer_dims) - 1:
            return self(x)[-1]
        (out,) = self._intermediates(x, [self.take[layer]], stop_early=True, intermediates_only=True)
        return self._pool(out)


BACKBONES: dict[str, Any] = {"mlp": MLPBackbone, "cnn": CNNBackbone, "timm": TimmBackbone}


def build_backbone(config: BackboneConfig, base_dir: Path | None = None) -> Backbone:
    """Construct the backbone family named by ``config.name``.

    ``base_dir`` resolves a relative ``config.weights`` path (a checkpoint's directory).
    """
    if config.name not in BACKBONES:
        raise ValueError(f"unknown backbone {config.name!r}; expected one of {sorted(BACKBONES)}")
    if config.name == "timm":
        return TimmBackbone(config, base_dir)
    if config.weights:
        raise ValueError(f"backbone {config.name!r} has no pretrained weights; got weights={config.weights!r}")
    return BACKBONES[config.name](config)


__all__ = ["BACKBONES", "Backbone", "BackboneConfig", "CNNBackbone", "MLPBackbone", "TimmBackbone", "build_backbone"]
