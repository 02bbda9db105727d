"""The checkpoints shipped in models/: they load, reproduce the outputs recorded when they were
bundled, and (where the dataset is on this machine) reproduce their report's test accuracy."""

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from laya.analysis.head.explain import explain
from laya.analysis.report import Report
from laya.analysis.sample import sample_indices
from laya.app.catalog import example_images
from laya.data.datasets import DatasetNotFoundError
from laya.data.features import cached_hidden_states, hidden_states
from laya.data.images import load_image_tensor
from laya.model.checkpoint import load_checkpoint
from laya.training.bundle import EXPECTED_FILE
from scripts.bundled_predictions import FILE as PREDICTIONS

MODELS = Path(__file__).resolve().parents[2] / "models"
BUNDLED = sorted(p.parent for p in MODELS.glob("*/*/model.json"))
ids = [f"{p.parent.name}/{p.name}" for p in BUNDLED]
CHECKED = 500  # test inputs whose class is recomputed per head


def test_models_folder_is_populated():
    assert len(BUNDLED) >= 16, f"expected 4 settings x 4 heads under {MODELS}, found {ids}"


@pytest.mark.parametrize("path", BUNDLED, ids=ids)
def test_bundled_checkpoint_reproduces_recorded_outputs(path: Path):
    ck = load_checkpoint(path)
    expected = json.loads((path / EXPECTED_FILE).read_text())
    examples = example_images(path)
    assert sorted(expected) == sorted(p.name for p in examples) and len(examples) >= 3
    for example in examples:
        e = explain(ck, load_image_tensor(example, ck.meta.input.channels, ck.meta.input.source_size))
        record = expected[example.name]
        assert e.label == record["prediction"], example.name
        assert torch.allclose(e.probs, torch.tensor(record["probabilities"]), atol=1e-5), example.name
        assert torch.allclose(e.drops, torch.tensor(record["loo_drops"], dtype=torch.float64), atol=1e-5)
        if record["layer_scores"] is not None:
            assert torch.allclose(e.scores[e.intrinsic], torch.tensor(record["layer_scores"]), atol=1e-5)


@pytest.mark.data
@pytest.mark.parametrize("path", BUNDLED, ids=ids)
def test_bundled_report_accuracy_reproduces_on_the_test_split(path: Path):
    """The report's accuracy is over the whole test split: it is read back from the head's class for every input of
    the split, stored beside it (``scripts/bundled_predictions.py``), and the model gives those classes on a seeded
    class-balanced sample of :data:`CHECKED` inputs (where its two best logits are apart by more than float noise),
    so a changed model or a report of other predictions fails without a pass over the whole split per head."""
    ck = load_checkpoint(path)
    try:
        test = ck.load_data("test")
    except DatasetNotFoundError as error:
        pytest.skip(f"dataset not on this machine: {error}")
    stored = load_file(str(path / PREDICTIONS))["prediction"].long()
    report = Report.load(path)
    assert report.data["dataset"]["n"] == len(test) == len(stored)
    assert (stored == test.labels).double().mean().item() == pytest.approx(report.accuracy, abs=3e-4)
    index = sample_indices(test.labels, CHECKED, seed=0)
    extract = cached_hidden_states if ck.meta.backbone.freeze else hidden_states  # frozen: once per setting
    with torch.inference_mode():
        logits = ck.model.head(extract(ck.model.backbone, ck.preprocess, test.images[index], 500)).logits
    top = logits.double().topk(2, dim=-1).values
    clear = top[:, 0] - top[:, 1] > 1e-4  # a near-tie may flip with the batch's composition
    assert clear.sum() >= 0.95 * len(index)
    assert torch.equal(logits.argmax(-1)[clear], stored[index][clear])


@pytest.mark.parametrize("path", BUNDLED, ids=ids)
def test_bundled_depth_uses_class_balanced_ood_sets(path: Path):
    """The depth docs say every row is current: energy is scored and the other-dataset OOD set is balanced."""
    detection = json.loads((path / "depth.json").read_text())["detection"]
    assert "energy" in {row["score"] for row in detection["table"]}
    (other,) = [d for name, d in detection["ood_descriptions"].items() if "noise" not in name]
    assert "class-balanced random sample" in other
    counts = [int(n) for n in re.findall(r" (\d+)(?:,|$)", other.split(":", 1)[1])]
    assert len(counts) == 10 and len(set(counts)) == 1 and sum(counts) == int(other.split()[0])
