"""The hostile-checkpoint corpus (tests/hostile.py) through the library: every case is refused with a
message naming the field, the value and the rule, before anything large is allocated."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from laya.app.deploy import check_upload
from laya.model.budget import estimate
from laya.model.checkpoint import (
    META_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    CheckpointMeta,
    Confinement,
    load_checkpoint,
)
from tests.hostile import CASES, write_case, write_nan_weights

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def good(tiny_models: Path) -> Path:
    return tiny_models / "colours-mlp" / "laya"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_hostile_checkpoint_is_refused(case, good: Path, image_folder: Path, tmp_path: Path) -> None:
    path = write_case(good, case, tmp_path / case.name)
    confine = Confinement(path, (image_folder,))
    files = {name: (path / name).read_bytes() for name in (META_FILE, WEIGHTS_FILE)}
    if case.on_load:
        with pytest.raises(CheckpointError) as refused:
            load_checkpoint(path, confine=confine)
        assert case.message in str(refused.value)
        assert str(tmp_path) not in str(refused.value)  # no server path of the checkpoint itself
        with pytest.raises(CheckpointError, match=None) as upload:
            check_upload(files)  # the dashboard's upload check, before writing anything
        assert case.message in str(upload.value)
    else:
        checkpoint = load_checkpoint(path, confine=confine)
        with pytest.raises(CheckpointError) as refused:
            checkpoint.load_data("test")
        assert case.message in str(refused.value)


def test_huge_configs_are_refused_within_2_gb(good: Path, tmp_path: Path) -> None:
    """A fresh process refuses every huge config; its peak RSS (torch + timm included) stays under 2 GB."""
    paths = [str(write_case(good, c, tmp_path / c.name)) for c in CASES if c.huge]
    script = textwrap.dedent(
        """
        import json, re, sys
        from laya.model.checkpoint import CheckpointError, Confinement, load_checkpoint
        from pathlib import Path
        refused = 0
        for path in sys.argv[1:]:
            try:
                load_checkpoint(path, confine=Confinement(Path(path)))
            except CheckpointError:
                refused += 1
        # VmHWM: this process's own peak; ru_maxrss would include the forking pytest's RSS (kept across execve)
        peak = int(re.search(r"VmHWM:\s+(\d+) kB", open("/proc/self/status").read()).group(1))
        print(json.dumps({"refused": refused, "max_rss_kb": peak}))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script, *paths], capture_output=True, text=True, timeout=120, cwd=REPO, check=True
    )
    result = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"refused {result['refused']} huge configs, peak RSS {result['max_rss_kb'] // 1024} MB")
    assert result["refused"] == len(paths) >= 7
    assert result["max_rss_kb"] < 2 * 1024 * 1024, result


def test_budget_counts_parameters_exactly(good: Path) -> None:
    """The meta-device estimate equals the real model's parameter count, and allocates nothing real."""
    checkpoint = load_checkpoint(good)
    meta = checkpoint.meta
    budget = estimate(meta.backbone, meta.head, len(meta.classes))
    assert budget.params == sum(p.numel() for p in checkpoint.model.parameters())
    assert budget.layer_dims == tuple(checkpoint.model.backbone.layer_dims)
    vit = CheckpointMeta.from_dict(
        {
            **json.loads((good / META_FILE).read_text()),
            "backbone": {"name": "timm", "model": "vit_huge_patch14_224", "in_channels": 3, "input_size": 224},
            "input": {"channels": 3, "source_size": 224, "size": 224, "mean": [0.5] * 3, "std": [0.5] * 3},
        }
    )
    huge = estimate(vit.backbone, vit.head, 3)
    assert 630_000_000 < huge.params < 640_000_000 and len(huge.layer_dims) == 32


def test_nonfinite_weights_are_refused_or_loaded_with_a_warning(good: Path, tmp_path: Path) -> None:
    key = write_nan_weights(good, tmp_path / "nan")
    with pytest.raises(CheckpointError, match=f"1 weight tensor\\(s\\) hold NaN or Inf values: {key}"):
        load_checkpoint(tmp_path / "nan")
    loaded = load_checkpoint(tmp_path / "nan", allow_nonfinite=True)
    assert loaded.warnings and key in loaded.warnings[0]
    assert torch.isnan(loaded.model.head.classifier.weight).any()


def test_good_checkpoint_still_loads_confined(good: Path, image_folder: Path) -> None:
    checkpoint = load_checkpoint(good, confine=Confinement(good, (image_folder,)))
    assert checkpoint.warnings == () and len(checkpoint.load_data("test")) > 0
