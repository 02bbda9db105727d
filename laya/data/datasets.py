"""Datasets as in-memory ``uint8`` arrays or streamed image files, the train/validation split, and preprocessing.

Datasets (``load_dataset(name, split)``):

* ``fashion-mnist`` — IDX files from ``$LAYA_DATA`` (or ``$LAYA_DATA/fashion-mnist``), then
  ``/usr/share/datasets/fashion-mnist`` (Debian: ``apt-get install dataset-fashion-mnist``),
  else a torchvision download (needs internet).
* ``cifar10`` — an ImageFolder copy (``cifar10-jpeg/{train,test}/<class>/*.jpg``) in ``$LAYA_DATA``
  or extracted from a ``cifar10-jpeg.tar.gz`` found in ``$LAYA_DATA`` or ``../shared/data``;
  else torchvision's format in ``$LAYA_DATA/cifar-10-batches-py``; else a torchvision download.
* any other name is a directory in ImageFolder layout, ``DIR/{train,test}/<class>/<image>``.

Decoded arrays are cached as ``.npy`` under ``$LAYA_CACHE`` (default ``~/.cache/laya``). An ImageFolder
whose decoded split would exceed ``STREAM_THRESHOLD_BYTES`` (or any ImageFolder with ``stream=True``) is
not decoded up front: it loads as :class:`~laya.data.streaming.ImageFiles`, decoded batch by batch.
Both kinds offer ``labels``, ``classes``, ``channels``, ``image_size``, ``subset``, ``image``,
``iter_batches`` and ``fingerprint``; code that takes a dataset uses only these.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import tarfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from laya import settings
from laya.data.streaming import ImageFiles
from laya.model.validation import check_fields
from laya.paths import PathRefused, canonical_path

LOG = logging.getLogger("laya.data")

REPO_ROOT = Path(__file__).resolve().parents[2]
FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)  # fmt: skip
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif")
STREAM_THRESHOLD_BYTES = 2 * 2**30  # ImageFolder splits larger than this once decoded are streamed


class DatasetNotFoundError(FileNotFoundError):
    """A dataset is not on this machine; the message says where to get it."""


@dataclass
class ImageArrays:
    """A labelled image set: ``images`` ``uint8 (N, C, H, W)``, ``labels`` ``int64 (N,)``."""

    images: Tensor
    labels: Tensor
    classes: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def channels(self) -> int:
        return self.images.shape[1]

    @property
    def image_size(self) -> int:
        return self.images.shape[-1]

    def subset(self, index: Tensor | Sequence[int]) -> ImageArrays:
        index = torch.as_tensor(index, dtype=torch.long)
        return ImageArrays(self.images[index], self.labels[index], self.classes)

    def image(self, i: int) -> Tensor:
        """Image ``i``: ``uint8 (C, H, W)``."""
        return self.images[i]

    def iter_batches(self, index_batches: Iterable[Tensor]) -> Iterator[Tensor]:
        """One ``uint8 (B, C, H, W)`` batch per index tensor, in order."""
        for index in index_batches:
            yield self.images[torch.as_tensor(index, dtype=torch.long)]

    def fingerprint(self) -> str:
        """sha256 of the shape and every pixel (:func:`pixel_fingerprint`)."""
        return pixel_fingerprint(self.images)


Images = ImageArrays | ImageFiles  # a dataset: decoded in memory, or streamed from files


def pixel_fingerprint(images: Tensor) -> str:
    """sha256 of the shape and every pixel of ``images``: a decoded split's identity."""
    digest = hashlib.sha256(str(tuple(images.shape)).encode())
    digest.update(images.contiguous().numpy().tobytes())
    return digest.hexdigest()


