"""Per-layer hidden states of a whole image set, computed once in batches (and cached for frozen backbones).

With a frozen backbone the hidden states never change, so heads train on a cache
``$LAYA_CACHE/features/<key>.safetensors`` keyed by the backbone's weights, the images and
the preprocessing. Analyses reuse the same tensors instead of recomputing the backbone.
"""

from __future__ import annotations

import hashlib
import json

import torch
from safetensors.torch import load_file
from torch import Tensor
from tqdm.auto import tqdm

from laya.data.datasets import Preprocess, cache_dir
from laya.model.backbones import Backbone
from laya.model.checkpoint import atomic_write_tensors


@torch.inference_mode()
def hidden_states(
    backbone: Backbone, preprocess: Preprocess, images: Tensor, batch_size: int = 256, desc: str | None = None
) -> list[Tensor]:
    """Run ``backbone`` over ``uint8 (N, C, H, W)`` images: L tensors ``(N, d_i)``."""
    was_training = backbone.training
    backbone.eval()
    chunks: list[list[Tensor]] = []
    starts = range(0, len(images), batch_size)
    for start in tqdm(starts, desc=desc, disable=desc is None, unit="batch", leave=False):
        chunks.append(backbone(preprocess(images[start : start + batch_size])))
    backbone.train(was_training)
    return [torch.cat([c[i] for c in chunks]) for i in range(len(backbone.layer_dims))]


def cached_hidden_states(
    backbone: Backbone, preprocess: Preprocess, images: Tensor, batch_size: int = 256, desc: str | None = None
) -> list[Tensor]:
    """:func:`hidden_states`, read from / written to the feature cache."""
    digest = hashlib.sha256()
    digest.update(backbone.fingerprint().encode())
    digest.update(json.dumps(preprocess.spec.to_dict(), sort_keys=True).encode())
    # the architecture, not where the weights came from (the fingerprint covers the weights)
    architecture = {k: v for k, v in backbone.config.to_dict().items() if k not in ("weights", "freeze", "layer_names")}
    digest.update(json.dumps(architecture, sort_keys=True, default=str).encode())
    digest.update(str(tuple(images.shape)).encode())
    digest.update(images.contiguous().numpy().tobytes())
    path = cache_dir() / "features" / f"{digest.hexdigest()[:24]}.safetensors"
    if path.is_file():
        stored = load_file(str(path))
        return [stored[f"layer_{i}"] for i in range(len(stored))]
    hidden = hidden_states(backbone, preprocess, images, batch_size, desc)
    atomic_write_tensors(path, {f"layer_{i}": h for i, h in enumerate(hidden)})
    return hidden


__all__ = ["cached_hidden_states", "hidden_states"]
