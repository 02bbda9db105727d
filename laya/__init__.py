"""LAYA: layer-wise attention aggregation heads, and the tools to inspect them.

LAYA (Layer-wise Attention Aggregator, arXiv 2511.12723) replaces a classifier head: each
hidden state ``h_i`` is projected to ``z_i = g_i(h_i)``, a scoring MLP gives ``s(x)``,
``alpha(x) = softmax(s(x) / tau)`` and ``h_agg = sum_i alpha_i(x) z_i`` feeds the classifier.
The ``alpha_i(x)`` are intrinsic, per-input layer attributions.
"""

__version__ = "0.1.0"

# The public API, imported on first use (PEP 562): ``laya --version`` and ``laya --help`` answer without torch.
_EXPORTS = {
    "ABLATION_MODES": "laya.model.heads",
    "BackboneConfig": "laya.model.backbones",
    "Checkpoint": "laya.model.checkpoint",
    "CheckpointError": "laya.model.checkpoint",
    "HeadConfig": "laya.model.heads",
    "HeadOutput": "laya.model.heads",
    "LayerwiseClassifier": "laya.model.classifier",
    "ModelOutput": "laya.model.classifier",
    "build_backbone": "laya.model.backbones",
    "build_head": "laya.model.heads",
    "load_checkpoint": "laya.model.checkpoint",
    "save_checkpoint": "laya.model.checkpoint",
    "wrap": "laya.model.backbones",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'laya' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = ["__version__", *sorted(_EXPORTS)]
