"""The inputs depth analytics read: a seeded subset of a checkpoint's split, and its hidden states.

Every depth analysis (``laya depth``, ``laya lens``, ``laya exits``) takes the first ``limit`` inputs of one seeded
permutation of a split, so runs with the same limit and seed read the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from laya.data.datasets import Images
from laya.data.features import cached_hidden_states, hidden_states
from laya.model.checkpoint import Checkpoint


def seeded_subset(n: int, limit: int | None, seed: int) -> Tensor:
    """The first ``limit`` of a seeded permutation (all classes represented), or everything."""
    if limit is None or limit >= n:
        return torch.arange(n)
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:limit]


def limit_flag(limit: int | None) -> str:
    """A limit as the command line takes it back: the number, or ``all`` for the whole split."""
    return "all" if limit is None else str(limit)


def split_subset(checkpoint: Checkpoint, split: str, limit: int | None, seed: int) -> Images:
    """The checkpoint's ``split``, limited to the first ``limit`` of a seeded permutation (:func:`seeded_subset`);
    the split itself where the limit takes all of it (not a copy: a decoded 224 px split is hundreds of MB)."""
    images = checkpoint.load_data(split)
    return images if limit is None or limit >= len(images) else images.subset(seeded_subset(len(images), limit, seed))


def hidden_states_of(checkpoint: Checkpoint, batch_size: int) -> Callable[[Images | Tensor, str], list[Tensor]]:
    """``(images (a split, decoded or streamed, or uint8 (N, ...)), image set name) -> L hidden states (N, D_l)``
    on the model's device; a frozen backbone's are cached per image set
    (:func:`~laya.data.features.cached_hidden_states`; under ``torchrun``, where every process runs the depth
    analytics, the pass is split between them)."""
    model = checkpoint.model
    device = next(model.parameters()).device
    frozen = checkpoint.meta.backbone.freeze

    def hidden_of(images: Images | Tensor, what: str) -> list[Tensor]:
        if frozen:
            hidden = cached_hidden_states(model.backbone, checkpoint.preprocess, images, batch_size, what, shard=True)
        else:
            hidden = hidden_states(model.backbone, checkpoint.preprocess, images, batch_size, what)
        return [h.to(device) for h in hidden]

    return hidden_of


__all__ = ["hidden_states_of", "seeded_subset", "split_subset"]
