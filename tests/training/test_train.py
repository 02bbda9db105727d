import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from laya.cli import main
from laya.data.datasets import load_dataset, split_indices
from laya.data.features import hidden_states
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.checkpoint import load_checkpoint
from laya.training.train import STATE_META, flip_crop, train
from tests.conftest import tiny_config

REPO = Path(__file__).resolve().parent.parent


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


def test_end_to_end_training_writes_a_complete_checkpoint(image_folder, tmp_path):
    out = train(tiny_config(image_folder, tmp_path / "run"))
    ck = load_checkpoint(out)
    metrics = ck.meta.metrics
    assert metrics["test_accuracy"] > 0.9  # the colours are easy: a broken loop would sit near 1/3
    assert 1 <= metrics["epochs"] <= 4 and len(metrics["history"]) == metrics["epochs"]
    assert not (out / STATE_META).exists()  # training state removed once finished
    # reference vectors = mean hidden state over the training split
    data = load_dataset(str(image_folder), "train", image_size=8)
    train_idx, _ = split_indices(len(data), 0.25, 0)
    hidden = hidden_states(ck.model.backbone, ck.preprocess, data.images[train_idx])
    for ref, h in zip(ck.model.head.references, hidden):
        assert torch.allclose(ref, h.mean(0), atol=1e-5)
    # normalisation derived from the training images
    assert ck.meta.input.channels == 3 and ck.meta.input.source_size == 8
    assert ck.meta.train["seed"] == 0 and ck.meta.dataset == str(image_folder)


