"""Backbones that expose every layer: each returns the list of per-layer hidden vectors.

One family per module, all behind one interface (:class:`~laya.model.backbones.base.Backbone`:
``forward(x) -> [h_1, ..., h_L]``, ``h_i`` of shape ``(B, d_i)``, plus ``layer_dims`` and
``layer_names``), registered by name (:mod:`~laya.model.backbones.registry`):

* ``mlp``          — Linear -> LayerNorm -> GELU blocks; ``h_i`` after the GELU.
* ``cnn``          — Conv -> BatchNorm -> ReLU (-> ...) -> MaxPool blocks; ``h_i`` = pooled block output.
* ``timm``         — any timm model with ``forward_intermediates``, at any input size it supports.
* ``torchvision``  — torchvision classification models, layers picked with ``feature_extraction``.
* ``transformers`` — Hugging Face image models (``output_hidden_states=True``), built from a config.
* ``wrapped``      — any ``nn.Module`` from Python, read through forward hooks (:func:`laya.wrap`).

A checkpoint names a registered family and a model; nothing it says can import code.
"""

from laya.model.backbones.base import Backbone, BackboneConfig, pool_hidden
from laya.model.backbones.cnn import CNNBackbone
from laya.model.backbones.mlp import MLPBackbone
from laya.model.backbones.registry import BACKBONES, build_backbone, family, register_backbone
from laya.model.backbones.timm import TimmBackbone
from laya.model.backbones.torchvision import TorchvisionBackbone
from laya.model.backbones.transformers import TransformersBackbone
from laya.model.backbones.wrapped import NeedsModule, WrappedBackbone, wrap

__all__ = [
    "BACKBONES",
    "Backbone",
    "BackboneConfig",
    "CNNBackbone",
    "MLPBackbone",
    "NeedsModule",
    "TimmBackbone",
    "TorchvisionBackbone",
    "TransformersBackbone",
    "WrappedBackbone",
    "build_backbone",
    "family",
    "pool_hidden",
    "register_backbone",
    "wrap",
]
