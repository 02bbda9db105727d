"""LAYA: layer-wise attention aggregation heads, and the tools to inspect them.

LAYA (Layer-wise Attention Aggregator, arXiv 2511.12723) replaces a classifier head: each
hidden state ``h_i`` is projected to ``z_i = g_i(h_i)``, a scoring MLP gives ``s(x)``,
``alpha(x) = softmax(s(x) / tau)`` and ``h_agg = sum_i alpha_i(x) z_i`` feeds the classifier.
The ``alpha_i(x)`` are intrinsic, per-input layer attributions.
"""

__version__ = "0.1.0"

from laya.model.backbones import BackboneConfig, build_backbone, wrap
from laya.model.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from laya.model.classifier import LayerwiseClassifier, ModelOutput
from laya.model.heads import ABLATION_MODES, HeadConfig, HeadOutput, build_head

__all__ = [
    "ABLATION_MODES",
    "BackboneConfig",
    "Checkpoint",
    "CheckpointError",
    "HeadConfig",
    "HeadOutput",
    "LayerwiseClassifier",
    "ModelOutput",
    "__version__",
    "build_backbone",
    "build_head",
    "load_checkpoint",
    "save_checkpoint",
    "wrap",
]
