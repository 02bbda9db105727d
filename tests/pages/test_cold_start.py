"""Cold start: the dashboard imports Captum and scipy.stats only where they are used (docs/speed.md).

Each test runs a fresh interpreter (``sys.modules`` of this one is shared by the whole suite) and
asserts on its ``sys.modules``: importing every page's dependencies, and the first page run on a
LAYA head, pull in neither (nor ``torch._dynamo`` once the size check's estimate is cached, see
:mod:`laya.model.budget`); the functions that need them still import them and work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from laya.model.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("captum", "scipy.stats", "matplotlib")


def run_python(code: str, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter at the repository root; it prints one JSON line, returned."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_page_dependencies_do_not_import_captum_or_scipy_stats() -> None:
    code = f"""
import json, sys
import laya, pages.common
from laya.app import catalog, classwise_views, depth_plots, depth_views, explanation_views, export
from laya.app import faithfulness_views, head_comparison, input_images, labels, links, plots, seed_views
from laya.analysis import evaluate, statistics
from laya.analysis.head import attribution, explain, faithfulness
before = [m for m in {HEAVY!r} if m in sys.modules]
interval = statistics.seed_interval([1.0, 2.0, 3.0])
print(json.dumps({{"before": before, "after": "scipy.stats" in sys.modules, "interval": [interval.low, interval.high]}}))
"""
    result = run_python(code)
    assert result["before"] == []
    # loaded when needed: mean 2, s = 1, n = 3, t_{0.975, 2} = 4.302653 -> 2 ± 2.484138
    assert result["after"] is True
    assert abs(result["interval"][0] - (2 - 2.484138)) < 1e-6 and abs(result["interval"][1] - (2 + 2.484138)) < 1e-6


def test_first_page_on_a_laya_head_does_not_import_them(tiny_models: Path, image_folder: Path) -> None:
    """Nor ``torch._dynamo`` (the meta-device size check's import) once that estimate is cached."""
    load_checkpoint(tiny_models / "colours-mlp" / "laya")  # caches the size estimate under $LAYA_CACHE
    code = f"""
import json, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({str(ROOT / "app.py")!r}, default_timeout=300).run()
print(json.dumps({{"exception": [e.value for e in at.exception], "charts": len(at.get("plotly_chart")),
                   "heavy": [m for m in {(*HEAVY, "torch._dynamo")!r} if m in sys.modules]}}))
"""
    result = run_python(code, LAYA_MODELS=str(tiny_models), LAYA_PATH_ROOTS=str(image_folder), LAYA_THREADS="1")
    assert result["exception"] == [] and result["charts"] >= 2
    assert result["heavy"] == []


def test_captum_is_imported_for_gradient_x_input_only(tiny_models: Path) -> None:
    code = f"""
import json, sys
import torch
from laya.analysis.head.attribution import raw_attributions
from laya.model.checkpoint import load_checkpoint
ck = load_checkpoint({str(tiny_models / "colours-mlp" / "lastlayer")!r})
spec = ck.meta.input
x = ck.preprocess(torch.rand(2, spec.channels, spec.source_size, spec.source_size))
before = "captum" in sys.modules
with torch.no_grad():
    hidden = ck.model.backbone(x)
parts = raw_attributions(ck.model.head, hidden, "integrated_gradients", torch.tensor([0, 1]), steps=4)
after_ig = "captum" in sys.modules
raw_attributions(ck.model.head, hidden, "input_x_gradient", torch.tensor([0, 1]))
print(json.dumps({{"before": before, "after_ig": after_ig, "after": "captum" in sys.modules,
                  "shapes": [list(p.shape) for p in parts]}}))
"""
    result = run_python(code)
    assert result["before"] is False and result["after_ig"] is False and result["after"] is True
    assert [s[0] for s in result["shapes"]] == [2] * len(result["shapes"])
