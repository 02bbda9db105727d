"""The test-set browser's sample: seeded class-balanced indices, per-input arrays equal to the evaluation's,
thumbnails that are the inputs, a safe file format, example images of correct and wrong inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.sample import (
    SAMPLE_FILE,
    SAMPLE_IMAGES,
    Sample,
    sample_indices,
    write_examples,
    write_sample,
)
from laya.model.checkpoint import load_checkpoint


def test_sample_indices_are_seeded_balanced_and_complete_when_small() -> None:
    labels = torch.tensor([0] * 500 + [1] * 300 + [2] * 40)  # class 2 cannot fill its share
    picked = sample_indices(labels, size=300, seed=3)
    assert len(picked) == 300 and len(set(picked.tolist())) == 300 and (picked.diff() > 0).all()
    counts = torch.bincount(labels[picked]).tolist()
    assert counts[2] == 40 and counts[0] + counts[1] == 260 and abs(counts[0] - counts[1]) <= 1
    assert torch.equal(picked, sample_indices(labels, size=300, seed=3))
    assert not torch.equal(picked, sample_indices(labels, size=300, seed=4))
    assert torch.equal(sample_indices(labels[:50], size=300), torch.arange(50))  # fewer inputs: all of them


@pytest.fixture(scope="module")
def sampled(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sampled")
    shutil.copytree(tiny_models / "colours-mlp", folder / "colours-mlp")
    return folder / "colours-mlp"


@pytest.mark.parametrize("head", ["laya", "concat"])
def test_bundle_writes_a_sample_equal_to_the_report(sampled: Path, image_folder: Path, head: str) -> None:
    """The bundled sample (every test input of the tiny set) has the report's predictions, confusion matrix,
    LOO means and class profiles; its thumbnails are the test images; one sprite serves all heads."""
    directory = sampled / head
    sample = Sample.load(directory)
    report = json.loads((directory / "report.json").read_text())
    checkpoint = load_checkpoint(directory)
    test = checkpoint.load_data("test")
    table = sample.table
    assert len(table) == len(test) == report["dataset"]["n"]
    assert (table["label"].to_numpy() == test.labels.numpy()).all()
    C = len(report["classes"])
    confusion = np.bincount(table["label"] * C + table["prediction"], minlength=C * C).reshape(C, C)
    assert confusion.tolist() == report["confusion_matrix"]
    mode = report["headline"]["mode"]
    L = len(report["layer_names"])
    drops = table[[f"drop/{i}" for i in range(L)]].to_numpy(dtype=float)
    assert drops.mean(0) == pytest.approx(report["loo"][mode]["mean_drop"], abs=1e-5)
    scores = table[[f"score/{i}" for i in range(L)]].to_numpy(dtype=float)
    profile = [r for r in report["profiles"]["class_layer"] if r["subset"] == "all"]
    for record in profile:
        c, i = report["classes"].index(record["class"]), report["layer_names"].index(record["layer"])
        assert scores[table["label"] == c, i].mean() == pytest.approx(record["mean"], abs=1e-5)
    for row in (0, len(table) - 1):
        assert (sample.thumbnail(row) == test.image(int(table.at[row, "index"])).permute(1, 2, 0).numpy()).all()
    assert (sampled / SAMPLE_IMAGES).is_file() and not (directory / SAMPLE_IMAGES).exists()
    assert table["confidence"].between(1 / C, 1).all()


def test_sample_with_depth_fit_has_depth_and_ood_scores(sampled: Path) -> None:
    from laya.analysis.depth.report import DepthOptions, run_depth

    directory = sampled / "concat"
    run_depth(directory, DepthOptions(limit=12, train_limit=30, resamples=20, random_orders=2))
    checkpoint = load_checkpoint(directory)
    write_sample(checkpoint, checkpoint.load_data("test"), images_dir=sampled)
    sample = Sample.load(directory)
    L = len(sample.layer_names)
    assert sample.meta["depth_fit"] and sample.table["depth"].between(1, L + 1).all()
    assert {"detection/msp", "detection/mahalanobis", "detection/prediction_depth"} <= set(sample.table.columns)
    assert (sample.table["detection/prediction_depth"] == sample.table["depth"]).all()


def test_sample_file_is_safetensors_and_damage_is_a_clear_error(sampled: Path, tmp_path: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(sampled / "laya" / SAMPLE_FILE), "pt") as handle:  # no pickle anywhere
        assert json.loads(handle.metadata()["laya"])["format"] == "laya-sample"
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / SAMPLE_FILE).write_bytes(b"not safetensors")
    with pytest.raises(ValueError, match="^sample.safetensors is not a valid safetensors file"):
        Sample.load(bad)
    assert Sample.load(tmp_path) is None
    moved = tmp_path / "moved"
    shutil.copytree(sampled / "laya", moved)  # without the setting's sprite: arrays yes, thumbnails no
    assert Sample.load(moved).sprite is None


def test_examples_are_correct_and_wrong_inputs_per_class(sampled: Path, tmp_path: Path) -> None:
    sample = Sample.load(sampled / "laya")
    paths = write_examples(sample, tmp_path / "examples", per_class=1)
    names = [p.name for p in paths]
    table = sample.table
    for c, name in enumerate(sample.classes):
        of_class = table[table["label"] == c]
        assert sum(n.startswith(f"{c:02d}-{name}-correct") for n in names) == min(1, int(of_class["correct"].sum()))
        assert sum(n.startswith(f"{c:02d}-{name}-wrong") for n in names) == min(1, int((~of_class["correct"]).sum()))


def test_evaluate_cli_writes_sample_and_examples_for_an_own_checkpoint(tiny_models: Path, tmp_path: Path) -> None:
    """An own checkpoint (no examples anywhere): ``evaluate`` writes the sample, its sprite and examples."""
    from laya.cli import main

    own = tmp_path / "own"
    shutil.copytree(tiny_models / "colours-mlp" / "lastlayer", own)
    for name in (SAMPLE_FILE, "report.json"):
        (own / name).unlink()
    assert main(["evaluate", "--checkpoint", str(own), "--resamples", "20", "--ig-steps", "2", "--sample", "10"]) == 0
    sample = Sample.load(own)
    assert len(sample.table) == 10 and sample.sprite is not None and (own / SAMPLE_IMAGES).is_file()
    assert np.bincount(sample.table["label"]).tolist() in ([4, 3, 3], [3, 4, 3], [3, 3, 4])
    assert sorted((own / "examples").glob("*-correct-*.png"))


def test_evaluate_arrays_equal_sample_arrays_on_the_same_inputs(tiny_models: Path) -> None:
    """The sample's predictions equal the evaluation's on the same inputs (one head, two code paths)."""
    checkpoint = load_checkpoint(tiny_models / "colours-mlp" / "scalarmix")
    test = checkpoint.load_data("test")
    per_input: dict = {}
    evaluate(checkpoint, test, EvalOptions(ig_steps=2, resamples=10), per_input=per_input)
    sample = Sample.load(tiny_models / "colours-mlp" / "scalarmix")
    assert (sample.table["correct"].to_numpy() == per_input["correct"].numpy().astype(bool)).all()


def test_thumbnails_linked_outside_the_setting_are_not_read(tmp_path: Path) -> None:
    """The bundled own head's sample and its setting's sprite: read where both are in the setting folder; a sprite
    that links outside it (even the very file) or is missing leaves the sample without thumbnails, not an error."""
    bundled = Path(__file__).resolve().parents[2] / "models" / "cifar10-resnet18-half"
    own = tmp_path / "setting" / "own"
    own.mkdir(parents=True)
    shutil.copy(bundled / "own" / SAMPLE_FILE, own / SAMPLE_FILE)
    shutil.copy(bundled / SAMPLE_IMAGES, own.parent / SAMPLE_IMAGES)
    sample = Sample.load(own)
    assert sample.sprite is not None and sample.thumbnail(0).shape == (32, 32, 3)
    (tmp_path / "outside").mkdir()
    shutil.move(own.parent / SAMPLE_IMAGES, tmp_path / "outside" / SAMPLE_IMAGES)
    (own.parent / SAMPLE_IMAGES).symlink_to(tmp_path / "outside" / SAMPLE_IMAGES)
    assert Sample.load(own).sprite is None
    (own.parent / SAMPLE_IMAGES).unlink()
    assert Sample.load(own).sprite is None and len(Sample.load(own).table) == len(sample.table)


@pytest.mark.parametrize("field, value", [("n_train", [1, 2]), ("n_train", -1), ("covariance", 7)])
def test_a_detection_field_of_another_kind_is_refused_naming_it(sampled: Path, tmp_path: Path, field, value) -> None:
    """The fuzzer's case: ``n_train`` as a list reached ``mahalanobis_trusted`` (a TypeError on Browse)."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    source = sampled / "laya" / SAMPLE_FILE
    with safe_open(str(source), "pt") as handle:
        meta = json.loads(handle.metadata()["laya"])
    (tmp_path / "s").mkdir()
    save_file(load_file(str(source)), str(tmp_path / "s" / SAMPLE_FILE),
              metadata={"laya": json.dumps(meta | {field: value})})
    with pytest.raises(ValueError, match=f"{field}.*must be null or"):
        Sample.load(tmp_path / "s")