def test_training_is_deterministic_given_a_seed(image_folder, tmp_path):
    a = weights(train(tiny_config(image_folder, tmp_path / "a", max_epochs=2, patience=5)))
    b = weights(train(tiny_config(image_folder, tmp_path / "b", max_epochs=2, patience=5)))
    c = weights(train(tiny_config(image_folder, tmp_path / "c", max_epochs=2, patience=5, seed=1)))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_resume_continues_an_interrupted_run_exactly(image_folder, tmp_path):
    config = tiny_config(image_folder, tmp_path / "interrupted", max_epochs=4, patience=10, augment="flip_crop")

    def crash(epoch, record):
        if epoch == 2:
            raise KeyboardInterrupt  # as if the process were killed after epoch 2's state was written

    with pytest.raises(KeyboardInterrupt):
        train(config, on_epoch_end=crash)
    state = json.loads((tmp_path / "interrupted" / STATE_META).read_text())
    assert state["epoch"] == 2
    del state["elapsed"]  # states written before elapsed time was recorded still resume
    (tmp_path / "interrupted" / STATE_META).write_text(json.dumps(state))
    resumed_epochs = []
    resumed = train(replace(config, resume=True), on_epoch_end=lambda e, r: resumed_epochs.append(e))
    assert resumed_epochs == [3, 4]
    metrics = load_checkpoint(resumed).meta.metrics
    assert metrics["train_seconds"] >= sum(r["seconds"] for r in metrics["history"])
    # the same through the command line: interrupted again, then `--resume`
    cli_config = _write(tmp_path / "cli.json", replace(config, out=str(tmp_path / "cli")).to_dict())
    with pytest.raises(KeyboardInterrupt):
        train(replace(config, out=str(tmp_path / "cli")), on_epoch_end=crash)
    assert main(["train", "--config", str(cli_config), "--resume"]) == 0
    finished = load_checkpoint(tmp_path / "cli")
    assert finished.meta.metrics["train_seconds"] >= sum(r["seconds"] for r in finished.meta.metrics["history"])
    assert main(["train", "--config", str(cli_config), "--resume"]) == 0  # finished: nothing to do, nothing changed
    assert load_checkpoint(tmp_path / "cli").meta.metrics == finished.meta.metrics
    straight = train(replace(config, out=str(tmp_path / "straight")))
    assert all(torch.equal(a, b) for a, b in zip(weights(tmp_path / "cli").values(), weights(straight).values()))
    a, b = weights(tmp_path / "interrupted"), weights(straight)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_cli_train_with_config_file_and_flags(image_folder, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        f"dataset: {image_folder}\nbackbone: {{name: mlp, widths: [8, 6]}}\nhead: {{name: scalarmix, d_star: 4}}\n"
        "max_epochs: 1\nbatch_size: 16\nval_fraction: 0.25\n"
    )
    assert main(["train", "--config", str(config), "--seed", "5", "--out", str(tmp_path / "cli")]) == 0
    ck = load_checkpoint(tmp_path / "cli")
    assert ck.meta.head.name == "scalarmix" and ck.meta.seed == 5 and ck.model.backbone.layer_dims == (8, 6)
    assert main(["train", "--dataset", str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2


def test_flip_crop_shifts_and_flips_within_bounds():
    g = torch.Generator().manual_seed(0)
    x = torch.arange(2 * 3 * 6 * 6, dtype=torch.uint8).view(2, 3, 6, 6)
    y = flip_crop(x, g, pad=2)
    assert y.shape == x.shape and y.dtype == x.dtype
    values = set(x.flatten().tolist()) | {0}
    assert set(y.flatten().tolist()) <= values
    assert flip_crop(x, torch.Generator().manual_seed(0), pad=0).equal(
        flip_crop(x, torch.Generator().manual_seed(0), pad=0)
    )


def test_frozen_backbone_trains_head_on_cached_features(image_folder, tmp_path):
    torch.manual_seed(0)
    source = build_backbone(BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=16))
    save_file({k: v.contiguous() for k, v in source.model.state_dict().items()}, str(tmp_path / "w.safetensors"))
    config = tiny_config(
        image_folder,
        tmp_path / "frozen",
        backbone=BackboneConfig(
            name="timm", model="test_resnet", input_size=16, weights=str(tmp_path / "w.safetensors"), freeze=True
        ),
        max_epochs=2,
    )
    out = train(config)
    ck = load_checkpoint(out)
    assert ck.meta.input.size == 16 and ck.meta.input.source_size == 8
    assert all(
        torch.equal(a, b)
        for a, b in zip(ck.model.backbone.model.state_dict().values(), source.model.state_dict().values())
    )
    from laya.data.datasets import cache_dir

    cached = list((cache_dir() / "features").glob("*/layer_0.npy"))  # memory-mapped feature cache on disk
    shapes = {np.load(path, mmap_mode="r").shape for path in cached}
    assert {(72, ck.model.backbone.layer_dims[0]), (24, ck.model.backbone.layer_dims[0])} <= shapes  # train, test


def test_timm_vit_test_model_as_frozen_backbone_on_image_folder(image_folder, tmp_path):
    """The documented route for a frozen ViT on an art-style ImageFolder, with timm's tiny test_vit."""
    vit = build_backbone(
        BackboneConfig(name="timm", model="test_vit", in_channels=3, input_size=32, model_kwargs={"img_size": 32})
    )
    save_file({k: v.contiguous() for k, v in vit.model.state_dict().items()}, str(tmp_path / "vit.safetensors"))
    code = main([
        "train", "--dataset", str(image_folder), "--backbone", "timm", "--timm-model", "test_vit", "--input-size", "32",
        "--weights", str(tmp_path / "vit.safetensors"), "--freeze", "--head", "laya", "--max-epochs", "2",
        "--batch-size", "16", "--val-fraction", "0.25", "--out", str(tmp_path / "vit-run"),
        "--config", str(_write(tmp_path / "vit.json", {"backbone": {"model_kwargs": {"img_size": 32}}})),
    ])  # fmt: skip
    assert code == 0
    ck = load_checkpoint(tmp_path / "vit-run")
    assert ck.layer_names == tuple(f"block {i}" for i in range(1, 7)) and ck.model.backbone.pool == "cls"


def _write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_torchrun_two_processes_with_gloo(image_folder, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        "-m", "laya", "train", "--dataset", str(image_folder), "--backbone", "mlp", "--widths", "16,8",
        "--head", "laya", "--d-star", "8", "--max-epochs", "2", "--batch-size", "16", "--val-fraction", "0.25",
        "--lr", "0.003", "--out", str(tmp_path / "ddp"),
    ]  # fmt: skip
    result = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    ck = load_checkpoint(tmp_path / "ddp")
    assert ck.meta.metrics["epochs"] == 2
    assert ck.meta.metrics["test_accuracy"] > 0.6
    assert result.stdout.count("checkpoint written") == 2  # both ranks finish; only rank 0 wrote files
