"""Per-layer hidden states of a whole image set, computed once in batches (and cached for frozen backbones).

With a frozen backbone the hidden states never change, so heads train on a cache
``$LAYA_CACHE/features/<key>/layer_<i>.npy`` keyed by the backbone's weights, the images and
the preprocessing. The cache is written batch by batch into memory-mapped ``.npy`` files and
read back memory-mapped, so neither writing nor reading needs the features to fit in RAM.
Analyses reuse the same tensors instead of recomputing the backbone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor
from tqdm.auto import tqdm

from laya.data.datasets import Images, Preprocess, batch_indices, cache_dir, pixel_fingerprint
from laya.model.backbones import Backbone
from laya.model.devices import autocast, model_device
from laya.model.hooks import pass_rows
from laya.model.sharding import Shard, main_says


def image_batches(images: Images | Tensor, batches: list[Tensor]) -> Iterator[Tensor]:
    if isinstance(images, Tensor):
        return (images[idx] for idx in batches)
    return images.iter_batches(batches)


def iter_hidden_states(
    backbone: Backbone,
    preprocess: Preprocess,
    images: Images | Tensor,
    batch_size: int = 256,
    desc: str | None = None,
    precision: str = "float32",
    batches: list[Tensor] | None = None,
) -> Iterator[list[Tensor]]:
    """Per batch of ``images`` (a dataset or ``uint8 (N, C, H, W)``): L float32 tensors ``(B, d_i)``
    on the model's device. ``batches``: index tensors of the batches to run (default: all, in order). A batch runs
    in passes of as many rows as keep the largest activation within :data:`~laya.model.hooks.PASS_BYTES`
    (:func:`~laya.model.hooks.pass_rows`, measured once): all of it at 32 px, 80 rows of a ResNet at 224 px."""
    was_training = backbone.training
    backbone.eval()
    device = model_device(backbone)
    batches = batch_indices(len(images), batch_size) if batches is None else batches
    progress = tqdm(image_batches(images, batches), desc=desc, disable=desc is None, total=len(batches), leave=False)
    rows = 0
    try:
        for batch in progress:
            # no grad mode spans a yield: it would leak into the caller while the generator is suspended
            with torch.inference_mode(), autocast(device, precision):
                x = preprocess(batch)
                rows = rows or pass_rows(backbone, x, max(batch_size, len(x)))
                passes = [[h.float() for h in backbone(part)] for part in x.split(rows)]
                hidden = passes[0] if len(passes) == 1 else [torch.cat(h) for h in zip(*passes)]
            yield hidden
    finally:
        backbone.train(was_training)


def hidden_states(
    backbone: Backbone,
    preprocess: Preprocess,
    images: Images | Tensor,
    batch_size: int = 256,
    desc: str | None = None,
    precision: str = "float32",
) -> list[Tensor]:
    """Run ``backbone`` over all ``images``: L tensors ``(N, d_i)`` on the model's device (held in memory)."""
    chunks = list(iter_hidden_states(backbone, preprocess, images, batch_size, desc, precision))
    return [torch.cat([c[i] for c in chunks]) for i in range(len(backbone.layer_dims))]


def _cache_key(backbone: Backbone, preprocess: Preprocess, images: Images | Tensor, precision: str) -> str:
    digest = hashlib.sha256()
    digest.update(backbone.fingerprint().encode())
    digest.update(json.dumps(preprocess.spec.to_dict(), sort_keys=True).encode())
    # the architecture, not where the weights came from (the fingerprint covers the weights)
    architecture = {k: v for k, v in backbone.config.to_dict().items() if k not in ("weights", "freeze", "layer_names")}
    digest.update(json.dumps(architecture, sort_keys=True, default=str).encode())
    digest.update(precision.encode())
    # decoded pixels are keyed as their dataset is (ImageArrays.fingerprint): a split and its images share a cache
    digest.update((pixel_fingerprint(images) if isinstance(images, Tensor) else images.fingerprint()).encode())
    return digest.hexdigest()[:24]


def cached_hidden_states(
    backbone: Backbone,
    preprocess: Preprocess,
    images: Images | Tensor,
    batch_size: int = 256,
    desc: str | None = None,
    precision: str = "float32",
    shard: bool = False,
) -> list[Tensor]:
    """:func:`hidden_states`, read from / written to the on-disk feature cache: L CPU tensors ``(N, d_i)``
    backed by memory-mapped files (rows are read from disk as they are indexed).

    ``shard``: every process of a ``torchrun`` group calls this with the same arguments, and the pass is split
    between them (:class:`~laya.model.sharding.Shard`: process ``r`` computes batches ``r, r + W, ...``, exactly as
    one process would); the main process writes the rows, gathered round by round, and every process reads the
    cache it wrote, which must therefore be on a filesystem they all see (``$LAYA_CACHE``).
    """
    directory = cache_dir() / "features" / _cache_key(backbone, preprocess, images, precision)
    layers = len(backbone.layer_dims)
    batches = batch_indices(len(images), batch_size)
    whole = Shard.of(batches, shard)
    done = (directory / "done").is_file()
    if not (main_says(done) if whole.world > 1 else done):  # every process of the group takes the same branch
        _write_cache(directory, backbone, preprocess, images, batches, whole, desc, precision)
    if whole.world > 1:
        dist.barrier()
        if not (directory / "done").is_file():
            raise FileNotFoundError(
                f"process {whole.rank} cannot see the feature cache the main process wrote ({directory}): under "
                "torchrun on several machines, LAYA_CACHE must be a folder every machine shares"
            )
    # copy-on-write mapping: torch wants writable memory; nothing is ever written back to the file
    return [torch.from_numpy(np.load(directory / f"layer_{i}.npy", mmap_mode="c")) for i in range(layers)]


def _write_cache(
    directory: Path, backbone: Backbone, preprocess: Preprocess, images: Images | Tensor, batches: list[Tensor],
    whole: Shard, desc: str | None, precision: str,
) -> None:  # fmt: skip
    """Compute this process's batches of ``whole`` and, in the main process, write every batch's rows (gathered
    round by round) into ``directory``'s memory-mapped ``layer_<i>.npy`` files; the folder appears complete or not
    at all (written under a temporary name, then renamed)."""
    dims = list(backbone.layer_dims)
    mine = iter_hidden_states(backbone, preprocess, images, desc=desc, precision=precision,
                              batches=[batches[b] for b in whole.owned])  # fmt: skip
    arrays, tmp = [], directory.with_name(f"{directory.name}.tmp-{os.getpid()}")
    if whole.rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        arrays = [
            np.lib.format.open_memmap(tmp / f"layer_{i}.npy", mode="w+", dtype=np.float32, shape=(len(images), d))
            for i, d in enumerate(dims)
        ]
    start = 0
    for part in whole.rounds():
        local = torch.cat([h.cpu() for h in next(mine)], 1) if part.owned else torch.empty(0, sum(dims))
        rows = part.gather([local])  # (this round's inputs, sum of d_i), in batch order
        for array, h in zip(arrays, rows.split(dims, 1)):
            array[start : start + len(h)] = h.numpy()
        start += len(rows)
    mine.close()  # the backbone back in its mode
    if whole.rank != 0:
        return
    for array in arrays:
        array.flush()
    del arrays
    (tmp / "done").write_text("")
    if (directory / "done").is_file():  # another run finished first
        shutil.rmtree(tmp)
    else:
        shutil.rmtree(directory, ignore_errors=True)  # a half-written cache from a killed run
        os.replace(tmp, directory)


__all__ = ["cached_hidden_states", "hidden_states", "image_batches", "iter_hidden_states"]
