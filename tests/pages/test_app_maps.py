"""The per-layer spatial maps in the dashboard (AppTest): Inspect, Compare and Class-wise show laya's numbers for a
bundled CNN, n/a for the MLP, and the same numbers when the checkpoint runs in a sandboxed worker."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from laya.analysis.head.explain import Explanation
from laya.analysis.head.spatial import sample_class_maps
from laya.app.catalog import describe, example_images
from laya.app.map_plots import UNIT, no_maps_note
from laya.app.text import unplain
from laya.model.checkpoint import load_checkpoint
from pages.common import loading
from tests.pages.test_app import array, assert_ok, charts, expected, start

MODELS = Path(__file__).resolve().parents[2] / "models"
CNN = MODELS / "cifar10-cnn"


def pick(at: AppTest, setting: Path, head: str) -> AppTest:
    group = describe(setting / "laya").group
    at.sidebar.selectbox(key="model_group").set_value(group).run()
    at.sidebar.radio(key=f"model_head_{group}").set_value(str(setting / head)).run()
    assert_ok(at)
    return at


def maps_chart(at: AppTest) -> dict:
    """The map grid: the chart whose traces are images and heatmaps on one colour axis."""
    found = [c for c in charts(at) if c["data"] and {t["type"] for t in c["data"]} <= {"image", "heatmap"}]
    assert len(found) == 1, [t["type"] for c in charts(at) for t in c["data"]][:10]
    return found[0]


def class_chart(at: AppTest) -> dict:
    """Class-wise's mean map grid (the page has other heatmaps: the class x layer profile, the confusion matrix)."""
    return next(c for c in charts(at) if c["layout"].get("title", {}).get("text", "").startswith("Mean map"))


def heatmaps(chart: dict) -> list[dict]:
    return [t for t in chart["data"] if t["type"] == "heatmap"]


def assert_maps_show(chart: dict, e: Explanation, class_name: str) -> None:
    """Every layer's panel: the layer's logit term (the bar) and its map's sum + offset, equal within 1e-5."""
    c = e.spatial.classes[0].tolist().index(e.classes.index(class_name))
    traces = heatmaps(chart)
    assert [t["meta"]["layer"] for t in traces] == list(e.layer_names)
    for i, trace in enumerate(traces):
        custom = array(trace["customdata"]).reshape(*array(trace["z"]).shape, 5)
        assert custom[..., 3] == pytest.approx(float(e.spatial.terms[0, i, c]), abs=1e-5)
        assert custom[..., 1] == pytest.approx(float(e.spatial.terms[0, i, c]), abs=1e-5)
        assert custom[..., 0].sum() == pytest.approx(float(e.spatial.maps[i][0, c].sum()), abs=1e-6)
    assert {t["coloraxis"] for t in traces} == {"coloraxis"}
    assert chart["layout"]["coloraxis"]["cmin"] == -chart["layout"]["coloraxis"]["cmax"]


def test_inspect_shows_the_cnn_maps_for_the_predicted_and_a_chosen_class(monkeypatch: pytest.MonkeyPatch) -> None:
    at = pick(start(monkeypatch, MODELS), CNN, "laya")
    e = expected(CNN, "laya", example_images(CNN / "laya")[0].read_bytes())
    box = at.selectbox(key="inspect_map_class")
    assert box.value == e.label and box.options[:2] == [e.classes[c] for c in e.spatial.classes[0, :2].tolist()]
    chart = maps_chart(at)
    assert_maps_show(chart, e, e.label)
    assert chart["layout"]["coloraxis"]["colorbar"]["title"]["text"] == UNIT
    other = box.options[2]
    box.set_value(other).run()
    assert_maps_show(maps_chart(at), e, other)
    at.checkbox(key="inspect_map_weighted").uncheck().run()
    assert_ok(at)
    assert maps_chart(at)["layout"]["coloraxis"]["colorbar"]["title"]["text"] == f"{UNIT} ÷ layer weight"
    assert any("Unweighted" in c.value for c in at.caption)


