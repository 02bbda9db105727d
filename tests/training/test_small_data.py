"""Small-data warnings (laya.training.small_data): the checks, their remedies, and that training prints them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from laya.cli import main
from laya.training.small_data import (
    RECIPE,
    SmallDataWarning,
    chance_accuracy,
    data_warnings,
    stopping_warning,
)
from laya.training.train import train
from tests.conftest import tiny_config


def test_data_warnings_name_the_numbers_and_the_remedy() -> None:
    labels = torch.tensor([0] * 300 + [1] * 15 + [2] * 300)
    everything = torch.arange(len(labels))
    small_val, few_class = data_warnings(labels, everything[:-50], everything[-50:], ["a", "b", "c"])
    assert "50 images (< 100)" in small_val and "--val-fraction" in small_val and RECIPE in small_val
    assert "b (15)" in few_class and "a (" not in few_class
    assert data_warnings(labels[labels != 1], torch.arange(400), torch.arange(400, 585), ["a", "b", "c"]) == [
        "1 class(es) have fewer than 20 training images: b (0); collect more, use --augment flip_crop, or train on "
        "a frozen pretrained backbone (--freeze) — see `train --help`"
    ]
    assert data_warnings(labels, everything, everything[:200], ["a", "b", "c"])[0].startswith("1 class(es)")


def test_stopping_at_or_below_chance_is_flagged() -> None:
    val = torch.tensor([0, 0, 0, 1, 2, 2])  # majority class: 3 of 6
    assert chance_accuracy(val, 3) == 0.5
    message = stopping_warning(0.5, val, 3, epochs=6)
    assert message is not None and "0.500" in message and RECIPE in message and "6 epochs" in message
    assert stopping_warning(0.34, val, 3, 2) is not None
    assert stopping_warning(0.67, val, 3, 2) is None


def test_training_on_tiny_data_warns(image_folder: Path, tmp_path: Path) -> None:
    """3 classes x 24 images, 25 % validation: 18 validation images and < 20 training images per class."""
    with pytest.warns(SmallDataWarning) as caught:
        train(tiny_config(image_folder, tmp_path / "run", max_epochs=1))
    messages = [str(w.message) for w in caught]
    assert any("the validation split has 18 images" in m for m in messages)
    assert any("have fewer than 20 training images" in m for m in messages)


def test_training_that_learns_nothing_warns(
    image_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validation accuracy stuck at 1/3 on a balanced 3-class split (chance): the run ends with the warning."""
    import laya.training.train as training

    monkeypatch.setattr(training, "_accuracy", lambda *args: 1 / 3)
    with pytest.warns(SmallDataWarning, match=r"after 2 epochs at validation accuracy 0.333, at or below chance"):
        train(tiny_config(image_folder, tmp_path / "run", max_epochs=2))


def test_cli_prints_warnings_and_help_shows_the_recipe(
    image_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert RECIPE in capsys.readouterr().out
    code = main(["train", "--dataset", str(image_folder), "--backbone", "mlp", "--widths", "8,8", "--head", "laya",
                 "--image-size", "8", "--max-epochs", "1", "--val-fraction", "0.25", "--out", str(tmp_path / "r")])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "warning: the validation split has 18 images" in err
