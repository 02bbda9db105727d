"""The test-set browser: its table against the report's arrays (laya.app.browser), the page through AppTest,
every aggregate that leads to it (heatmap cell, confusion cell, detection row), and Inspect opening an input."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from laya.analysis.report import Report
from laya.analysis.sample import Sample
from laya.app import browser
from laya.app.browser import Query, browse_table

APP = Path(__file__).resolve().parents[2] / "app.py"
BUNDLED = APP.parent / "models"


@pytest.fixture(autouse=True)
def _roots(monkeypatch: pytest.MonkeyPatch, tiny_models: Path, image_folder: Path) -> None:
    monkeypatch.setenv("LAYA_MODELS", str(tiny_models))
    monkeypatch.setenv("LAYA_PATH_ROOTS", str(image_folder))


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


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_browse_page_filters_sorts_and_opens_inspect(tiny_models: Path) -> None:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.switch_page("pages/browse.py").run()
    ok(at)
    sample = Sample.load(tiny_models / "colours-mlp" / "laya")
    at.selectbox(key="browse_class").set_value("green").run()
    at.selectbox(key="browse_sort").set_value("score").run()
    at.radio(key="browse_order").set_value("desc").run()
    ok(at)
    shown = at.main.dataframe[0].value
    expected = browse_table(sample, Query(label="green", layer=sample.layer_names[0], sort="score", descending=True,
                                          score=browser.detection_scores(sample)[0] if "mahalanobis" not in
                                          browser.detection_scores(sample) else "mahalanobis"))  # fmt: skip
    assert shown["test index"].tolist() == expected["test index"].tolist()
    assert len(at.main.image) == len(expected)
    assert at.query_params["bclass"] in ("green", ["green"]) and at.query_params["order"] in ("desc", ["desc"])
    first = int(expected["test index"].iloc[0])
    at.button(key=f"browse_open_{first}").click().run()
    ok(at)
    assert at.title[0].value == "Inspect an input"
    assert any(f"Test input #{first}" in c.value for c in at.caption)
    label = sample.classes[int(sample.table.loc[sample.table["index"] == first, "prediction"].iloc[0])]
    assert at.main.metric[0].value == label


def test_switches_survive_leaving_and_coming_back(tiny_models: Path) -> None:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.switch_page("pages/classwise.py").run()
    at.selectbox(key="classwise_class").set_value("red").run()
    at.radio(key="classwise_kind").set_value("loo").run()
    at.switch_page("pages/faithfulness.py").run()
    at.radio(key="faithfulness_reduction").set_value("magnitude").run()
    at.switch_page("pages/inspect.py").run()
    at.switch_page("pages/classwise.py").run()
    ok(at)
    assert at.selectbox(key="classwise_class").value == "red" and at.radio(key="classwise_kind").value == "loo"
    at.switch_page("pages/faithfulness.py").run()
    assert at.radio(key="faithfulness_reduction").value == "magnitude"


def test_heatmap_confusion_and_detection_open_the_browser(tiny_models: Path, tmp_path: Path, monkeypatch) -> None:
    from laya.analysis.depth.report import DepthOptions, run_depth
    from laya.cli import main

    models = tmp_path / "models"
    shutil.copytree(tiny_models / "colours-mlp", models / "colours-mlp")
    laya = models / "colours-mlp" / "laya"
    run_depth(laya, DepthOptions(limit=12, train_limit=30, resamples=20, random_orders=2))
    assert main(["sample", str(laya)]) == 0  # with the depth fit: depth columns
    monkeypatch.setenv("LAYA_MODELS", str(models))
    sample = Sample.load(laya)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.switch_page("pages/classwise.py").run()
    at.selectbox(key="classwise_class").set_value("blue").run()
    at.selectbox(key="classwise_browse_layer").set_value(sample.layer_names[1]).run()
    at.button(key="classwise_browse").click().run()
    ok(at)
    assert at.title[0].value == "Browse the test set"
    expected = browse_table(sample, Query(**{**browser.heatmap_query("blue", sample.layer_names[1]).__dict__,
                                              "score": "mahalanobis"}))  # fmt: skip
    assert at.main.dataframe[0].value["test index"].tolist() == expected["test index"].tolist()
    assert at.selectbox(key="browse_class").value == "blue" and at.radio(key="browse_order").value == "desc"

    at.switch_page("pages/depth.py").run()
    ok(at)
    at.slider(key="depth_threshold").set_value(0.75).run()
    at.selectbox(key="depth_task").set_value(at.selectbox(key="depth_task").options[-1]).run()
    task = at.selectbox(key="depth_task").value
    params = {k: at.query_params[k][0] if isinstance(at.query_params[k], list) else at.query_params[k]
              for k in at.query_params}  # fmt: skip
    assert params["threshold"] == "0.75" and params["task"] == task and params["model"] == "colours-mlp/laya"
    fresh = AppTest.from_file(str(APP), default_timeout=60)
    for key, value in params.items():
        fresh.query_params[key] = value
    fresh.run()
    fresh.switch_page("pages/depth.py").run()
    ok(fresh)
    assert fresh.slider(key="depth_threshold").value == pytest.approx(0.75)
    assert fresh.selectbox(key="depth_task").value == task
    shown = browse_table(sample, browser.detection_query("mahalanobis"))  # what a detection row opens
    assert shown["suspicion"].is_monotonic_decreasing and len(shown) == len(sample.table)


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
    assert len(heads) == 4, heads
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


def test_browse_page_on_a_bundled_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    setting_dir = BUNDLED_SETTINGS[0]
    monkeypatch.setenv("LAYA_MODELS", str(BUNDLED))
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    at.switch_page("pages/browse.py").run()
    ok(at)
    assert len(at.main.dataframe[0].value) == 1000 and len(at.main.image) == 40
    at.radio(key="browse_outcome").set_value("wrong").run()
    sample = Sample.load(Path(at.sidebar.radio[1].value))
    assert len(at.main.dataframe[0].value) == int((~sample.table["correct"]).sum())
    assert setting_dir.exists()
