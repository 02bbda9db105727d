"""Streamed ImageFolder datasets: the same pixels, checkpoints and reports as the in-memory path."""

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from laya.analysis.evaluate import EvalOptions, evaluate
from laya.data import datasets
from laya.data.datasets import ImageArrays, ImageFiles, batch_indices, load_dataset
from laya.data.features import cached_hidden_states, hidden_states
from laya.data.images import ImageError
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.checkpoint import load_checkpoint
from laya.training.train import train
from tests.conftest import make_image_folder, tiny_config
from tests.training.test_device_pipeline import _numbers


def test_streamed_pixels_equal_the_decoded_arrays(image_folder, monkeypatch):
    memory = load_dataset(str(image_folder), "train", 8, stream=False)
    streamed = load_dataset(str(image_folder), "train", 8, stream=True)
    assert isinstance(memory, ImageArrays) and isinstance(streamed, ImageFiles)
    assert len(streamed) == len(memory) == 72 and streamed.labels.equal(memory.labels)
    assert (streamed.channels, streamed.image_size, streamed.classes) == (3, 8, memory.classes)
    batches = batch_indices(len(streamed), 10)
    assert [len(b) for b in batches] == [10] * 7 + [2]
    assert torch.cat(list(streamed.iter_batches(batches))).equal(memory.images)
    picked = torch.tensor([70, 3, 41])
    assert next(streamed.subset(picked).iter_batches([torch.arange(3)])).equal(memory.images[picked])
    assert streamed.image(41).equal(memory.image(41))
    assert streamed.fingerprint() == load_dataset(str(image_folder), "train", 8, stream=True).fingerprint()
    assert streamed.fingerprint() != load_dataset(str(image_folder), "train", 16, stream=True).fingerprint()
    monkeypatch.setattr(datasets, "STREAM_THRESHOLD_BYTES", 72 * 3 * 8 * 8 - 1)  # one byte under the decoded size
    assert isinstance(load_dataset(str(image_folder), "train", 8), ImageFiles)
    assert isinstance(load_dataset(str(image_folder), "test", 8), ImageArrays)  # 24 images fit


def test_a_broken_file_names_itself(tmp_path):
    root = make_image_folder(tmp_path / "broken", train=2, test=2)
    (root / "test" / "red" / "zz.png").write_bytes(b"not an image")
    streamed = load_dataset(str(root), "test", 8, stream=True)
    with pytest.raises(ImageError, match="zz.png"):
        list(streamed.iter_batches(batch_indices(len(streamed), 4)))


def test_feature_cache_is_memory_mapped_and_matches(image_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("LAYA_CACHE", str(tmp_path / "cache"))  # its own cache: another run's features sort among these
    torch.manual_seed(0)
    backbone = build_backbone(BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=16))
    ck_spec = datasets.InputSpec(channels=3, source_size=8, size=16, mean=(0.5,) * 3, std=(0.25,) * 3)
    preprocess = datasets.Preprocess(ck_spec)
    streamed = load_dataset(str(image_folder), "test", 8, stream=True)
    cached = cached_hidden_states(backbone, preprocess, streamed, batch_size=5)
    direct = hidden_states(backbone, preprocess, load_dataset(str(image_folder), "test", 8, stream=False).images)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(cached, direct))
    files = sorted((datasets.cache_dir() / "features").glob("*/layer_*.npy"))
    assert [np.load(f, mmap_mode="r").shape for f in files] == [tuple(c.shape) for c in cached]
    again = cached_hidden_states(backbone, preprocess, streamed, batch_size=7)  # read back, not recomputed
    assert all(a.equal(b) for a, b in zip(cached, again))


@pytest.mark.parametrize("frozen", [False, True])
def test_streamed_training_and_evaluation_equal_the_in_memory_ones(image_folder, tmp_path, frozen):
    overrides = {"max_epochs": 2, "augment": "flip_crop"}
    if frozen:
        torch.manual_seed(0)
        source = build_backbone(BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=16))
        save_file({k: v.contiguous() for k, v in source.model.state_dict().items()}, str(tmp_path / "w.safetensors"))
        overrides["backbone"] = BackboneConfig(
            name="timm", model="test_resnet", input_size=16, weights=str(tmp_path / "w.safetensors"), freeze=True
        )
    memory = train(tiny_config(image_folder, tmp_path / "memory", stream=False, **overrides))
    streamed = train(tiny_config(image_folder, tmp_path / "streamed", stream=True, **overrides))
    a, b = load_file(str(memory / "model.safetensors")), load_file(str(streamed / "model.safetensors"))
    assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)
    options = EvalOptions(ig_steps=4, batch_size=10)
    ck = load_checkpoint(memory)
    in_memory = evaluate(ck, load_dataset(str(image_folder), "test", 8, stream=False), options)
    from_files = evaluate(ck, load_dataset(str(image_folder), "test", 8, stream=True), options)
    assert _numbers(in_memory) == _numbers(from_files)
