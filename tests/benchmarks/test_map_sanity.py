"""benchmarks/map_sanity.py: the cascade's steps on a bundled checkpoint, and its table."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
pytest.importorskip("pytorch_grad_cam")

import map_sanity

from laya.model.checkpoint import load_checkpoint


def test_groups_run_from_the_head_down_through_every_layer():
    model = load_checkpoint(ROOT / "models" / "cifar10-cnn" / "laya").model
    groups = map_sanity.groups(model)
    assert [label for label, _ in groups] == ["head", "block 5", "block 4", "block 3", "block 2", "block 1"]
    assert groups[1][1] == ["backbone.blocks.4"]  # the CNN's blocks hold every backbone parameter: no "rest" step
    assert map_sanity.unit_names(model)["block 1"] == "backbone.blocks.0"


def test_an_attached_network_is_randomised_from_its_classifier_down_through_its_units():
    import torchvision

    torch.manual_seed(0)
    network = torchvision.models.resnet18(num_classes=10).eval()
    units = [f"layer{s}.{b}" for s in range(1, 5) for b in range(2)]
    groups = map_sanity.network_groups(network, units)
    assert [label for label, _ in groups] == ["fc", *reversed(units), "rest of the network"]  # the stem is left
    assert groups[1] == ("layer4.1", ["layer4.1"]) and groups[-1][1] == [""]
    raw = torch.randint(0, 256, (4, 3, 32, 32), generator=torch.Generator().manual_seed(1), dtype=torch.uint8)
    target = torch.tensor([0, 3, 3, 9])
    last = {u: u for u in units[-3:]}  # label -> module name
    maps = map_sanity.unit_maps(network, lambda r: r.float() / 255, raw, target, last, batch=3)
    assert list(maps) == [("unit Grad-CAM", u) for u in units[-3:]]
    cam = maps[("unit Grad-CAM", "layer3.1")]  # a 2x2 grid at 32 px (layer4's are 1x1)
    assert cam.shape == (4, 32, 32) and not torch.equal(cam[1], cam[2])  # batched in 3 + 1: every image its own


def test_the_table_flags_a_map_that_barely_changes(tmp_path):
    rows = []
    for step, rho in (("head", 0.95), ("block 1", 0.93)):
        for method, value, flag in (("edges", rho, map_sanity.FLAGGED), ("exact", 0.1, map_sanity.CHANGES)):
            rows.append({"checkpoint": "s/laya", "sample": "balanced seed 0", "step": step, "method": method,
                         "layer": "all layers", "n": 9, "mean": value, "low": value - 0.05, "high": value + 0.05,
                         "flag": flag if step == "block 1" else ""})  # fmt: skip
    map_sanity.write_csv(rows, tmp_path / "s-laya.csv")
    table = map_sanity.markdown(tmp_path)
    assert "| edges, all layers | 0.95 [0.90, 1.00] | 0.93 [0.88, 0.98] | barely changes |" in table
    assert "Barely change (the CI after the last step reaches 0.9): edges, all layers; change: 1 of 2 maps." in table
    assert map_sanity.done(tmp_path / "s-laya.csv", 9, 0) and not map_sanity.done(tmp_path / "s-laya.csv", 9, 1)


@pytest.mark.slow  # about half a minute on a loaded machine
def test_map_sanity_smoke_on_a_few_images(tmp_path):
    out = tmp_path / "sanity"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "map_sanity.py"), "--checkpoints", "models/cifar10-cnn/laya",
           "--n", "10", "--resamples", "50", "--methods", "Grad-CAM", "--out", str(out)]  # fmt: skip
    result = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader((out / "cifar10-cnn-laya.csv").open()))
    maps = {(r["method"], r["layer"]) for r in rows}
    assert ("exact", "all layers") in maps and ("Grad-CAM", "all layers") in maps and ("unit Grad-CAM", "block 1") in maps
    assert ("exact", "block 5") not in maps  # a 1x1 grid: constant on the frame, no ranking to compare
    assert [r["step"] for r in rows if r["method"] == "exact" and r["layer"] == "all layers"] == [
        "head", "block 5", "block 4", "block 3", "block 2", "block 1"]  # fmt: skip
    assert all(-1 <= float(r["mean"]) <= 1 and (r["flag"] != "") == (r["step"] == "block 1") for r in rows)
    assert map_sanity.markdown(out) in result.stdout
