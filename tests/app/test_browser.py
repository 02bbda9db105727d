"""The test-set browser's table against the report's arrays (laya.app.browser), its default suspicion score, and
every bundled checkpoint's sample; the page itself: tests/pages/test_browse_page.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from laya.analysis.report import Report
from laya.analysis.sample import Sample
from laya.app import browser
from laya.app.browser import Query, browse_table

BUNDLED = Path(__file__).resolve().parents[2] / "models"


@pytest.mark.parametrize("head", ["laya", "concat", "scalarmix", "lastlayer"])
def test_counts_and_order_match_the_report(tiny_models: Path, head: str) -> None:
    """The tiny sample holds every test input, so the browser's counts are the report's confusion matrix and
    its heatmap-cell order is the per-input scores sorted (ties by test index)."""
    directory = tiny_models / "colours-mlp" / head
    sample, report = Sample.load(directory), Report.load(directory)
    confusion = report.confusion()
    for true in report.data["classes"]:
        for predicted in report.data["classes"]:
            shown = browse_table(sample, browser.confusion_query(true, predicted))
            assert len(shown) == confusion.loc[true, predicted]
            assert shown["confidence"].is_monotonic_decreasing
    assert len(browse_table(sample, Query(outcome="wrong"))) == int(confusion.to_numpy().sum() - np.trace(confusion))
    scores = np.stack([sample.table[f"score/{i}"] for i in range(len(sample.layer_names))], 1)
    for c, name in enumerate(sample.classes):
        for i, layer in enumerate(sample.layer_names):
            shown = browse_table(sample, browser.heatmap_query(name, layer))
            rows = np.flatnonzero(sample.table["label"].to_numpy() == c)
            expected = pd.DataFrame({"s": scores[rows, i], "t": sample.table["index"].to_numpy()[rows]})
            expected = expected.sort_values("t", kind="stable").sort_values("s", ascending=False, kind="stable")
            assert shown["test index"].tolist() == expected["t"].tolist()
            assert shown["score"].to_numpy() == pytest.approx(expected["s"].to_numpy())
            record = next(r for r in report.data["profiles"]["class_layer"]
                          if r["class"] == name and r["layer"] == layer and r["subset"] == "all")  # fmt: skip
            assert shown["score"].mean() == pytest.approx(record["mean"], abs=1e-5) and len(shown) == record["count"]
    top = scores.argmax(1)
    for i, layer in enumerate(sample.layer_names):
        assert len(browse_table(sample, Query(top_layer=layer))) == int((top == i).sum())


def test_queries_are_checked() -> None:
    table = pd.DataFrame({"index": [5, 3], "label": [0, 1], "prediction": [0, 0], "correct": [True, False],
                          "confidence": [0.9, 0.6], "score/0": [0.5, 0.5], "drop/0": [0.1, 0.2],
                          "detection/msp": [-0.9, -0.6]})  # fmt: skip
    sample = Sample(table, {"classes": ["a", "b"], "layer_names": ["block 1"]}, None)
    assert browse_table(sample, Query(sort="score", descending=True))["test index"].tolist() == [3, 5]  # tie: index
    assert browse_table(sample, browser.detection_query("msp"))["test index"].tolist() == [3, 5]
    for bad in (Query(label="c"), Query(layer="block 9"), Query(sort="evil"), Query(score="energy")):
        with pytest.raises(ValueError, match="expected one of"):
            browse_table(sample, bad)
    with pytest.raises(ValueError, match="laya depth"):
        browse_table(sample, Query(sort="depth"))
    query = Query(label="a", prediction="b", outcome="wrong", top_layer="block 1", layer="block 1", score="msp",
                  sort="drop", descending=True)  # fmt: skip
    assert browser.query_from_switches({k: v for k, v in browser.query_switches(query).items() if v}) == query


BUNDLED_SETTINGS = sorted(p.parent.parent for p in BUNDLED.glob("*/laya/model.json"))
#: bytes models/ may hold, per-input arrays aside (docs/decisions/test-set-browser.md)
MODELS_BUDGET = 120 * 2**20


def test_default_suspicion_score_is_one_valid_for_the_checkpoint(tiny_models: Path) -> None:
    """Browse opens on Mahalanobis only where its fit is trusted: a Ledoit–Wolf fit, or an older one fitted on
    at least as many training inputs as the widest layer has features; otherwise on max softmax."""
    sample = Sample.load(tiny_models / "colours-mlp" / "laya")
    table = sample.table.assign(**{"detection/mahalanobis": -sample.table["confidence"]})  # held as after `depth`
    shrunk = Sample(table, {**sample.meta, "covariance": "ledoit-wolf", "n_train": 240}, sample.sprite)
    assert browser.default_score(shrunk) == "mahalanobis" == browser.default_score(shrunk, [1280, 320])
    old = Sample(table, {**sample.meta, "covariance": None, "n_train": 240}, sample.sprite)
    assert browser.default_score(old, [1280, 320]) == "msp"  # the tutorial's singular fit: not meaningful
    assert browser.default_score(old, [64, 32]) == "mahalanobis" and browser.default_score(old) == "msp"
    assert browse_table(old)["suspicion"].tolist() == browse_table(old, Query(score="msp"))["suspicion"].tolist()


@pytest.mark.parametrize("setting_dir", BUNDLED_SETTINGS, ids=[p.name for p in BUNDLED_SETTINGS])
def test_every_bundled_checkpoint_has_a_browsable_sample(setting_dir: Path) -> None:
    """≥ 1,000 class-balanced test inputs per bundled checkpoint, thumbnails included, depth columns present;
    the heads of a setting share the inputs and one sprite; the browser's table covers them all."""
    indices = None
    heads = sorted(p.parent.name for p in setting_dir.glob("*/model.json"))  # an attached network: own, not lastlayer
    assert "laya" in heads and ("lastlayer" in heads) != ("own" in heads), heads  # the ResNet-20: own and LAYA alone
    for head in heads:
        sample = Sample.load(setting_dir / head)
        assert sample is not None and sample.sprite is not None, f"{setting_dir.name}/{head} has no sample"
        table = sample.table
        assert len(table) == 1000 and table["label"].value_counts().nunique() == 1  # balanced
        assert indices is None or (table["index"] == indices).all()
        indices = table["index"]
        assert sample.meta["depth_fit"] and "depth" in table and "detection/mahalanobis" in table
        assert len(browse_table(sample)) == 1000 and sample.thumbnail(999).shape[0] == sample.meta["tile"]
    total = sum(f.stat().st_size for f in BUNDLED.rglob("*") if f.is_file() and f.name != "per_input.safetensors")
    assert total < MODELS_BUDGET, f"models/ holds {total / 2**20:.1f} MiB"


def test_the_own_classifiers_sample_depth_is_named_as_the_probes() -> None:
    assert browser.depth_words({"own": {"network": "resnet18"}}).startswith("prediction depth (the probes'")
    assert browser.depth_words({"epochs": 3}) == "prediction depth"  # a head's readouts: its only depth


def test_the_own_classifier_browses_its_one_layer() -> None:
    """The own classifier reads pre-logits alone: Browse shows that layer's score and drop, no picker, no top layer."""
    from types import SimpleNamespace

    sample = SimpleNamespace(layer_names=["stage 1", "stage 2", "pre-logits"])
    assert browser.one_layer({"own": {"network": "resnet18"}}, sample) == "pre-logits"
    assert browser.one_layer({}, sample) is None and "0 by construction" in browser.ONE_LAYER_NOTE
