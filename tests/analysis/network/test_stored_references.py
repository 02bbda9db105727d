"""The unit profile's reference inputs stored beside the own head: the dashboard's draw, read without a dataset, and
read as untrusted input."""

import dataclasses
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from laya.analysis.network import explain
from laya.analysis.network.explain import EXAMPLES, TRAINING, references_for
from laya.analysis.network.interventions import REFERENCES, RESAMPLES, reference_inputs
from laya.analysis.network.stored_references import REFERENCES_FILE, stored_references, write_references
from laya.data.datasets import DatasetNotFoundError, ImageArrays
from laya.model.attached_files import AttachedFileError
from laya.model.checkpoint import Checkpoint
from tests.model.backbones.test_calls import SIZE, own_checkpoint


def _train(n_per_class: int = 30, classes: int = 10) -> ImageArrays:
    generator = torch.Generator().manual_seed(3)
    labels = torch.arange(classes).repeat_interleave(n_per_class)
    images = torch.randint(0, 256, (len(labels), 3, SIZE, SIZE), dtype=torch.uint8, generator=generator)
    return ImageArrays(images, labels, tuple(f"c{i}" for i in range(classes)))


def _stored(tmp_path: Path) -> tuple[Checkpoint, ImageArrays]:
    """An in-memory own checkpoint placed at ``setting/own`` with the references of ``_train()`` stored there."""
    folder = tmp_path / "setting" / "own"
    folder.mkdir(parents=True)
    train = _train()
    write_references(folder, train)
    return dataclasses.replace(own_checkpoint("torchvision"), path=folder), train


def _no_dataset(checkpoint: Checkpoint, monkeypatch: pytest.MonkeyPatch, error: Exception | None = None) -> None:
    """Reading a split fails the test (``error`` None) or raises ``error`` (the split is not on this machine)."""

    def refuse(*_args, **_kwargs):
        raise error or AssertionError("a dataset split was read")

    monkeypatch.setattr(Checkpoint, "load_data", refuse)
    explain._DRAWN.pop(checkpoint.model, None)


def test_the_stored_draws_are_the_dashboards_and_no_split_is_read(tmp_path: Path, monkeypatch) -> None:
    """Each intervention's stored references equal the draw from the training split the dashboard made before
    (seeded, class-balanced: K for resample and skip, R for mean), and opening a checkpoint reads no split."""
    checkpoint, train = _stored(tmp_path)
    _no_dataset(checkpoint, monkeypatch)
    for method, size in (("resample", RESAMPLES), ("skip", RESAMPLES), ("mean", REFERENCES)):
        drawn, source = references_for(checkpoint, method)
        assert source == TRAINING and drawn.dtype == torch.uint8
        assert drawn.shape == (size, 3, SIZE, SIZE) and torch.equal(drawn, reference_inputs(train, size, 0))


def _rewrite(path: Path, tensors: dict) -> None:
    path.unlink()
    save_file(tensors, str(path))


@pytest.mark.parametrize("case", ["shape", "dtype", "missing draw", "extra tensor", "not safetensors", "link out",
                                  "folder"])  # fmt: skip
def test_a_broken_file_is_named_and_the_profile_still_gets_references(case: str, tmp_path: Path, monkeypatch) -> None:
    """A stored file that is not the two uint8 draws of this input (or links outside the setting) is refused before
    a tensor is read, naming the file; the profile then takes the examples (no split here), saying so."""
    checkpoint, _ = _stored(tmp_path)
    path = checkpoint.path / REFERENCES_FILE
    good = {"resample": torch.zeros(RESAMPLES, 3, SIZE, SIZE, dtype=torch.uint8),
            "mean": torch.zeros(REFERENCES, 3, SIZE, SIZE, dtype=torch.uint8)}  # fmt: skip
    if case == "shape":
        _rewrite(path, {**good, "mean": torch.zeros(REFERENCES, 3, SIZE + 1, SIZE + 1, dtype=torch.uint8)})
    elif case == "dtype":
        _rewrite(path, {**good, "resample": good["resample"].float()})
    elif case == "missing draw":
        _rewrite(path, {"resample": good["resample"]})
    elif case == "extra tensor":
        _rewrite(path, {**good, "x": torch.zeros(1)})
    elif case == "not safetensors":
        path.write_bytes(b"\xff" * 64)
    elif case == "link out":
        outside = tmp_path / "elsewhere.safetensors"
        path.rename(outside)
        os.symlink(outside, path)
    else:
        path.unlink()
        path.mkdir()
    with pytest.raises(AttachedFileError, match=REFERENCES_FILE) as raised:
        stored_references(checkpoint.path, "resample", checkpoint.meta.input)
    assert str(tmp_path) not in str(raised.value)  # named, never by its server path
    _no_dataset(checkpoint, monkeypatch, DatasetNotFoundError("not on this machine"))
    monkeypatch.setattr(explain, "load_image_tensor", lambda *_a: torch.zeros(3, SIZE, SIZE, dtype=torch.uint8))
    drawn, source = references_for(checkpoint, "resample", [b"png"] * 2)
    assert drawn.shape == (2, 3, SIZE, SIZE) and source.startswith(EXAMPLES) and REFERENCES_FILE in source


def test_without_a_stored_file_the_split_is_drawn_as_before(tmp_path: Path, monkeypatch) -> None:
    checkpoint, train = _stored(tmp_path)
    (checkpoint.path / REFERENCES_FILE).unlink()
    explain._DRAWN.pop(checkpoint.model, None)
    monkeypatch.setattr(Checkpoint, "load_data", lambda self, split="test", *a, **k: train)
    drawn, source = references_for(checkpoint, "mean")
    assert source == TRAINING and torch.equal(drawn, reference_inputs(train, REFERENCES, 0))