def batch_indices(n: int, batch_size: int) -> list[Tensor]:
    """``[0..B), [B..2B), ...`` up to ``n``: the index tensors of consecutive batches."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    return [torch.arange(start, min(start + batch_size, n)) for start in range(0, n, batch_size)]


@dataclass
class InputSpec:
    """How raw ``uint8`` images become model input; stored in every checkpoint.

    ``source_size``: side of the dataset's images (uploads are centre-cropped and resized to it);
    ``size``: side the backbone receives (bilinear resize of the source); ``mean``/``std``: per channel,
    applied to values in [0, 1].
    """

    channels: int
    source_size: int
    size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "mean": list(self.mean), "std": list(self.std)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputSpec:
        check_fields(cls, data, "input", required=True)
        spec = cls(**{**data, "mean": tuple(data["mean"]), "std": tuple(data["std"])})
        if len(spec.mean) != spec.channels or len(spec.std) != spec.channels or min(spec.std) <= 0:
            raise ValueError(f"input spec mean/std must have {spec.channels} entries and std > 0: {data}")
        return spec


class Preprocess(nn.Module):
    """``uint8 (B, C, S, S)`` -> normalised ``float32 (B, C, size, size)``: ``(x/255 - mean) / std``."""

    def __init__(self, spec: InputSpec) -> None:
        super().__init__()
        self.spec = spec
        self.register_buffer("mean", torch.tensor(spec.mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(spec.std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, images: Tensor) -> Tensor:
        """Images on any device go to the device of this module's buffers (the model's device)."""
        if images.ndim != 4 or images.shape[1] != self.spec.channels:
            raise ValueError(f"expected images of shape (B, {self.spec.channels}, H, W), got {tuple(images.shape)}")
        x = images.to(self.mean.device, non_blocking=True).float() / 255.0
        if x.shape[-1] != self.spec.size or x.shape[-2] != self.spec.size:
            x = F.interpolate(x, size=(self.spec.size, self.spec.size), mode="bilinear", align_corners=False)
        return (x - self.mean) / self.std


def channel_stats(data: Images, batch_size: int = 1024) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and (sample) std of the images scaled to [0, 1], accumulated batch by batch.

    Pixel values are integers, so the float64 sums ``sum x`` and ``sum x^2`` are exact whatever the order.
    """
    total, count = torch.zeros(2, data.channels, dtype=torch.float64), 0
    for batch in data.iter_batches(batch_indices(len(data), batch_size)):
        x = batch.double().transpose(0, 1).reshape(data.channels, -1)  # (C, B*H*W), values 0..255
        total += torch.stack([x.sum(1), (x * x).sum(1)])
        count += x.shape[1]
    mean = total[0] / count
    var = (total[1] - count * mean * mean) / max(count - 1, 1)
    return tuple((mean / 255.0).tolist()), tuple((var.clamp(min=0).sqrt() / 255.0).tolist())


def split_indices(n: int, val_fraction: float = 0.1, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Deterministic train/validation split of ``range(n)``: ``(train_idx, val_idx)``."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_val = max(1, round(n * val_fraction))
    return order[n_val:].sort().values, order[:n_val].sort().values


def cache_dir() -> Path:
    path = settings.path("LAYA_CACHE")
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dirs() -> list[Path]:
    """Where datasets are looked for, in order."""
    return [*settings.paths("LAYA_DATA"), cache_dir() / "data", REPO_ROOT.parent / "shared" / "data",
            Path("/usr/share/datasets")]  # fmt: skip


def dataset_label(name: str) -> str:
    """A short display name: ``fashion-mnist`` stays, an ImageFolder path shortens to its folder name."""
    return Path(name).name if ("/" in name or "\\" in name) else name


def downloads_allowed() -> bool:
    """Whether a missing Fashion-MNIST/CIFAR-10 may be downloaded by torchvision (``LAYA_DOWNLOAD``, default on
    for the CLI; ``0`` in the dashboard and the Docker image, where a missing dataset is a message)."""
    return settings.flag("LAYA_DOWNLOAD")


def load_dataset(
    name: str,
    split: str,
    image_size: int | None = None,
    channels: int | None = None,
    stream: bool | None = None,
    download: bool | None = None,
) -> Images:
    """Load ``split`` ("train" or "test") of the dataset ``name`` as :class:`ImageArrays` or :class:`ImageFiles`.

    ``image_size`` / ``channels`` apply to ImageFolder datasets (default 32 px, RGB). ``stream``: ImageFolder
    datasets (CIFAR-10's JPEG copy included) are streamed if True, decoded into memory if False, and
    streamed when larger than ``STREAM_THRESHOLD_BYTES`` decoded if None.

    Raises:
        DatasetNotFoundError: the dataset is not here and cannot be downloaded; says where to get it.

    ``download``: may torchvision fetch a missing Fashion-MNIST/CIFAR-10 (None: :func:`downloads_allowed`)?
    When not, nothing touches the network.
    """
    download = downloads_allowed() if download is None else download
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if name == "fashion-mnist":
        return _fashion_mnist(split, download)
    if name == "cifar10":
        return _cifar10(split, stream, download)
    try:
        path = canonical_path(name)  # ``~`` is not expanded: the path checked is the path read
    except PathRefused as error:
        raise DatasetNotFoundError(f"dataset {name!r}: {error}") from None
    if path.is_dir():
        return load_image_folder(path, split, image_size or 32, channels or 3, stream)
    raise DatasetNotFoundError(
        f"unknown dataset {name!r}: expected 'fashion-mnist', 'cifar10' or a directory in ImageFolder layout "
        "(DIR/train/<class>/*.jpg, DIR/test/<class>/*.jpg)"
    )


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path} is not an IDX file of unsigned bytes")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise ValueError(f"{path} is truncated: header says {shape}, found {body.size} values")
    return body.reshape(shape)


