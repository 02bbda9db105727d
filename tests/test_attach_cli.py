"""``laya attach`` on the command line: the summary it prints and the errors a user can fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from laya.cli import main
from tests.model.test_own_head import _save


def test_attach_prints_the_one_screen_summary(tmp_path: Path, image_folder: Path, capsys) -> None:
    import timm

    torch.manual_seed(0)
    weights = _save(timm.create_model("resnet10t", num_classes=3), tmp_path / "mine.pth")
    argv = ["--threads", "1", "attach", "--family", "timm", "--model", "resnet10t", "--weights", weights,
            "--dataset", str(image_folder), "--image-size", "32", "--out", str(tmp_path / "out"), "--setting", "mine",
            "--max-epochs", "1", "--resamples", "50", "--ig-steps", "4", "--train-limit", "48", "--random-orders", "1",
            "--timing-batch", "4", "--timing-repeats", "1"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "own head (the network as it is)" in out and "LAYA attends to" in out
    assert f"laya dashboard --models {tmp_path / 'out'}" in out
    written = {p.name for p in (tmp_path / "out" / "mine").iterdir()}
    assert written >= {"own", "laya", "scalarmix", "concat", "backbone.safetensors", "examples", "summary.md"}


def test_attach_refuses_weights_of_another_architecture(tmp_path: Path, image_folder: Path, capsys) -> None:
    import timm

    weights = _save(timm.create_model("resnet10t", num_classes=3), tmp_path / "mine.safetensors")
    argv = ["attach", "--family", "timm", "--model", "resnet18", "--weights", weights, "--dataset", str(image_folder),
            "--image-size", "32", "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    assert "cannot map them" in capsys.readouterr().err  # the file is not this architecture's


@pytest.mark.parametrize("flag, value", [("--model-kwargs", "[1]"), ("--mean", "a,b")])
def test_bad_flags_are_refused_by_the_parser(flag: str, value: str) -> None:
    with pytest.raises(SystemExit):
        main(["attach", "--family", "timm", "--model", "m", "--weights", "w", "--dataset", "d", flag, value])