def test_every_maps_view_says_na_for_the_mlp(monkeypatch: pytest.MonkeyPatch) -> None:
    at = pick(start(monkeypatch, MODELS), MODELS / "fashion-mnist-mlp", "concat")
    for page in ("pages/inspect-input.py", "pages/compare-heads.py"):
        at.switch_page(page).run()
        assert_ok(at)
        assert [unplain(i.value) for i in at.info] == [no_maps_note([])]  # the note, and no grid, no class box
        assert not [c for c in charts(at) if any(t["type"] == "heatmap" for t in c["data"])]
        assert not [s for s in at.selectbox if s.key and s.key.endswith("_map_class")]
    at.switch_page("pages/class-depth.py").run()
    at.toggle(key="classwise_maps").set_value(True).run()
    assert_ok(at)
    assert [unplain(i.value) for i in at.info if "spatial" in i.value] == [
        "Mean spatial maps: n/a for every layer. No layer of this model averages a feature map (an MLP's layers, "
        "CLS-token layers; their gradient × activation approximations are not averaged)."
    ]


def test_compare_shows_one_grid_per_head_on_one_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    at = pick(start(monkeypatch, MODELS), CNN, "laya")
    at.switch_page("pages/compare-heads.py").run()
    assert_ok(at)
    chart = maps_chart(at)
    traces = heatmaps(chart)
    assert len(traces) == 4 * 5 and {t["coloraxis"] for t in traces} == {"coloraxis"}
    top = max(np.abs(array(t["z"])).max() for t in traces)
    assert chart["layout"]["coloraxis"]["cmax"] == pytest.approx(top)
    data = example_images(CNN / "laya")[0].read_bytes()
    label = at.selectbox(key="compare_map_class").value
    for head in ("lastlayer", "concat", "scalarmix", "laya"):
        e = expected(CNN, head, data)
        rows = {"LastLayer": "lastlayer", "Concat": "concat", "ScalarMix": "scalarmix", "LAYA": "laya"}
        mine = {"data": [t for t in traces if rows[t["meta"]["row"]] == head], "layout": chart["layout"]}
        assert_maps_show(mine, e, label)


def test_classwise_shows_mean_maps_with_n(monkeypatch: pytest.MonkeyPatch) -> None:
    at = pick(start(monkeypatch, MODELS), CNN, "concat")
    at.switch_page("pages/class-depth.py").run()
    assert_ok(at)
    at.toggle(key="classwise_maps").set_value(True).run()
    assert_ok(at)
    chart = class_chart(at)
    maps = sample_class_maps(load_checkpoint(CNN / "concat"))
    rows = [a["text"] for a in chart["layout"]["annotations"] if "(n=" in a["text"]]
    classes = load_checkpoint(CNN / "concat").meta.classes
    assert rows == [f"{c} (n={n})" for c, n in zip(classes, maps.counts[0].tolist())] and sum(maps.counts[0]) == 1000
    first = heatmaps(chart)[0]
    assert array(first["z"]).sum() * 32 * 32 / array(first["z"]).size == pytest.approx(
        float(maps.maps[0][0, 0].sum()), abs=1e-6
    )


def test_maps_through_a_sandboxed_worker_equal_the_in_process_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYA_SANDBOX", "all")  # every checkpoint, bundled ones too, runs in a worker

    def in_process(*args, **kwargs):
        raise AssertionError("ran in the server process")

    monkeypatch.setattr(loading, "explain_bytes", in_process)
    monkeypatch.setattr(loading, "sample_class_maps", in_process)
    at = pick(start(monkeypatch, MODELS), CNN, "scalarmix")
    e = expected(CNN, "scalarmix", example_images(CNN / "scalarmix")[0].read_bytes())
    assert_maps_show(maps_chart(at), e, e.label)
    at.switch_page("pages/class-depth.py").run()
    at.toggle(key="classwise_maps").set_value(True).run()
    assert_ok(at)
    chart = class_chart(at)
    maps = sample_class_maps(load_checkpoint(CNN / "scalarmix"))
    sums = [t["meta"]["sum"] for t in heatmaps(chart)]
    terms = maps.terms[0].T.flatten().tolist()  # traces go layer by layer, class by class
    assert sums == pytest.approx(terms, abs=1e-5)