def _find(candidates: list[Path]) -> Path | None:
    return next((p for p in candidates if p.exists()), None)


def _fashion_mnist(split: str, download: bool) -> ImageArrays:
    prefix = "train" if split == "train" else "t10k"
    dirs = [d / sub for d in data_dirs() for sub in ("fashion-mnist", "FashionMNIST/raw", "")]
    for directory in dirs:
        images = _find([directory / f"{prefix}-images-idx3-ubyte{s}" for s in (".gz", "")])
        labels = _find([directory / f"{prefix}-labels-idx1-ubyte{s}" for s in (".gz", "")])
        if images and labels:
            x, y = _read_idx(images), _read_idx(labels)
            return ImageArrays(
                torch.from_numpy(x.copy()).unsqueeze(1), torch.from_numpy(y.astype(np.int64)), FASHION_MNIST_CLASSES
            )
    return _torchvision_download(
        "FashionMNIST",
        split,
        download,
        "Fashion-MNIST: on Debian/Ubuntu `apt-get install dataset-fashion-mnist` (files go to "
        "/usr/share/datasets/fashion-mnist), or put the four *-ubyte.gz IDX files in $LAYA_DATA",
    )


def _cifar10(split: str, stream: bool | None = None, download: bool = True) -> Images:
    for directory in data_dirs():
        if (directory / "cifar10-jpeg" / split).is_dir():
            return load_image_folder(directory / "cifar10-jpeg", split, 32, 3, stream)
    for directory in data_dirs():
        archive = directory / "cifar10-jpeg.tar.gz"
        if archive.is_file():
            target = cache_dir() / "data"
            target.mkdir(parents=True, exist_ok=True)
            with tarfile.open(archive) as tar:
                tar.extractall(target, filter="data")
            return load_image_folder(target / "cifar10-jpeg", split, 32, 3, stream)
    return _torchvision_download(
        "CIFAR10",
        split,
        download,
        "CIFAR-10: put the JPEG copy (cifar10-jpeg/{train,test}/<class>/*.jpg or cifar10-jpeg.tar.gz) or "
        "torchvision's cifar-10-batches-py in $LAYA_DATA",
    )


def _torchvision_download(cls_name: str, split: str, download: bool, where: str) -> ImageArrays:
    if not download:
        raise DatasetNotFoundError(
            f"the dataset is not on this server, and this server does not download datasets. {where}."
        )
    import torchvision

    root = next((d for d in data_dirs()[:1] if d.is_dir()), cache_dir() / "data")
    try:
        dataset = getattr(torchvision.datasets, cls_name)(str(root), train=split == "train", download=True)
    except Exception as error:
        raise DatasetNotFoundError(f"dataset not found locally and the download failed ({error}). {where}.") from error
    images = torch.as_tensor(np.asarray(dataset.data))
    images = images.unsqueeze(1) if images.ndim == 3 else images.permute(0, 3, 1, 2)
    return ImageArrays(images.contiguous(), torch.as_tensor(dataset.targets, dtype=torch.long), tuple(dataset.classes))


