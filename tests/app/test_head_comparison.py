"""laya.app.head_comparison: heads side by side on one input, checked against each head's explanation and report."""

from __future__ import annotations

from pathlib import Path

from laya.analysis.head.explain import explain_bytes
from laya.analysis.report import Report
from laya.app.head_comparison import common_modes, compare_table, compare_titles
from laya.app.numbers import percent
from laya.model.checkpoint import load_checkpoint


def test_compare_table(setting: Path, example: bytes) -> None:
    heads = ["lastlayer", "concat", "scalarmix", "laya"]
    checkpoints = [load_checkpoint(setting / h) for h in heads]
    explanations = [explain_bytes(c, example) for c in checkpoints]
    reports = [Report.load(setting / h) for h in heads[:3]] + [None]
    table = compare_table(heads, explanations, reports)
    assert list(table["head"]) == ["LastLayer", "Concat", "ScalarMix", "LAYA"]
    assert list(table["prediction"]) == [e.label for e in explanations]
    assert table["confidence"].tolist() == [percent(e.confidence) for e in explanations]
    assert list(table["layer scores"][:2]) == ["Integrated Gradients (baseline: training mean) (post-hoc)"] * 2
    assert table["test accuracy [95% CI]"][0].startswith(f"{reports[0].accuracy:.4f} [")
    assert table["test accuracy [95% CI]"][3] == "–"
    assert table.iloc[0, -1] == "n/a (one informative layer)"  # LastLayer's faithfulness
    assert compare_titles(heads[2:], explanations[2:]) == ["ScalarMix", "LAYA", "", ""]
    assert common_modes([c.model.head.modes for c in checkpoints]) == ["mean", "zero_input", "zero"]
    assert common_modes([checkpoints[3].model.head.modes]) == ["mean", "zero_input", "zero", "renormalise"]
