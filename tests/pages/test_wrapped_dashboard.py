"""The dashboard opens a wrapped-module checkpoint from its own model folder only with the operator's
opt-in (``laya dashboard --allow-import`` sets ``LAYA_ALLOW_IMPORT=1``); without it, a clear refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from laya.data.datasets import InputSpec
from laya.model.backbones import wrap
from laya.model.checkpoint import CheckpointMeta, save_checkpoint
from laya.model.classifier import LayerwiseClassifier
from laya.model.heads import HeadConfig, build_head
from tests.model.backbones.test_backbone_families import make_tiny

APP = Path(__file__).resolve().parents[2] / "app.py"


@pytest.mark.parametrize("allow", ["1", "0"])
def test_wrapped_checkpoint_on_the_dashboard(allow: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    models = tmp_path / f"models-{allow}"  # one folder per case: the app caches loads by path
    backbone = wrap(
        make_tiny(), layers=["stem", "stage"], input_size=8, import_path=f"{make_tiny.__module__}:make_tiny"
    )
    head = HeadConfig(d_star=8, scorer_hidden=8)
    model = LayerwiseClassifier(backbone, build_head(head, backbone.layer_dims, 3)).eval()
    spec = InputSpec(channels=3, source_size=8, size=8, mean=(0.5,) * 3, std=(0.25,) * 3)
    meta = CheckpointMeta(backbone=backbone.config, head=head, classes=("a", "b", "c"), dataset="toy", input=spec)
    save_checkpoint(model, meta, models / "mine-wrapped" / "laya")
    monkeypatch.setenv("LAYA_MODELS", str(models))
    monkeypatch.setenv("LAYA_ALLOW_IMPORT", allow)
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    if allow == "1":
        assert not errors and [t.value for t in at.title] == ["Inspect an input"]
    else:
        assert any("laya dashboard --allow-import" in e for e in errors), errors