def _usable(path: Path, root: Path) -> bool:
    """Whether an entry named like an image is a regular file inside ``root`` (a symlink is followed only
    while it stays inside: :func:`laya.paths.canonical_path`). Anything else (a directory called ``x.png``,
    a broken link, a link out of the dataset, a FIFO) is skipped with a warning naming it."""
    try:
        real = canonical_path(path, None, [root])
        if real.is_file():
            return True
        why = "not a regular file (a directory, a broken link or a device)"
    except PathRefused as error:
        why = str(error)
    except OSError as error:
        why = f"unreadable ({type(error).__name__})"
    LOG.warning("skipping %s: %s", path, why)
    return False


def load_image_folder(root: Path, split: str, image_size: int, channels: int, stream: bool | None = None) -> Images:
    """``root/split/<class>/<image>`` (sorted, class index = sorted folder order), decoded and cached as ``.npy``,
    or streamed (:class:`ImageFiles`) when ``stream`` is True or, for None, above ``STREAM_THRESHOLD_BYTES``."""
    split_dir = root / split
    if not split_dir.is_dir():
        raise DatasetNotFoundError(
            f"{split_dir} does not exist; an ImageFolder dataset needs {root}/{{train,test}}/<class>/"
        )
    classes = sorted(d.name for d in split_dir.iterdir() if d.is_dir())
    files = [
        (f, c)
        for c, name in enumerate(classes)
        for f in sorted((split_dir / name).iterdir())
        if f.suffix.lower() in IMAGE_SUFFIXES and _usable(f, root)
    ]
    if not files:
        raise DatasetNotFoundError(f"no images ({', '.join(IMAGE_SUFFIXES)}) under {split_dir}/<class>/")
    labels = torch.tensor([c for _, c in files], dtype=torch.long)
    streamed = ImageFiles([f for f, _ in files], labels, tuple(classes), image_size, channels)
    if stream or (stream is None and len(files) * channels * image_size**2 > STREAM_THRESHOLD_BYTES):
        return streamed
    key = hashlib.sha256(
        repr(
            (
                str(root.resolve()),
                split,
                image_size,
                channels,
                len(files),
                [f.stat().st_mtime_ns for f, _ in files[:: max(1, len(files) // 64)]],
            )
        ).encode()
    ).hexdigest()[:16]
    cached = cache_dir() / "arrays" / f"{root.name}-{split}-{key}.npy"
    if cached.is_file():
        return ImageArrays(torch.from_numpy(np.load(cached, allow_pickle=False)), labels, tuple(classes))
    from tqdm.auto import tqdm

    images = torch.empty(len(files), channels, image_size, image_size, dtype=torch.uint8)
    batches = batch_indices(len(files), 256)
    decoded = streamed.iter_batches(batches)  # the streamed path's decoder, on every core
    for index, batch in zip(
        batches, tqdm(decoded, total=len(batches), desc=f"decoding {root.name}/{split}", unit="batch", leave=False)
    ):
        images[index] = batch
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp.npy")
    np.save(tmp, images.numpy(), allow_pickle=False)
    os.replace(tmp, cached)
    return ImageArrays(images, labels, tuple(classes))


__all__ = [
    "STREAM_THRESHOLD_BYTES",
    "DatasetNotFoundError",
    "ImageArrays",
    "ImageFiles",
    "Images",
    "InputSpec",
    "Preprocess",
    "batch_indices",
    "cache_dir",
    "channel_stats",
    "data_dirs",
    "dataset_label",
    "downloads_allowed",
    "load_dataset",
    "load_image_folder",
    "pixel_fingerprint",
    "split_indices",
]
