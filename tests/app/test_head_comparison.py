"""laya.app.head_comparison: heads side by side on one input, checked against each head's explanation and report."""

from __future__ import annotations

from pathlib import Path

import pytest

from laya.analysis.head.explain import explain_bytes
from laya.analysis.report import Report
from laya.app.head_comparison import common_modes, compare_table, compare_titles, stage_sum_figure, stage_sums
from laya.app.numbers import percent
from laya.model.checkpoint import load_checkpoint
from tests.app.test_network_views import explanation


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


def test_the_unit_profile_sums_by_the_heads_layer_its_units_make() -> None:
    """Units of layers 1, 2, 2, 3 of five head layers; layer2.0 replaces its whole output: left out of layer 2."""
    layers = ["stem", "s1", "s2", "s3", "pre-logits"]
    result = explanation(layers=(1, 2, 2, 3))
    table = stage_sums(result, layers)
    assert table["layer"].tolist() == layers
    assert table["units"].tolist() == ["", "layer1.0", "layer2.1", "layer3.0", ""]
    assert table["drop"].tolist()[1:4] == pytest.approx([0.1, 0.3, 0.0])  # not 0.25: layer2.0 does not keep the input
    assert table["drop"].isna().tolist() == [True, False, False, False, True]
    figure = stage_sum_figure(table, "dog")
    assert list(figure.data[0].x) == layers and figure.layout.yaxis.title.text == "summed drop in p(dog)"
    with pytest.raises(ValueError, match="a layer index per bar was expected"):
        stage_sums(explanation(), layers)  # an explanation from before the mapping
    with pytest.raises(ValueError, match=r"layer indices in \[0, 3\)"):
        stage_sums(result, layers[:3])
