"""``LayerwiseClassifier``: a backbone that exposes every layer, followed by a layer head."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from laya.model.backbones import Backbone
from laya.model.heads import AblationMode, LayerHead


@dataclass
class ModelOutput:
    """One forward pass: everything the analyses need, so none of them reruns the backbone.

    ``logits``/``probs``: ``(B, C)``; ``layer_scores``: ``(B, L)`` or ``None``;
    ``hidden``: L tensors ``(B, d_i)``.
    """

    logits: Tensor
    probs: Tensor
    layer_scores: Tensor | None
    hidden: list[Tensor]

    @property
    def prediction(self) -> Tensor:
        return self.logits.argmax(dim=-1)


class LayerwiseClassifier(nn.Module):
    """``backbone + head``: ``x (B, C, H, W) -> hidden [h_1..h_L] -> head``."""

    def __init__(self, backbone: Backbone, head: LayerHead) -> None:
        super().__init__()
        if tuple(backbone.layer_dims) != tuple(head.dims):
            raise ValueError(f"head expects layer dims {head.dims}, backbone gives {backbone.layer_dims}")
        self.backbone = backbone
        self.head = head

    @property
    def layer_names(self) -> tuple[str, ...]:
        return self.backbone.layer_names

    def forward(self, x: Tensor, keep: Tensor | None = None, mode: AblationMode = "zero") -> ModelOutput:
        hidden = self.backbone(x)
        out = self.head(hidden, keep, mode)
        return ModelOutput(out.logits, torch.softmax(out.logits, dim=-1), out.layer_scores, hidden)


__all__ = ["LayerwiseClassifier", "ModelOutput"]
