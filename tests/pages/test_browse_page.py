"""The Browse page through AppTest: it filters, sorts and opens an input on Inspect, its switches survive leaving
the page, every aggregate that leads to it (heatmap cell, confusion cell, detection row) opens it, and it shows a
bundled checkpoint's sample (laya.app.browser's table, tests/app/test_browser.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from laya.analysis.sample import Sample
from laya.app import browser
from laya.app.browser import Query, browse_table

APP = Path(__file__).resolve().parents[2] / "app.py"
BUNDLED = APP.parent / "models"
BUNDLED_SETTINGS = sorted(p.parent.parent for p in BUNDLED.glob("*/laya/model.json"))


@pytest.fixture(autouse=True)
def _roots(monkeypatch: pytest.MonkeyPatch, tiny_models: Path, image_folder: Path) -> None:
    monkeypatch.setenv("LAYA_MODELS", str(tiny_models))
    monkeypatch.setenv("LAYA_PATH_ROOTS", str(image_folder))


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_browse_page_filters_sorts_and_opens_inspect(tiny_models: Path) -> None:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.switch_page("pages/browse-test-set.py").run()
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
    at.switch_page("pages/class-depth.py").run()
    at.selectbox(key="classwise_class").set_value("red").run()
    at.radio(key="classwise_kind").set_value("loo").run()
    at.switch_page("pages/faithfulness-overview.py").run()
    at.radio(key="faithfulness_reduction").set_value("magnitude").run()
    at.switch_page("pages/inspect-input.py").run()
    at.switch_page("pages/class-depth.py").run()
    ok(at)
    assert at.selectbox(key="classwise_class").value == "red" and at.radio(key="classwise_kind").value == "loo"
    at.switch_page("pages/faithfulness-overview.py").run()
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
    at.switch_page("pages/class-depth.py").run()
    at.selectbox(key="classwise_class").set_value("blue").run()
    at.selectbox(key="classwise_browse_layer").set_value(sample.layer_names[1]).run()
    at.button(key="classwise_browse").click().run()
    ok(at)
    assert at.title[0].value == "Browse the test set"
    expected = browse_table(sample, Query(**{**browser.heatmap_query("blue", sample.layer_names[1]).__dict__,
                                              "score": "mahalanobis"}))  # fmt: skip
    assert at.main.dataframe[0].value["test index"].tolist() == expected["test index"].tolist()
    assert at.selectbox(key="browse_class").value == "blue" and at.radio(key="browse_order").value == "desc"

    at.switch_page("pages/depth-analytics.py").run()
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
    fresh.switch_page("pages/depth-analytics.py").run()
    ok(fresh)
    assert fresh.slider(key="depth_threshold").value == pytest.approx(0.75)
    assert fresh.selectbox(key="depth_task").value == task
    shown = browse_table(sample, browser.detection_query("mahalanobis"))  # what a detection row opens
    assert shown["suspicion"].is_monotonic_decreasing and len(shown) == len(sample.table)


def test_browse_page_on_a_bundled_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    setting_dir = BUNDLED_SETTINGS[0]
    monkeypatch.setenv("LAYA_MODELS", str(BUNDLED))
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    at.switch_page("pages/browse-test-set.py").run()
    ok(at)
    assert len(at.main.dataframe[0].value) == 1000 and len(at.main.image) == 40
    at.radio(key="browse_outcome").set_value("wrong").run()
    sample = Sample.load(Path(at.sidebar.radio[1].value))
    assert len(at.main.dataframe[0].value) == int((~sample.table["correct"]).sum())
    assert setting_dir.exists()
