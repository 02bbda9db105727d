"""The network's own classifier as a LastLayer head: its exact weights, no training.

A backbone built with ``pre_logits`` has the network's pre-logits features ``f: (B, D)`` as its last
layer ``h_L`` and keeps its final linear layer (:meth:`~laya.model.backbones.base.Backbone.classifier`).
:func:`own_head` copies that layer into a :class:`~laya.model.heads.LinearHead` on ``h_L``:
``logits = W h_L + b``, so backbone + own head predict exactly what the network predicts, and every
analysis of a LastLayer head (probes, lens, prediction depth, ablations) applies to the unchanged network.
"""

from __future__ import annotations

import torch

from laya.model.backbones import Backbone
from laya.model.heads import LinearHead

OWN = "own"  # the head folder of an attached network's own classifier, and its key in ``model.json``'s ``train``


def own_head(backbone: Backbone) -> LinearHead:
    """A LastLayer head holding ``backbone.classifier()``'s weight ``(C, D)`` and bias ``(C,)`` (zero if it has none).

    Raises:
        ValueError: the backbone has no classifier of its own (no ``pre_logits``, or the network ends otherwise).
    """
    linear = backbone.classifier()
    head = LinearHead(backbone.layer_dims, linear.out_features, layers="last")
    with torch.no_grad():
        head.linear.weight.copy_(linear.weight)
        head.linear.bias.copy_(linear.bias if linear.bias is not None else torch.zeros(linear.out_features))
    return head.to(linear.weight.device)


def is_own_head(train: dict) -> bool:
    """Whether a checkpoint's ``train`` record (``CheckpointMeta.train``) marks the network's own classifier."""
    return isinstance(train.get(OWN), dict)


__all__ = ["OWN", "is_own_head", "own_head"]
