"""An ImageFolder split decoded on demand, batch by batch, by DataLoader worker processes.

:class:`ImageFiles` has the interface of the in-memory :class:`~laya.data.datasets.ImageArrays`
(``labels``, ``classes``, ``len``, ``subset``, ``iter_batches``, ``fingerprint``) but holds only
the file list: memory is a few batches in flight, whatever the dataset's size. Workers decode
with :func:`laya.data.images.load_image_tensor`, the decoder the in-memory path uses, so both
paths give identical pixels. ``num_workers`` defaults to every core (``os.cpu_count()``, divided among
the processes of a torchrun node).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from laya.data.images import ImageError, load_image_tensor


def default_workers() -> int:
    """Every core, shared among the processes torchrun started on this node."""
    return max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


class _Decode(Dataset):
    """``files[i]`` -> ``uint8 (C, S, S)``; runs inside DataLoader workers."""

    def __init__(self, files: Sequence[Path], channels: int, size: int) -> None:
        self.files, self.channels, self.size = files, channels, size

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> Tensor:
        try:
            return load_image_tensor(self.files[i], self.channels, self.size)
        except ImageError as error:
            raise ImageError(f"{self.files[i]}: {error}") from error


def _clean_errors(batches: Iterator[Tensor]) -> Iterator[Tensor]:
    """Re-raise a worker's :class:`ImageError` with its own message (DataLoader prepends the worker's traceback)."""
    try:
        yield from batches
    except ImageError as error:
        text = str(error).strip()
        if "Traceback" in text:
            text = text.splitlines()[-1].split("ImageError: ", 1)[-1]
        raise ImageError(f"cannot decode a dataset image, {text}") from None


@dataclass
class ImageFiles:
    """Image files ``files`` with labels ``int64 (N,)``, decoded to ``uint8 (B, C, S, S)`` batches on demand."""

    files: list[Path]
    labels: Tensor
    classes: tuple[str, ...]
    image_size: int
    channels: int
    num_workers: int = field(default_factory=default_workers)

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, index: Tensor | Sequence[int]) -> ImageFiles:
        index = torch.as_tensor(index, dtype=torch.long)
        return replace(self, files=[self.files[i] for i in index.tolist()], labels=self.labels[index])

    def image(self, i: int) -> Tensor:
        """Image ``i``: ``uint8 (C, S, S)``."""
        return _Decode(self.files, self.channels, self.image_size)[i]

    def iter_batches(self, index_batches: Iterable[Tensor]) -> Iterator[Tensor]:
        """One ``uint8 (B, C, S, S)`` batch per index tensor, in order; decoding runs ``num_workers`` ahead."""
        batches = [torch.as_tensor(idx, dtype=torch.long).tolist() for idx in index_batches]
        if not batches:
            return iter(())
        workers = 0 if len(batches) == 1 else min(self.num_workers, len(batches))  # one batch: nothing to overlap
        loader = DataLoader(
            _Decode(self.files, self.channels, self.image_size),
            batch_sampler=batches,
            num_workers=workers,
            pin_memory=torch.cuda.is_available(),
            prefetch_factor=2 if workers > 0 else None,
            generator=torch.Generator(),  # worker seeds drawn from here, not from (and advancing) the global RNG
        )
        return _clean_errors(iter(loader))

    def fingerprint(self) -> str:
        """Identifies the files (paths, sizes, modification times), the size and channels; no pixel is read."""
        digest = hashlib.sha256(repr((self.image_size, self.channels, self.labels.tolist())).encode())
        for path in self.files:
            stat = path.stat()
            digest.update(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        return digest.hexdigest()


__all__ = ["ImageFiles", "default_workers"]
