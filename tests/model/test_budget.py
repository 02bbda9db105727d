"""The size check's estimate is kept on disk: same numbers, no meta forward on a restart, limits still apply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from laya.model import budget
from laya.model.checkpoint import META_FILE, CheckpointMeta
from laya.model.validation import CheckpointError


@pytest.fixture
def meta(tiny_models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CheckpointMeta:
    monkeypatch.setenv("LAYA_CACHE", str(tmp_path / "cache"))
    return CheckpointMeta.from_dict(json.loads((tiny_models / "colours-mlp" / "laya" / META_FILE).read_text()))


def args(meta: CheckpointMeta) -> tuple:
    return meta.backbone, meta.head, len(meta.classes)


def test_estimate_is_measured_once_then_read(meta: CheckpointMeta, monkeypatch: pytest.MonkeyPatch) -> None:
    measured = budget.measure(*args(meta))
    assert budget.estimate(*args(meta)) == measured
    files = list(Path(budget._cache_file(*args(meta))).parent.glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["params"] == measured.params

    def fail(*_):
        raise AssertionError("measured again")

    monkeypatch.setattr(budget, "measure", fail)
    cached = budget.estimate(*args(meta))
    assert cached == measured and cached.flops == measured.flops > 0 and cached.buffers == measured.buffers
    assert cached.state == measured.state and len(cached.state) > 0  # shapes and dtypes round-trip


def test_key_depends_on_the_configs(meta: CheckpointMeta) -> None:
    backbone, head, classes = args(meta)
    assert budget._cache_file(backbone, head, classes) != budget._cache_file(backbone, head, classes + 1)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "{",
        '{"params": 1}',
        '{"params": -5, "activations": 1, "layer_dims": [1], "flops": 1, "buffers": 0, "state": {}}',
        '{"params": 5, "activations": 1, "layer_dims": [1], "flops": 1, "buffers": 0, "state": {"w": [[1], "nn"]}}',
    ],
)
def test_unreadable_entries_are_recomputed(meta: CheckpointMeta, content: str) -> None:
    measured = budget.measure(*args(meta))
    path = budget._cache_file(*args(meta))
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert budget.estimate(*args(meta)) == measured


def test_cached_estimate_is_checked_against_the_current_limits(
    meta: CheckpointMeta, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = budget.check_budget(*args(meta)).params  # cached now
    monkeypatch.setenv("LAYA_MAX_PARAMS", str(params - 1))
    with pytest.raises(CheckpointError, match="LAYA_MAX_PARAMS"):
        budget.check_budget(*args(meta))


def test_a_torchvision_builder_that_computes_its_widths_with_tensors_is_measured_on_meta() -> None:
    """RegNet's builder reads its block widths with ``.tolist()``: the shape-only build must still work."""
    from laya.model.backbones import BackboneConfig, build_backbone
    from laya.model.budget import measure
    from laya.model.heads import HeadConfig

    config = BackboneConfig(name="torchvision", model="regnet_y_400mf", model_kwargs={"num_classes": 4},
                            in_channels=3, input_size=32, pre_logits=True)  # fmt: skip
    budget = measure(config, HeadConfig(name="lastlayer"), 4)
    real = build_backbone(config)
    assert budget.layer_dims == real.layer_dims == (32, 48, 104, 208, 440, 440)
    assert budget.params - budget.buffers == sum(p.numel() for p in real.parameters()) + 440 * 4 + 4
    import torch

    from laya.analysis.network.recording import as_network, logits_of

    x = torch.randn(2, 3, 32, 32)
    real.eval()
    own = real.classifier()
    assert torch.allclose(logits_of(as_network(real)(x)), own(real(x)[-1]), atol=1e-5)  # rebuilt on meta, same tensors
