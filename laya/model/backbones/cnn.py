"""``cnn``: [Conv3x3 -> BN -> ReLU] x convs_per_block -> MaxPool2 per block; ``h_i`` = GAP of block i."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor, nn

from laya.model.backbones.base import Backbone, BackboneConfig
from laya.model.backbones.calls import forward_call
from laya.model.backbones.registry import register_backbone


@register_backbone("cnn")
class CNNBackbone(Backbone):
    """[Conv3x3 -> BN -> ReLU] x convs_per_block -> MaxPool2, per block; ``h_i`` = GAP of block i."""

    def __init__(self, config: BackboneConfig, base_dir: Path | None = None) -> None:
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
        with forward_call(self) as call:
            maps = []
            for block in self.blocks:
                x = block(x)
                maps.append(x)
            call.layers = maps
        return [m.mean(dim=(2, 3)) for m in maps]

    def forward_to(self, x: Tensor, layer: int) -> Tensor:
        self._check_layer(layer)
        for block in self.blocks[: layer + 1]:
            x = block(x)
        return x.mean(dim=(2, 3))


__all__ = ["CNNBackbone"]
