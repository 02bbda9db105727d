"""``mlp``: Flatten -> [Linear -> LayerNorm -> GELU] x L; ``h_i`` is the i-th block's output."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor, nn

from laya.model.backbones.base import Backbone, BackboneConfig
from laya.model.backbones.calls import forward_call
from laya.model.backbones.registry import register_backbone


@register_backbone("mlp")
class MLPBackbone(Backbone):
    """Flatten -> [Linear -> LayerNorm -> GELU] x L; ``h_i`` is the i-th block's output (after the GELU)."""

    def __init__(self, config: BackboneConfig, base_dir: Path | None = None) -> None:
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
        with forward_call(self) as call:
            h = x.flatten(1)
            hidden = []
            for block in self.blocks:
                h = block(h)
                hidden.append(h)
            call.layers = hidden  # vectors: no positions
        return hidden

    def forward_to(self, x: Tensor, layer: int) -> Tensor:
        self._check_layer(layer)
        h = x.flatten(1)
        for block in self.blocks[: layer + 1]:
            h = block(h)
        return h


__all__ = ["MLPBackbone"]
