"""laya.app.explanation_views: one input's layer table, faithfulness, downloads and cost, checked against the
explanation's own numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from laya.analysis.head.explain import explain_bytes
from laya.app.explanation_views import (
    INSPECT_TARGET,
    explanation_csv,
    explanation_json,
    input_faithfulness,
    layer_table,
    layer_table_text,
    model_time_caption,
    spearman_column,
)
from laya.app.numbers import number_text
from laya.model.checkpoint import load_checkpoint


def test_layer_table_and_input_faithfulness(setting: Path, example: bytes) -> None:
    checkpoint = load_checkpoint(setting / "laya")
    explanation = explain_bytes(checkpoint, example, mode="zero", posthoc=("saliency",))
    table = layer_table(explanation)
    assert list(table["layer"]) == list(checkpoint.layer_names)
    assert np.allclose(table["LAYA α (intrinsic)"], explanation.scores["laya_alpha"].numpy())
    assert np.allclose(table["Saliency (post-hoc)"], explanation.scores["saliency"].numpy())
    assert np.allclose(table["LOO drop"], explanation.drops.numpy())
    faith = input_faithfulness(explanation)
    assert list(faith["kind"]) == ["intrinsic", "post-hoc"]
    assert [float(v) for v in faith["Deletion@1"]] == pytest.approx(
        [explanation.deletion_at_1(m) for m in explanation.scores], abs=5e-4  # number_text: 3 digits
    )
    assert spearman_column(len(checkpoint.layer_names)) in faith.columns  # the metric names its n
    shown = layer_table_text(explanation)  # the page's text: every number through number_text
    assert list(shown["LOO drop"]) == [number_text(v) for v in explanation.drops.tolist()]
    assert list(shown["label flips"]) == list(table["label flips"])
    assert faith["top layer"][0] == checkpoint.layer_names[int(explanation.scores["laya_alpha"].argmax())]
    record = json.loads(explanation_json(explanation))
    assert record["prediction"] == explanation.label and record["score_kinds"]["Saliency (post-hoc)"] == "post-hoc"
    assert [row["LOO drop"] for row in record["layers"]] == pytest.approx(explanation.drops.tolist())
    assert explanation_csv(explanation).splitlines()[0].startswith("layer,LAYA α (intrinsic),Saliency (post-hoc)")


def test_model_time_caption_states_the_views_cost_and_flags_it_over_the_target(setting: Path, example: bytes) -> None:
    from dataclasses import replace

    e = explain_bytes(load_checkpoint(setting / "laya"), example)
    assert model_time_caption(e).startswith("Model time of this view: ")  # as the call measured it
    assert model_time_caption(replace(e, seconds={})) is None
    cheap = model_time_caption(replace(e, seconds={"forward": 0.002, "leave-one-out": 0.0005}))
    assert cheap.startswith("Model time of this view: 2.50 ms, 1.25× its backbone pass (2.00 ms; leave-one-out 0.50 ms)")
    assert "aims at" not in cheap
    costly = model_time_caption(replace(e, seconds={"forward": 0.001, "leave-one-out": 0.0003, "OOD status": 0.0004}))
    assert "1.70× its backbone pass" in costly and "OOD status 0.40 ms" in costly
    assert f"more than the {INSPECT_TARGET:g}× this page aims at" in costly
