"""scripts/bundled_tables.py quotes the bundled seed-0 reports: every head, the robust companions, both IG baselines."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bundled_tables.py"


def _script():
    spec = importlib.util.spec_from_file_location("bundled_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bundled_tables_quote_the_reports(tiny_models: Path, tmp_path: Path):
    module, setting = _script(), tiny_models / "colours-mlp"
    table = module.bundled_table(setting).splitlines()
    assert "Deletion@1 / oracle (median)" in table[0] and "Deletion@1 / oracle (5%-trimmed mean)" in table[0]
    assert sum(line.startswith("| ") for line in table[2:]) == 4  # one row per head
    report = json.loads((setting / "laya" / "report.json").read_text())
    accuracy = report["accuracy_ci"]
    assert f"{accuracy['estimate']:.4f} [{accuracy['low']:.4f}, {accuracy['high']:.4f}]" in "\n".join(table)
    methods = module.laya_methods(setting)
    assert "Integrated Gradients (baseline: zero)" in methods and "Integrated Gradients (baseline: training mean)" in methods
    entry = report["faithfulness"]["mean"]["signed"]["input_x_gradient"]
    if entry["status"] is None:
        median = entry["deletion_at_1_norm_median"]
        assert f"{median['estimate']:.3f} [{median['low']:.3f}, {median['high']:.3f}]" in methods
    with pytest.raises(FileNotFoundError, match="python -m laya bundle"):
        module.bundled_table(tmp_path)