@pytest.mark.parametrize("page", ["pages/inspect-input.py", "pages/compare-heads.py", "pages/class-depth.py"])
def test_html_exports_include_the_map_grid(monkeypatch: pytest.MonkeyPatch, page: str) -> None:
    import pages.common
    from laya.app.export import html_report

    calls = []
    monkeypatch.setattr(pages.common, "report_button", lambda *args: calls.append(args))
    at = pick(start(monkeypatch, MODELS), CNN, "laya")
    at.switch_page(page).run()
    if page == "pages/class-depth.py":
        at.toggle(key="classwise_maps").set_value(True).run()
    assert_ok(at)
    title, sections, _, subtitle, source = calls[-1]
    heading = "Where each class was looked at" if page == "pages/class-depth.py" else "Where each layer looked"
    figure = next(f for h, f in sections if h.startswith(heading))
    shown = class_chart(at) if page == "pages/class-depth.py" else maps_chart(at)
    assert [t.meta for t in figure.data if t.type == "heatmap"] == [t["meta"] for t in heatmaps(shown)]
    html = html_report(title, sections, subtitle, source)
    assert heading in html and '"type":"heatmap"' in html.replace(" ", "")


def test_inspect_computes_the_vits_approximate_maps_only_once_their_section_is_opened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from laya.analysis.head import explain as explain_module

    loading._explain.clear()  # explanations cached by earlier tests in this process would answer without a call
    asked = []
    original = explain_module.explain
    monkeypatch.setattr(explain_module, "explain", lambda *a, **k: asked.append(k.get("approximate")) or original(*a, **k))
    at = pick(start(monkeypatch, MODELS), MODELS / "cifar10-vit", "laya")
    (section,) = [e for e in at.expander if "CLS-token layers" in e.label]
    assert "one more forward and 6 backward passes" in section.label
    assert not [c for c in charts(at) if any(t["type"] == "heatmap" for t in c["data"])]  # closed: none computed
    assert True not in asked
    at.session_state["inspect_approximate_maps"] = True  # the user opens the section
    at.run()
    assert_ok(at)
    assert {t["meta"]["kind"] for t in heatmaps(maps_chart(at))} == {"approximate"} and asked[-1] is True
    opened = [unplain(c.value) for c in at.caption if unplain(c.value).startswith("Model time of this view: ")]
    assert len(opened) == 2 and "maps " in opened[0]  # the opened maps' own cost, then the page's default view's
    calls = len(asked)
    at.selectbox(key="inspect_map_class").set_value(at.selectbox(key="inspect_map_class").options[1]).run()
    assert_ok(at)
    assert len(asked) == calls  # another class: the cached approximation, no new backward pass


def test_compare_defers_the_vits_approximate_maps_until_their_section_is_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    at = pick(start(monkeypatch, MODELS), MODELS / "cifar10-vit", "laya")
    at.switch_page("pages/compare-heads.py").run()
    assert_ok(at)
    (section,) = [e for e in at.expander if "CLS-token layers" in e.label]
    assert "backward passes per head shown" in section.label
    assert not [c for c in charts(at) if any(t["type"] == "heatmap" for t in c["data"])]  # closed: none computed
    at.session_state["compare_approximate_maps"] = True  # the user opens the section
    at.run()
    assert_ok(at)
    rows = {t["meta"]["row"] for t in heatmaps(maps_chart(at)) if t["meta"]["kind"] == "approximate"}
    assert rows == {"LastLayer", "Concat", "ScalarMix", "LAYA"}
