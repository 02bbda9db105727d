import gzip
import math
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

import laya.data.datasets as data_module
from laya.data.datasets import (
    DatasetNotFoundError,
    ImageArrays,
    InputSpec,
    Preprocess,
    channel_stats,
    load_dataset,
    split_indices,
)


def write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">I", n) for n in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def fake_fashion_mnist(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "fashion-mnist"
    root.mkdir()
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 20), ("t10k", 7)):
        write_idx(root / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 255, (n, 28, 28)))
        write_idx(root / f"{prefix}-labels-idx1-ubyte.gz", np.arange(n) % 10)
    monkeypatch.setenv("LAYA_DATA", str(tmp_path))
    return root


def test_fashion_mnist_from_idx_files(fake_fashion_mnist):
    train = load_dataset("fashion-mnist", "train")
    test = load_dataset("fashion-mnist", "test")
    assert train.images.shape == (20, 1, 28, 28) and train.images.dtype == torch.uint8
    assert test.labels.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert train.classes[0] == "T-shirt/top" and len(train.classes) == 10


def test_truncated_idx_file_is_an_error(fake_fashion_mnist):
    path = fake_fashion_mnist / "t10k-images-idx3-ubyte.gz"
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw[:100]))
    with pytest.raises(ValueError, match="truncated"):
        load_dataset("fashion-mnist", "test")


def test_missing_fashion_mnist_says_where_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setattr(data_module, "data_dirs", lambda: [tmp_path])

    class Offline:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("no internet")

    import torchvision

    monkeypatch.setattr(torchvision.datasets, "FashionMNIST", Offline)
    with pytest.raises(DatasetNotFoundError, match="apt-get install dataset-fashion-mnist"):
        load_dataset("fashion-mnist", "train")


def test_image_folder_loads_sorted_classes_and_caches(image_folder: Path):
    first = load_dataset(str(image_folder), "train", image_size=8)
    assert first.classes == ("blue", "green", "red")
    assert first.images.shape == (72, 3, 8, 8)
    assert torch.bincount(first.labels).tolist() == [24, 24, 24]
    cached = list((data_module.cache_dir() / "arrays").glob("*-train-*.npy"))
    assert cached
    again = load_dataset(str(image_folder), "train", image_size=8)
    assert torch.equal(first.images, again.images)
    resized = load_dataset(str(image_folder), "train", image_size=4)
    assert resized.images.shape == (72, 3, 4, 4)


def test_unknown_dataset_and_missing_split(tmp_path: Path):
    with pytest.raises(DatasetNotFoundError, match="unknown dataset"):
        load_dataset("imagenet-21k", "train")
    (tmp_path / "train" / "a").mkdir(parents=True)
    with pytest.raises(DatasetNotFoundError, match="test does not exist"):
        load_dataset(str(tmp_path), "test")
    with pytest.raises(DatasetNotFoundError, match="no images"):
        load_dataset(str(tmp_path), "train")
    with pytest.raises(ValueError, match="split must be"):
        load_dataset(str(tmp_path), "validation")


def test_split_is_deterministic_disjoint_and_complete():
    train, val = split_indices(1000, 0.1, seed=0)
    assert len(val) == 100 and len(train) == 900
    assert set(train.tolist()).isdisjoint(val.tolist())
    assert sorted(train.tolist() + val.tolist()) == list(range(1000))
    _again_train, again_val = split_indices(1000, 0.1, seed=0)
    assert torch.equal(val, again_val)
    assert not torch.equal(val, split_indices(1000, 0.1, seed=1)[1])


def test_preprocess_normalises_and_resizes():
    spec = InputSpec(channels=1, source_size=2, size=4, mean=(0.5,), std=(0.5,))
    images = torch.tensor([[[[0, 255], [255, 0]]]], dtype=torch.uint8)
    x = Preprocess(spec)(images)
    assert x.shape == (1, 1, 4, 4)
    assert float(x.max()) <= 1.0 and float(x.min()) >= -1.0
    same = Preprocess(InputSpec(channels=1, source_size=2, size=2, mean=(0.5,), std=(0.5,)))(images)
    assert torch.equal(same, torch.tensor([[[[-1.0, 1.0], [1.0, -1.0]]]]))
    with pytest.raises(ValueError, match="expected images of shape"):
        Preprocess(spec)(torch.zeros(1, 3, 2, 2, dtype=torch.uint8))


def test_channel_stats():
    images = torch.zeros(2, 2, 2, 2, dtype=torch.uint8)
    images[:, 1] = 255
    images[0, 0] = 255
    mean, std = channel_stats(ImageArrays(images, torch.zeros(2, dtype=torch.long), ("a",)), batch_size=1)
    assert mean == pytest.approx((0.5, 1.0))
    assert std == pytest.approx((math.sqrt(2 / 7), 0.0))  # 4 of 8 values are 1: sample variance 8 * 0.25 / 7
    noise = torch.randint(0, 256, (5, 3, 4, 4), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    mean, std = channel_stats(ImageArrays(noise, torch.zeros(5, dtype=torch.long), ("a",)), batch_size=2)
    x = noise.double() / 255
    assert mean == pytest.approx(x.mean((0, 2, 3)).tolist()) and std == pytest.approx(x.std((0, 2, 3)).tolist())


def test_input_spec_validation():
    with pytest.raises(ValueError, match="mean/std must have 3 entries"):
        InputSpec.from_dict({"channels": 3, "source_size": 8, "size": 8, "mean": [0.5], "std": [0.5]})


def test_no_download_is_attempted_without_permission(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 17, hole 6: with LAYA_DOWNLOAD=0, or for an untrusted (confined) checkpoint, a missing
    Fashion-MNIST/CIFAR-10 is a message saying where to get it, and nothing touches the network."""
    import socket

    from laya.data import datasets
    from laya.data.datasets import DatasetNotFoundError, load_dataset

    def no_network(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(datasets, "data_dirs", lambda: [tmp_path])
    monkeypatch.setenv("LAYA_DOWNLOAD", "0")
    for name, where in (("cifar10", "cifar10-jpeg"), ("fashion-mnist", "apt-get install dataset-fashion-mnist")):
        with pytest.raises(DatasetNotFoundError, match="does not download datasets") as refused:
            load_dataset(name, "test")
        assert where in str(refused.value) and str(tmp_path) not in str(refused.value)
    monkeypatch.setenv("LAYA_DOWNLOAD", "1")
    with pytest.raises(DatasetNotFoundError, match="does not download"):
        load_dataset("cifar10", "test", download=False)  # what a confined checkpoint's load_data passes
