"""A link round trip through AppTest: the URL a view writes reopens the same view in a fresh session, each
checkpoint of a group by its own link, the class-wise page's class from its link (laya.app.links on the pages)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from laya.app.catalog import example_images

APP = Path(__file__).resolve().parents[2] / "app.py"


@pytest.fixture(autouse=True)
def _roots(monkeypatch: pytest.MonkeyPatch, tiny_models: Path, image_folder: Path) -> None:
    monkeypatch.setenv("LAYA_MODELS", str(tiny_models))
    monkeypatch.setenv("LAYA_PATH_ROOTS", str(image_folder))


def test_link_round_trip_in_a_fresh_session(tiny_models: Path) -> None:
    """Set a view by hand, read the URL it writes, open that URL in a new session: the same view."""
    examples = [p.name for p in example_images(tiny_models / "colours-mlp" / "laya")]
    first = AppTest.from_file(str(APP), default_timeout=60).run()
    first.sidebar.radio[1].set_value(str(tiny_models / "colours-mlp" / "concat")).run()
    first.selectbox(key="inspect_example").set_value(examples[2]).run()
    first.radio(key="inspect_mode_concat").set_value("mean").run()
    first.multiselect(key="inspect_posthoc").set_value(["saliency"]).run()
    assert not first.exception and not first.error
    params = {k: first.query_params[k][0] if isinstance(first.query_params[k], list) else first.query_params[k]
              for k in first.query_params}  # fmt: skip
    assert params["model"] == "colours-mlp/concat" and params["example"] == examples[2]
    assert params["mode"] == "mean" and params["posthoc"] == "saliency"

    second = AppTest.from_file(str(APP), default_timeout=60)
    for key, value in params.items():
        second.query_params[key] = value
    second.run()
    assert not second.exception and not second.error
    assert second.sidebar.radio[1].value == str(tiny_models / "colours-mlp" / "concat")
    assert second.selectbox(key="inspect_example").value == examples[2]
    assert second.radio(key="inspect_mode_concat").value == "mean"
    assert second.multiselect(key="inspect_posthoc").value == ["saliency"]
    assert [m.value for m in second.main.metric] == [m.value for m in first.main.metric]


def test_two_checkpoints_of_one_group_get_distinct_links(tiny_models: Path, tmp_path: Path, monkeypatch) -> None:
    """Same dataset, backbone and head (two seeds, say): each link reopens its own checkpoint."""
    import shutil

    models = tmp_path / "models"
    shutil.copytree(tiny_models / "colours-mlp", models / "colours-mlp")
    shutil.copytree(models / "colours-mlp" / "laya", models / "colours-mlp" / "laya-seed1")
    monkeypatch.setenv("LAYA_MODELS", str(models))
    first = AppTest.from_file(str(APP), default_timeout=60).run()
    twins = [str(models / "colours-mlp" / "laya"), str(models / "colours-mlp" / "laya-seed1")]
    assert sum(o.startswith("LAYA") for o in first.sidebar.radio[1].options) == 2  # one group, two LAYA heads
    links = {}
    for path in twins:
        first.sidebar.radio[1].set_value(path).run()
        links[path] = first.query_params["model"]
    assert sorted(links.values()) == ["colours-mlp/laya", "colours-mlp/laya-seed1"]
    for path, model in links.items():
        again = AppTest.from_file(str(APP), default_timeout=60)
        again.query_params["model"] = model
        again.run()
        assert not again.exception and again.sidebar.radio[1].value == path


def test_classwise_class_from_link(tiny_models: Path) -> None:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["class"] = "red"
    at.run()
    at.switch_page("pages/class-depth.py").run()
    assert not at.exception and at.selectbox(key="classwise_class").value == "red"
