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

from laya.app.uploads import check_upload
from laya.model.budget import estimate
from laya.model.checkpoint import (
    META_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    CheckpointMeta,
    Confinement,
    load_checkpoint,
)
from tests.hostile import CASES, write_case, write_nan_weights, write_weights

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
        [sys.executable, "-c", script, *paths], capture_output=True, text=True, timeout=600, cwd=REPO, check=True
    )
    result = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"refused {result['refused']} huge configs, peak RSS {result['max_rss_kb'] // 1024} MB")
    assert result["refused"] == len(paths) >= 7
    assert result["max_rss_kb"] < 2 * 1024 * 1024, result


def test_budget_counts_parameters_exactly(good: Path) -> None:
    """The meta-device estimate equals the real model's parameter + buffer count and state-dict shapes and
    dtypes, and allocates nothing real."""
    checkpoint = load_checkpoint(good)
    meta = checkpoint.meta
    budget = estimate(meta.backbone, meta.head, len(meta.classes))
    model = checkpoint.model
    assert budget.buffers == sum(b.numel() for b in model.buffers()) > 0
    assert budget.params == sum(p.numel() for p in model.parameters()) + budget.buffers
    assert budget.state == {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}
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
    assert 330e9 < huge.flops < 340e9  # 167 G multiply-adds at 224 px (timm's model card)


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


def test_confined_weights_are_built_from_the_real_path_that_was_checked(good: Path, tmp_path: Path) -> None:
    """check_confined returns the real path (the one then opened); a link leaving the folder is refused,
    and the refusal is the same whether its target exists."""
    from laya.model.checkpoint import check_confined, check_model

    folder = tmp_path / "upload"
    folder.mkdir()
    (folder / "w.safetensors").write_bytes(b"x")
    (folder / "inner").symlink_to(folder / "w.safetensors")
    (folder / "leak").symlink_to("/etc/passwd")
    (folder / "leak-missing").symlink_to("/etc/no-such-file")
    record = json.loads((good / META_FILE).read_text())
    messages = []
    for spec, expected in (("inner", folder / "w.safetensors"), ("leak", None), ("leak-missing", None)):
        meta = check_model({**record, "backbone": {**record["backbone"], "weights": spec}})
        if expected is not None:
            assert check_confined(meta, Confinement(folder), folder) == str(expected.resolve())
            continue
        with pytest.raises(CheckpointError, match="must be a named source") as refused:
            check_confined(meta, Confinement(folder), folder)
        messages.append(str(refused.value).replace(repr(spec), "<spec>"))
        assert str(folder) not in messages[-1]
    assert messages[0] == messages[1]


@pytest.mark.parametrize(
    ("dtype", "declared", "message"),
    [
        (torch.int8, None, "int8, expected float32"),  # 4x the parameters per uploaded MB
        (torch.float16, None, "float16, expected float32"),
        (torch.float32, "float16", "float32, expected float16"),
        (torch.float64, None, "float64, expected float32"),
    ],
)
def test_weights_in_another_dtype_than_declared_are_refused(good: Path, tmp_path: Path, dtype, declared, message) -> None:
    def convert(state: dict) -> None:
        for k, v in state.items():
            if v.is_floating_point():
                state[k] = v.to(dtype)

    path = write_weights(good, tmp_path / "w", convert, declared)
    with pytest.raises(CheckpointError, match=f"in another dtype than model.json declares .*{message}"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match=message):
        check_upload({name: (path / name).read_bytes() for name in (META_FILE, WEIGHTS_FILE)})


def test_weights_header_is_checked_before_the_model_is_built(good: Path, tmp_path: Path, monkeypatch) -> None:
    """The 22000 x 22000 MLP with the good checkpoint's 20 KB of weights: refused without a call to build_model."""
    from laya.model import checkpoint as module

    case = next(c for c in CASES if c.name == "mlp-22000-tiny-weights")
    path = write_case(good, case, tmp_path / "mlp")
    built = []
    monkeypatch.setattr(module, "build_model", lambda *a, **k: built.append(1))
    with pytest.raises(CheckpointError, match=r"wrong shape .*\(22000,\) in the model"):
        load_checkpoint(path)
    assert built == [] and (path / WEIGHTS_FILE).stat().st_size < 64_000


def test_budget_counts_buffers_temporaries_and_flops_as_the_real_model() -> None:
    """Buffers: a BatchNorm CNN's running stats; peak temporaries at least the largest activation; FLOPs
    of an MLP are 2 x multiply-adds, exactly."""
    from laya.model.backbones import BackboneConfig
    from laya.model.heads import HeadConfig

    head = HeadConfig(name="lastlayer", d_star=8)
    mlp = estimate(BackboneConfig(name="mlp", in_channels=1, input_size=4, widths=(32, 16)), head, 3)
    macs = 16 * 32 + 32 * 16 + 16 * 3  # the linear layers of backbone and head, one input
    assert 2 * macs <= mlp.flops <= 2 * macs + 2 * 16 * 8 + 2 * 8 * 3  # (the head's projection if it has one)
    cnn = estimate(BackboneConfig(name="cnn", in_channels=3, input_size=32, widths=(8, 16)), head, 3)
    bn = [m for k, m in cnn.state.items() if "running_mean" in k]
    assert cnn.buffers >= sum(shape[0] for shape, _ in bn) * 2 > 0
    assert cnn.activations >= 8 * 32 * 32  # the first block's output, one input
    assert cnn.state and all(isinstance(shape, tuple) for shape, _ in cnn.state.values())


def test_a_missing_weights_file_inside_the_folder_is_named_without_its_server_path(good: Path, tmp_path: Path) -> None:
    """Issue 17, hole 10: "not found (looked at <upload folder>/nope.pth)" named the server's folder."""
    from laya.model.checkpoint import check_confined, check_model

    record = json.loads((good / META_FILE).read_text())
    meta = check_model({**record, "backbone": {**record["backbone"], "weights": "nope.pth"}})
    with pytest.raises(CheckpointError, match="backbone.weights = 'nope.pth': no such file") as refused:
        check_confined(meta, Confinement(tmp_path), tmp_path)
    assert str(tmp_path) not in str(refused.value)
    assert check_confined(meta, Confinement(tmp_path), tmp_path, exists=False) == str((tmp_path / "nope.pth").resolve())
