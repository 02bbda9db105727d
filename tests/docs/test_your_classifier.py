"""docs/your-classifier.md runs as written, offline: the shapes, the stand-in classifier (the page's first
``python`` block) and ``laya attach``; then the own head's logits equal the stand-in network's, and the page's
dashboard command opens the folder attach wrote. That command serving HTTP 200 is the tutorial's last step, run by
tests/docs/test_tutorial.py: the same ``laya dashboard --models`` on another folder, which it only checks exists
(``laya.dashboard.command``) before Streamlit starts."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from laya.dashboard import command
from scripts.tutorial import REPO, commands

PAGE = REPO / "docs" / "your-classifier.md"
TIME_BOX_S = 600


def test_the_page_attaches_and_opens_the_dashboard() -> None:
    steps = commands(PAGE.read_text())
    assert [s.split()[3] for s in steps] == ["shapes", "attach", "dashboard"]
    assert "--weights mine.safetensors" in steps[1] and steps[2] == "python -m laya dashboard --models attached"


@pytest.mark.slow
def test_the_page_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = PAGE.read_text()
    shapes, attach, dashboard = commands(text)
    program = re.findall(r"```python\n(.*?)```", text, flags=re.S)[0]
    env = {**os.environ, "PYTHONPATH": str(REPO), "LAYA_CACHE": str(tmp_path / ".cache")}
    subprocess.run([sys.executable, *shapes.split()[1:]], cwd=tmp_path, env=env, check=True, capture_output=True)
    subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=env, check=True, capture_output=True,
                   timeout=TIME_BOX_S)  # fmt: skip
    done = subprocess.run([sys.executable, *shlex.split(attach)[1:]], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=TIME_BOX_S)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "own head (the network as it is)" in done.stdout and "Open it in the dashboard:" in done.stdout  # summary
    models = tmp_path / shlex.split(dashboard)[-1]
    assert command(models)[1]["LAYA_MODELS"] == str(models.resolve())  # what `laya dashboard` starts Streamlit on
    setting = models / "shapes-efficientnet_lite0"
    assert {p.parent.name for p in setting.glob("*/model.json")} == {"own", "laya", "scalarmix", "concat"}
    assert (setting / "own" / "depth.json").is_file()
    import timm
    from safetensors.torch import load_file

    from laya.model.checkpoint import load_checkpoint

    monkeypatch.chdir(tmp_path)  # the checkpoint names its dataset as the page does: data/shapes
    own = load_checkpoint(setting / "own")
    network = timm.create_model("efficientnet_lite0", num_classes=4).eval()
    network.load_state_dict(load_file(str(tmp_path / "mine.safetensors")))
    x = own.preprocess(own.load_data("test").images[:16])
    with torch.no_grad():
        assert torch.allclose(own.model(x).logits, network(x), atol=1e-5, rtol=0)
    report = json.loads((setting / "own" / "report.json").read_text())
    assert report["accuracy_ci"]["low"] > 0.3, report["accuracy_ci"]  # 4 classes: chance is 0.25
