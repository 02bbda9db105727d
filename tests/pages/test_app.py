"""The dashboard through Streamlit's AppTest: every page renders, and the numbers shown are laya's own.

Each test drives ``app.py`` (``st.navigation`` over ``pages/``) on the ``tiny_models`` fixture:
uploads (valid and hostile), example picks, ablation modes, post-hoc methods, head comparison,
heatmap toggles, live recomputation and the model sources of the sidebar; the last test runs every
page on each bundled setting in ``models/``.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

from laya.analysis.depth.fit import DepthFit
from laya.analysis.depth.input_depth import input_depth
from laya.analysis.depth.report import DepthOptions, run_depth
from laya.analysis.head.explain import Explanation, explain
from laya.analysis.head.profiles import SUBSETS, heatmap_table
from laya.analysis.report import Report
from laya.app import (
    classwise_views,
    deploy,
    depth_views,
    explanation_views,
    faithfulness_views,
    labels,
    palette,
    plots,
    seed_views,
)
from laya.app.catalog import describe, example_images
from laya.app.numbers import ci_text, number_text
from laya.app.text import unplain
from laya.app.uploads import upload_store
from laya.app.verdicts import exit_verdict, faithfulness_verdict, load_per_input
from laya.data.images import MAX_BYTES, ImageError, load_image_tensor, open_image
from laya.model.checkpoint import META_FILE, WEIGHTS_FILE, load_checkpoint
from laya.training.suite import CLASS_PROFILES_FILE, class_profiles_table
from pages.common import ANYWAY_LABEL
from tests.hostile import CASES, hostile_record, write_nan_weights, write_scaled_weights

APP = Path(__file__).resolve().parents[2] / "app.py"
HEADS = ("lastlayer", "concat", "scalarmix", "laya")
TITLES = ("LastLayer", "Concat", "ScalarMix", "LAYA")


@pytest.fixture(autouse=True)
def _data_root(monkeypatch: pytest.MonkeyPatch, image_folder: Path) -> None:
    """The tiny models' ImageFolder dataset is a shared data root (checkpoints may only read datasets inside one)."""
    monkeypatch.setenv("LAYA_PATH_ROOTS", str(image_folder))


def start(monkeypatch: pytest.MonkeyPatch, models: Path) -> AppTest:
    """The dashboard on ``models``, after its first run (the Inspect page, LAYA head, first example)."""
    monkeypatch.setenv("LAYA_MODELS", str(models))
    return AppTest.from_file(str(APP), default_timeout=60).run()


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch, tiny_models: Path) -> AppTest:
    at = start(monkeypatch, tiny_models)
    assert not at.exception
    return at


def expected(setting: Path, head: str, data: bytes, **kwargs) -> Explanation:
    """laya's own explanation of ``data`` by ``head`` (what the dashboard must display)."""
    checkpoint = load_checkpoint(setting / head)
    spec = checkpoint.meta.input
    return explain(checkpoint, load_image_tensor(data, spec.channels, spec.source_size), **kwargs)


def charts(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def array(value: list | dict) -> np.ndarray:
    """A plotly JSON array: a plain list, or plotly's typed-array encoding ``{"dtype", "bdata", "shape"}``."""
    if isinstance(value, dict):
        shape = [int(n) for n in str(value.get("shape", "-1")).split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).reshape(shape)
    return np.array(value, dtype=float)


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def assert_inspect_shows(at: AppTest, e: Explanation) -> None:
    """Prediction, confidence, LOO table, per-input faithfulness and the score chart equal ``e``'s."""
    assert_ok(at)
    assert [unplain(m.value) for m in at.main.metric] == [e.label, f"{e.confidence:.1%}"]
    table = at.main.dataframe[0].value
    assert list(table["layer"]) == list(e.layer_names)
    assert list(table["LOO drop"]) == [number_text(v) for v in e.drops.tolist()]  # significant digits, never 0.0000000002
    assert list(table["prediction after removal"]) == [e.classes[i] for i in e.loo.predictions_after[0].tolist()]
    assert list(table["label flips"]) == e.loo.flipped[0].tolist()
    for method, scores in e.scores.items():
        assert list(table[labels.method_label(method)]) == [number_text(v) for v in scores.double().tolist()]
    faith = unplain(at.main.table[0].value).reset_index()  # shown whole (st.table), never clipped
    assert list(faith["method"]) == [labels.method_label(m) for m in e.scores]
    assert [float(v) for v in faith["Deletion@1"]] == pytest.approx([e.deletion_at_1(m) for m in e.scores], abs=5e-4)  # number_text: 3 digits
    spearman = [e.spearman(m) for m in e.scores]  # shown with its n: "... over L layers", never a bare number
    shown = faith[f"Spearman ρ(score, LOO drop) over {len(e.layer_names)} layers"]
    assert [None if v in ("–", "n/a") else float(v) for v in shown] == pytest.approx(spearman, abs=1e-3)
    assert not faith.isin(["None", "nan"]).any().any()
    score_chart = charts(at)[1]  # [0] is the top-k chart; one figure: scores on top, LOO drops below
    methods = list(e.scores)
    for i, method in enumerate(methods):
        assert list(array(score_chart["data"][i]["customdata"])) == pytest.approx(e.scores[method].tolist())
        assert score_chart["data"][i]["yaxis"] == "y"
    drops = score_chart["data"][len(methods)]
    assert list(array(drops["y"])) == pytest.approx(e.drops.tolist()) and drops["yaxis"] == "y2"
    layout = score_chart["layout"]
    assert layout["yaxis2"]["title"]["text"] == "LOO drop in p(predicted)"  # one unit per axis
    units = {plots.method_unit(m) for m in methods}
    assert layout["yaxis"]["title"]["text"] == (units.pop() if len(units) == 1 else plots.NORMALISED_AXIS)


def png(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def test_every_page_renders(app: AppTest) -> None:
    titles = {}
    for page in ("pages/inspect-input.py", "pages/compare-heads.py",
                 "pages/class-depth.py", "pages/faithfulness-overview.py"):
        app.switch_page(page).run()
        assert_ok(app)
        assert charts(app), f"{page} shows no chart"
        titles[page] = app.title[0].value
    assert titles == {
        "pages/inspect-input.py": "Inspect an input",
        "pages/compare-heads.py": "Compare heads",
        "pages/class-depth.py": "Class-wise depth patterns",
        "pages/faithfulness-overview.py": "Faithfulness overview",
    }
    sidebar = app.sidebar.radio[1]
    assert sidebar.value.endswith("laya")  # LAYA is preselected
    assert [o.split(" · ")[0] for o in sidebar.options] == list(TITLES)


def test_inspect_default_example_and_picks(app: AppTest, setting: Path) -> None:
    examples = example_images(setting / "laya")
    assert app.selectbox(key="inspect_example").options == [p.name for p in examples]
    assert_inspect_shows(app, expected(setting, "laya", examples[0].read_bytes()))
    app.selectbox(key="inspect_example").set_value(examples[2].name).run()
    assert_inspect_shows(app, expected(setting, "laya", examples[2].read_bytes()))
    assert [b.label for b in app.download_button] == ["Download CSV", "Download JSON", "Download HTML report"]


def test_inspect_upload_modes_and_posthoc(app: AppTest, setting: Path) -> None:
    source = Image.open(example_images(setting / "laya")[1])
    data = png(source.convert("P"), "GIF")  # palette GIF: any mode and format decodes like training images
    app.file_uploader(key="inspect_upload").set_value(("green.gif", data, "image/gif")).run()
    assert_inspect_shows(app, expected(setting, "laya", data))
    assert list(map(unplain, app.radio(key="inspect_mode_laya").options)) == [
        labels.mode_label(m) for m in ["mean", "zero_input", "zero", "renormalise"]
    ]
    app.radio(key="inspect_mode_laya").set_value("renormalise").run()
    app.multiselect(key="inspect_posthoc").set_value(["integrated_gradients", "saliency"]).run()
    e = expected(setting, "laya", data, mode="renormalise", posthoc=("integrated_gradients", "saliency"))
    assert_inspect_shows(app, e)
    ig_label = labels.method_label("integrated_gradients")  # names its baseline (issue 18)
    assert ig_label in app.main.dataframe[0].value.columns
    assert len(charts(app)) == 2  # top-k + one layer-score figure for every method
    scores = charts(app)[1]
    assert scores["layout"]["yaxis"]["title"]["text"] == plots.NORMALISED_AXIS  # α and IG: different units
    ig = next(t for t in scores["data"] if t["name"] == ig_label)
    raw = e.scores["integrated_gradients"].double().numpy()
    assert np.abs(array(ig["y"])).max() == pytest.approx(1.0)
    assert list(array(ig["y"])) == pytest.approx((raw / np.abs(raw).max()).tolist())
    assert ig["marker"]["color"] == palette.ATTRIBUTION_POSTHOC


def test_posthoc_scores_are_marked_for_heads_without_intrinsic(app: AppTest, setting: Path) -> None:
    app.sidebar.radio[1].set_value(str(setting / "lastlayer")).run()
    assert "post-hoc" in app.warning[0].value
    assert list(map(unplain, app.radio(key="inspect_mode_lastlayer").options)) == [
        labels.mode_label(m) for m in ["mean", "zero_input", "zero"]
    ]
    e = expected(setting, "lastlayer", example_images(setting / "laya")[0].read_bytes())
    assert e.intrinsic is None
    assert_inspect_shows(app, e)
    assert charts(app)[1]["data"][0]["name"] == "Integrated Gradients (baseline: training mean) (post-hoc)"
    assert charts(app)[1]["layout"]["yaxis"]["title"]["text"] == "contribution to p(predicted)"



def _titled(at: AppTest, title: str) -> list[dict]:
    return [c for c in charts(at) if unplain(c["layout"].get("title", {}).get("text", "")) == title]


@pytest.mark.parametrize("sandbox", ["", "all"], ids=["in-process", "sandboxed"])
def test_block_ablation_is_shown_post_hoc_for_lastlayer_heads(
    app: AppTest, setting: Path, sandbox: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A LastLayer head shows its post-hoc block ablation on request (a toggle naming the L + 1 passes it costs),
    on Inspect, Depth analytics and Compare, the same bars computed in a sandboxed worker (an upload's route); an
    attached network's own head shows it at once (tests/training/test_attach.py)."""
    monkeypatch.setenv("LAYA_SANDBOX", sandbox)
    from laya.analysis.block_ablation import ablate_bytes
    from laya.app.depth_plots import BLOCK_ABLATION_TITLE

    assert not _titled(app, BLOCK_ABLATION_TITLE)  # LAYA has α of its own
    app.sidebar.radio[1].set_value(str(setting / "lastlayer")).run()
    assert_ok(app)
    assert not _titled(app, BLOCK_ABLATION_TITLE), "not computed before it is asked for"
    [toggle] = [t for t in app.toggle if t.key == "inspect_block_ablation_on"]
    assert "+4 backbone passes" in toggle.label  # 3 layers + 1
    toggle.set_value(True).run()
    examples = [p.read_bytes() for p in example_images(setting / "lastlayer")]
    result = ablate_bytes(load_checkpoint(setting / "lastlayer"), examples[0], examples)
    [chart] = _titled(app, BLOCK_ABLATION_TITLE)
    assert list(array(chart["data"][0]["y"])) == pytest.approx(result.drops[0].tolist(), abs=1e-9)
    assert any("Post hoc" in c.value and f"{len(examples)} bundled example images" in c.value for c in app.caption)
    for page, key in (("depth-analytics", "depth_block_ablation_on"), ("compare-heads", None)):
        app.switch_page(f"pages/{page}.py").run()
        assert_ok(app)
        for t in app.toggle:
            if t.key == key or (key is None and str(t.key).startswith("compare_block_ablation_")):
                t.set_value(True)
        app.run()
        assert len(_titled(app, BLOCK_ABLATION_TITLE)) == 1, page  # Compare: the LastLayer head's, beside LAYA's α
    assert len(app.get("plotly_chart")) >= 3


@pytest.mark.parametrize("sandbox", ["", "all"], ids=["in-process", "sandboxed"])
def test_a_broken_depth_fit_is_named_on_the_depth_page(
    tiny_models: Path, tmp_path: Path, sandbox: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored depth fit that cannot be used costs this input's depth views their probes and statistics, and the
    page says why, naming the file, whether the server's process read it or a sandboxed worker (issue 43: from a
    worker it said nothing); the rest of the page is drawn."""
    monkeypatch.setenv("LAYA_SANDBOX", sandbox)
    monkeypatch.setenv("LAYA_MODELS", str(tmp_path / "models"))
    shutil.copytree(tiny_models / "colours-mlp", tmp_path / "models" / "colours-mlp")
    head = tmp_path / "models" / "colours-mlp" / "laya"
    (head / "depth_fit.json").write_text("[]")
    (head / "depth_fit.safetensors").write_bytes(b"\x10\x00" * 40)
    at = AppTest.from_file(str(APP), default_timeout=300).run()
    at.switch_page("pages/depth-analytics.py").run()
    assert_ok(at)
    assert [unplain(w.value) for w in at.warning] == [
        "The stored depth fit cannot be used (depth_fit.json: (the file) = []: must be a JSON object): shown without "
        "its probes and statistics."]  # fmt: skip
    assert len(charts(at)) == 3  # attribution, readout path, lens: LAYA reads out with its own classifier


def bad_upload(kind: str) -> bytes:
    """Hostile or broken "images" of each kind the Inspect page must refuse with laya's message."""
    if kind == "empty":
        return b""
    if kind == "not an image":
        return b"name,score\nblue,1\n"
    if kind == "truncated":
        valid = png(Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)))
        return valid[: len(valid) // 2]
    if kind == "image bomb":
        return png(Image.new("L", (6000, 6000)))  # 36 megapixels in ~40 KB
    return b"\x89PNG" + bytes(MAX_BYTES)  # too large


@pytest.mark.parametrize("kind", ["empty", "not an image", "truncated", "image bomb", "too large"])
def test_bad_uploads_show_the_image_error(app: AppTest, setting: Path, kind: str) -> None:
    data = bad_upload(kind)
    with pytest.raises(ImageError) as laya_error:
        open_image(data)
    app.file_uploader(key="inspect_upload").set_value((f"{kind}.png", data, "image/png")).run()
    assert not app.exception
    same = re.compile(r" at 0x[0-9a-f]+")  # PIL's message may name the (per-call) BytesIO object
    assert len(app.error) == 1 and same.sub("", str(laya_error.value)) in same.sub("", unplain(app.error[0].value))
    assert not app.main.metric  # nothing half-rendered below the error
    app.file_uploader(key="inspect_upload").set_value(None).run()  # the app keeps working
    assert_inspect_shows(app, expected(setting, "laya", example_images(setting / "laya")[0].read_bytes()))


def test_compare_heads(app: AppTest, setting: Path) -> None:
    app.switch_page("pages/compare-heads.py").run()
    assert_ok(app)
    assert app.multiselect(key="compare_paths").value == [str(setting / h) for h in HEADS]
    assert list(map(unplain, app.radio(key="compare_mode").options)) == [
        labels.mode_label(m) for m in ["mean", "zero_input", "zero"]
    ]  # modes every head supports
    data = example_images(setting / "laya")[2].read_bytes()
    app.file_uploader(key="compare_upload").set_value(("red.png", data, "image/png")).run()
    app.radio(key="compare_mode").set_value("mean").run()
    assert_ok(app)
    explanations = [expected(setting, h, data, mode="mean") for h in HEADS]
    assert [m.value for m in app.main.metric] == [v for e in explanations for v in (e.label, f"{e.confidence:.1%}")]
    table = unplain(app.main.table[0].value).T.reset_index(names="head")  # shown with one column per head
    reports = [Report.load(setting / h) for h in HEADS]
    assert list(table["head"]) == list(TITLES)
    assert list(table["layer scores"]) == [labels.method_label(e.primary) for e in explanations]
    assert [float(v) for v in table["max LOO drop"]] == pytest.approx([float(e.drops.max()) for e in explanations], rel=5e-3)  # number_text: 3 significant digits
    assert table["confidence"].tolist() == [f"{100 * e.confidence:.1f}%" for e in explanations]
    assert table["Spearman ρ on this input"].str.contains("over 3 layers|n/a").all()
    assert not table.isin(["None", "nan"]).any().any()
    assert table["test accuracy [95% CI]"].tolist() == [ci_text(r.interval("accuracy"), 4) for r in reports]
    assert table.iloc[:, -1].tolist() == [faithfulness_views.headline_text(r) for r in reports]
    assert table.iloc[0, -1] == "n/a (one informative layer)"  # LastLayer: never 1.000
    figure = charts(app)[0]  # scores on top, LOO drops below, one column per head
    drops = [t for t in figure["data"] if t["name"] == plots.DROP_AXIS]
    scores = [t for t in figure["data"] if t["marker"]["color"] in (palette.ATTRIBUTION, palette.ATTRIBUTION_POSTHOC)]
    assert len(drops) == 4 and len(scores) == 4 and "yaxis8" in figure["layout"]
    assert list(array(drops[3]["y"])) == pytest.approx(explanations[3].drops.tolist())
    assert {t["yaxis"] for t in drops} == {"y5", "y6", "y7", "y8"} and {t["yaxis"] for t in scores} == {"y", "y2", "y3", "y4"}
    assert figure["layout"]["yaxis"]["title"]["text"] == plots.NORMALISED_AXIS  # α (weights) and IG (probability)
    assert figure["layout"]["yaxis5"]["title"]["text"] == plots.DROP_AXIS
    assert [a["text"] for a in figure["layout"]["annotations"]] == list(TITLES)  # one line each: nothing cut off
    app.multiselect(key="compare_paths").set_value([str(setting / "laya"), str(setting / "scalarmix")]).run()
    assert_ok(app)
    assert list(map(unplain, app.radio(key="compare_mode").options)) == [
        labels.mode_label(m) for m in ["mean", "zero_input", "zero", "renormalise"]
    ]
    assert len(app.main.metric) == 4


def test_classwise_heatmap_toggles_and_drilldown(app: AppTest, setting: Path) -> None:
    app.switch_page("pages/class-depth.py").run()
    assert_ok(app)
    report = Report.load(setting / "laya")
    for kind in ("scores", "loo"):
        app.radio(key="classwise_kind").set_value(kind).run()
        for subset in SUBSETS:
            app.radio(key="classwise_subset").set_value(subset).run()
            assert not app.exception
            heatmap = charts(app)[0]["data"][0]
            table = heatmap_table(report.class_layer_profile(kind), subset)
            assert np.allclose(array(heatmap["z"]), table.to_numpy(dtype=float), equal_nan=True)
            counts = array(heatmap["customdata"])[:, :, 1]
            assert (counts == heatmap_table(report.class_layer_profile(kind), subset, "count").to_numpy()).all()
    app.radio(key="classwise_subset").set_value("all").run()
    app.selectbox(key="classwise_class").set_value("green").run()
    bars = charts(app)[1]["data"][0]
    green = classwise_views.class_profile(report.class_layer_profile("scores"), "green")
    assert list(array(bars["y"])) == pytest.approx(green["mean"].tolist())
    ci = plots.mean_interval(green, (0.0, 1.0))  # α: a 95% CI of the mean inside [0, 1], not mean ± std
    assert list(array(bars["error_y"]["array"])) == pytest.approx((ci["high"] - green["mean"]).tolist())
    assert (green["mean"] - array(bars["error_y"]["arrayminus"]) >= -1e-12).all()
    heat = charts(app)[0]
    assert heat["data"][0]["colorbar"]["title"]["text"] == "mean LOO drop"  # the kind left on: LOO drops
    outline = heat["layout"]["shapes"][0]  # the class opened below is outlined (its row: no cell clicked)
    row = list(heat["data"][0]["y"]).index("green")
    assert (outline["y0"], outline["y1"]) == (row - 0.5, row + 0.5)
    assert app.download_button[0].label == "Download CSV"
    loo = unplain(app.main.table[0].value).reset_index()
    assert [float(v) for v in loo["mean LOO drop (zero (paper, frozen α))"]] == pytest.approx(
        report.data["loo"]["zero"]["mean_drop"], abs=1e-4
    )
    assert loo["label flips (zero (paper, frozen α))"].str.endswith("%").all()
    assert any("per-seed profiles" in i.value for i in app.info)  # tiny_models has no suite: said, not hidden


def test_classwise_heatmap_is_one_figure_until_a_click(monkeypatch: pytest.MonkeyPatch, tiny_models: Path) -> None:
    """A heatmap click reaches the page only when the run it starts draws the figure that was clicked (Streamlit
    keys a chart's element id by its figure): the outline of the class opened below is there from the page's
    first run (the linked class, else the first), not added on the next run, which dropped the first click."""
    for linked, outlined in ((None, "blue"), ("red", "red")):
        monkeypatch.setenv("LAYA_MODELS", str(tiny_models))
        at = AppTest.from_file(str(APP), default_timeout=60)
        if linked:
            at.query_params["class"] = linked
        at.run()
        at.switch_page("pages/class-depth.py").run()
        assert_ok(at)
        first = at.get("plotly_chart")[0].proto
        at.run()
        second = at.get("plotly_chart")[0].proto
        assert (first.id, first.spec) == (second.id, second.spec)
        heat = json.loads(first.spec)
        row = list(heat["data"][0]["y"]).index(outlined)
        assert [(s["y0"], s["y1"]) for s in heat["layout"]["shapes"]] == [(row - 0.5, row + 0.5)]
        assert at.selectbox(key="classwise_class").value == outlined


def test_classwise_across_seeds(monkeypatch: pytest.MonkeyPatch, tiny_models: Path, tmp_path: Path) -> None:
    """With a suite's ``class_profiles.csv`` (two seeds here), the page shows each seed's profile of the chosen
    class and of all classes, with mean ± std over seeds and the seeds' top layers."""
    models = tmp_path / "models"
    shutil.copytree(tiny_models, models)
    setting = models / "colours-mlp"
    seed0 = class_profiles_table([setting / head for head in HEADS])
    seed1 = seed0.assign(seed=1, mean=seed0["mean"][::-1].to_numpy())  # another pattern for the second seed
    pd.concat([seed0, seed1]).to_csv(setting / CLASS_PROFILES_FILE, index=False)
    app = start(monkeypatch, models)
    app.switch_page("pages/class-depth.py").run()
    app.selectbox(key="classwise_class").set_value("green").run()
    assert_ok(app)
    per_seed = seed_views.seed_profiles(pd.concat([seed0, seed1]), "laya")
    figures = {chart["layout"]["title"]["text"]: chart["data"] for chart in charts(app)}
    green = next(
        data for title, data in figures.items() if title.startswith("green: layer scores") and "per seed" in title
    )
    whole = next(data for title, data in figures.items() if title.startswith("All classes:"))
    for data, profile in (
        (green, per_seed[per_seed["class"] == "green"]),
        (whole, seed_views.seed_global_profile(per_seed)),
    ):
        wide = profile.pivot(index="layer_index", columns="seed", values="mean").sort_index()
        assert [trace["name"] for trace in data] == ["mean over seeds (error bar: min–max)", "seed 0", "seed 1"]
        assert list(array(data[0]["y"])) == pytest.approx(wide.mean(axis=1).tolist())
        low = array(data[0]["y"]) - array(data[0]["error_y"]["arrayminus"])  # the range over seeds, not ± std
        assert list(low) == pytest.approx(wide.min(axis=1).tolist())
        assert list(array(data[2]["y"])) == pytest.approx(wide[1].tolist())
    tables = [t.value for t in app.main.dataframe]
    all_classes = [seed_views.ALL_CLASSES]
    assert any(list(t.columns[:2]) == ["class", "seeds"] and t["class"].tolist() == all_classes for t in tables)
    stability = next(t for t in tables if "seeds agreeing on the top layer" in t.columns)
    assert stability["seeds agreeing on the top layer"].str.fullmatch(r"[12] of 2").all()  # a count, not 0.5
    assert not any("Only one seed" in w.value for w in app.warning)
    app.radio(key="classwise_kind").set_value("loo").run()  # LOO drops: every per-seed figure names the intervention
    mode = labels.mode_label(Report.load(setting / "laya").data["profiles"]["class_loo_mode"])
    seed_titles = [c["layout"]["title"]["text"] for c in charts(app) if "per seed" in c["layout"]["title"]["text"]]
    assert len(seed_titles) == 2 and all(f"drops, {mode} per seed" in t for t in seed_titles)


def test_classwise_recompute_live(app: AppTest) -> None:
    app.switch_page("pages/class-depth.py").run()
    app.number_input(key="classwise_limit").set_value(12).run()
    app.button(key="classwise_recompute").click().run()
    assert_ok(app)
    assert app.success[0].value == "Showing a live evaluation on 12 test inputs."
    assert array(charts(app)[0]["data"][0]["customdata"])[:, 0, 1].sum() == 12  # heatmap cell counts: 12 inputs
    app.button(key="classwise_discard").click().run()
    assert not app.success and not app.exception


def test_classwise_recompute_without_dataset(monkeypatch: pytest.MonkeyPatch, setting: Path) -> None:
    """A short folder: the page shortens a long message in its middle, which a deep temporary path (pytest-xdist's
    adds a level) would fill with the path alone."""
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="laya-"))
    try:
        _classwise_recompute_without_dataset(monkeypatch, setting, tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _classwise_recompute_without_dataset(monkeypatch: pytest.MonkeyPatch, setting: Path, tmp_path: Path) -> None:
    moved = tmp_path / "models" / "elsewhere" / "laya"
    shutil.copytree(setting / "laya", moved)
    meta = json.loads((moved / META_FILE).read_text())
    meta["dataset"] = str(tmp_path / "not-here")
    (moved / META_FILE).write_text(json.dumps(meta))
    at = start(monkeypatch, tmp_path / "models")
    at.switch_page("pages/class-depth.py").run()
    at.button(key="classwise_recompute").click().run()
    assert not at.exception
    assert len(at.error) == 1 and "must be a known dataset" in at.error[0].value and "not-here" in at.error[0].value
    assert "LAYA_PATH_ROOTS" in unplain(at.error[0].value)  # the refusal says how an operator shares a dataset folder
    assert charts(at), "the bundled report is still shown"


def test_faithfulness_overview(app: AppTest, setting: Path) -> None:
    app.switch_page("pages/faithfulness-overview.py").run()
    assert_ok(app)
    report = Report.load(setting / "laya")
    assert app.radio(key="faithfulness_mode_laya").value == "mean"  # the cross-head intervention by default
    app.radio(key="faithfulness_reduction").set_value("magnitude").run()
    verdict = faithfulness_verdict(report, "mean", "magnitude", per_input=load_per_input(setting / "laya"))  # opens the page
    assert "ranked by mean" in verdict and any(m.value == verdict for m in app.main.markdown)
    table = unplain(app.main.table[0].value).reset_index()
    raw = report.data["faithfulness"]["mean"]["magnitude"]
    assert list(table["method"]) == [labels.method_label(m) for m in raw]
    assert table.columns[1] == "Spearman (informative layers) [95% CI]"  # the headline first
    assert table["top-1 agreement [95% CI]"].tolist() == [ci_text(v["top1"]) for v in raw.values()]
    assert not table.isin(["None", "nan"]).any().any()
    comparisons = unplain(app.main.table[1].value).reset_index()
    assert comparisons["p (paired bootstrap)"].str.match(r"^p (< 0\.001|= [01]\.\d{3})$").all()
    methods = charts(app)[0]
    alpha = raw["laya_alpha"]["spearman_eps"]
    assert array(methods["data"][0]["y"])[0] == pytest.approx(alpha["estimate"])
    assert array(methods["data"][0]["error_y"]["array"])[0] == pytest.approx(alpha["high"] - alpha["estimate"])
    assert "intervention mean, magnitude" in methods["layout"]["title"]["text"]
    assert {t["marker"]["color"] for t in methods["data"]} == {palette.FAITHFULNESS}  # never the LOO-drop orange
    curves = charts(app)[1]  # the report holds signed curves only: the title and a caption say so
    assert "signed" in curves["layout"]["title"]["text"] and "magnitude" not in curves["layout"]["title"]["text"]
    assert any("curves below use signed scores, not magnitude" in c.value for c in app.caption)
    signed = report.data["deletion_curves"]["mean"]["signed"]
    for trace, points in zip(curves["data"], signed.values(), strict=True):
        assert list(array(trace["y"])) == pytest.approx([v["estimate"] for v in points])
    app.radio(key="faithfulness_mode_laya").set_value("zero").run()
    assert "differs between heads" in app.warning[0].value  # the heads table falls back to `mean`
    heads = unplain(app.main.table[-1].value).reset_index()
    reports = [Report.load(setting / h) for h in HEADS]
    assert list(heads["head"]) == list(TITLES)
    assert heads.columns[1] == "Spearman (informative layers) [95% CI]"  # the headline first, display names only
    assert not any("_" in c for c in heads.columns) and not heads.isin(["None", "nan"]).any().any()
    assert heads["test accuracy [95% CI]"].tolist() == [ci_text(r.interval("accuracy")) for r in reports]
    assert heads["macro-F1"].tolist() == [f"{r.data['macro_f1']:.3f}" for r in reports]
    assert heads.iloc[0, 1] == "n/a (one informative layer)"
    laya = reports[3].faithfulness_entry(mode="mean", reduction="magnitude")["spearman_eps"]
    assert heads.iloc[3, 1] == ci_text(laya)


def test_checkpoint_from_path_and_upload(app: AppTest, setting: Path) -> None:
    example = example_images(setting / "laya")[0].read_bytes()
    app.sidebar.radio[0].set_value("Path on this machine").run()
    app.sidebar.text_input(key="model_path").input(str(setting / "concat" / META_FILE)).run()
    assert_inspect_shows(app, expected(setting, "concat", example))
    app.sidebar.text_input(key="model_path").input(str(setting / "nothing-here")).run()
    assert not app.exception and unplain(app.sidebar.error[0].value) == deploy.PATH_REFUSED

    app.sidebar.radio[0].set_value("Upload a checkpoint").run()
    uploader = app.sidebar.file_uploader(key="model_upload")
    uploader.set_value([("model.json", (setting / "scalarmix" / META_FILE).read_bytes(), "application/json")]).run()
    assert "upload exactly two files" in app.sidebar.error[0].value and not app.exception
    files = [
        (name, (setting / "scalarmix" / name).read_bytes(), "application/octet-stream")
        for name in (META_FILE, WEIGHTS_FILE)
    ]
    app.sidebar.file_uploader(key="model_upload").set_value(files).run()
    assert not app.exception and "Upload an image" in app.info[0].value  # an uploaded checkpoint has no examples
    app.file_uploader(key="inspect_upload").set_value(("blue.png", example, "image/png")).run()
    assert_inspect_shows(app, expected(setting, "scalarmix", example))
    uploaded = Path(app.session_state["laya_selection"].path)
    assert uploaded.parent == upload_store().root and uploaded.name.startswith("upload-")
    assert sorted(p.name for p in uploaded.iterdir()) == [META_FILE, WEIGHTS_FILE]


def test_damaged_checkpoint_shows_error_and_app_keeps_working(
    monkeypatch: pytest.MonkeyPatch, setting: Path, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    shutil.copytree(setting, models / "colours-mlp")
    weights = models / "colours-mlp" / "concat" / WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:100])
    at = start(monkeypatch, models)
    assert_ok(at)
    at.sidebar.radio[1].set_value(str(models / "colours-mlp" / "concat")).run()
    assert not at.exception and "Cannot load the checkpoint" in at.error[0].value and "sha256" in at.error[0].value
    at.switch_page("pages/compare-heads.py").run()
    assert not at.exception and len(at.error) == 1
    assert len(at.main.metric) == 6  # the three loadable heads still compare
    at.sidebar.radio[1].set_value(str(models / "colours-mlp" / "laya")).run()
    at.switch_page("pages/inspect-input.py").run()
    assert_ok(at)


def test_no_models_explains_how_to_get_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = start(monkeypatch, tmp_path)
    assert not at.exception
    assert "No models found" in at.info[0].value and "python -m laya reproduce" in at.info[0].value


BUNDLED_MODELS = APP.parent / "models"
# the paper's settings (their four heads); the bundled attached network's pages: tests/pages/test_own_pages.py
BUNDLED_SETTINGS = sorted(p.parent.parent for p in BUNDLED_MODELS.glob("*/lastlayer/model.json"))


@pytest.mark.parametrize("setting_dir", BUNDLED_SETTINGS, ids=[p.name for p in BUNDLED_SETTINGS])
def test_every_page_works_on_each_bundled_setting(monkeypatch: pytest.MonkeyPatch, setting_dir: Path) -> None:
    """The shipped checkpoints, not tiny ones: Inspect shows laya's numbers for every head, every page renders."""
    at = start(monkeypatch, BUNDLED_MODELS)
    assert_ok(at)
    group = describe(setting_dir / "laya").group
    at.sidebar.selectbox(key="model_group").set_value(group).run()
    example = example_images(setting_dir / "laya")[0].read_bytes()
    for head in HEADS:
        at.sidebar.radio(key=f"model_head_{group}").set_value(str(setting_dir / head)).run()
        e = expected(setting_dir, head, example)
        assert_inspect_shows(at, e)
        if (setting_dir / head / "depth.json").is_file():  # the input's OOD status, with its false-alarm rate
            status = next(m.value for m in at.main.markdown if "Max softmax" in m.value)
            assert f"Max softmax **{e.confidence:.3f}**" in status and "Best OOD score of this model" in status
            assert "flags 5 % of in-distribution test inputs by design" in status
        cost = unplain(at.main.caption[-1].value)  # what the view cost, stage by stage, as this run measured it
        assert cost.startswith("Model time of this view: ") and "leave-one-out" in cost
        assert ("OOD status" in cost) == (setting_dir / head / "depth.json").is_file()
    for page in ("pages/compare-heads.py", "pages/class-depth.py",
                 "pages/faithfulness-overview.py", "pages/depth-analytics.py"):
        at.switch_page(page).run()
        assert_ok(at)
        assert charts(at), f"{page} shows no chart for {setting_dir.name}"
    if (setting_dir / "laya" / "depth.json").is_file():  # the depth report's global charts and the input's lens
        measured = (setting_dir / "laya" / "exits.json").is_file()  # + the measured early-exit runs' chart
        assert len(charts(at)) == 6 + 1 + measured and at.main.dataframe[-1].value.shape[0] >= 5


def test_hostile_checkpoint_uploads_are_refused_and_the_app_stays_healthy(app: AppTest, setting: Path) -> None:
    """Every case of the hostile corpus, uploaded through the sidebar: a clear error, no traceback, nothing
    written, and the bundled models still work afterwards."""
    good = setting / "laya"
    weights = (good / WEIGHTS_FILE).read_bytes()
    app.sidebar.radio[0].set_value("Upload a checkpoint").run()
    written = set(upload_store().root.iterdir())
    for case in (c for c in CASES if c.on_load):
        record = hostile_record(json.loads((good / META_FILE).read_text()), case)
        files = [(META_FILE, json.dumps(record).encode(), "application/json"), (WEIGHTS_FILE, weights, "application/x")]
        app.sidebar.file_uploader(key="model_upload").set_value(files).run()
        assert not app.exception, (case.name, [e.value for e in app.exception])
        errors = [unplain(e.value) for e in app.sidebar.error]
        assert len(errors) == 1 and case.message in errors[0], (case.name, errors)
        assert "Traceback" not in errors[0] and str(setting) not in errors[0]
    assert set(upload_store().root.iterdir()) == written  # refused uploads never reach the disk
    app.sidebar.radio[0].set_value("Models folder").run()
    example = example_images(good)[0].read_bytes()
    assert_inspect_shows(app, expected(setting, "laya", example))


def test_sidebar_names_its_folder_and_a_sandbox_only_when_one_is_used(
    monkeypatch: pytest.MonkeyPatch, tiny_models: Path
) -> None:
    """The user's own ``--models`` folder is named as such (not "Bundled models"), and a checkpoint of it loads
    in the server's process under "Loading the model…", never "…in a sandboxed worker…"."""
    from streamlit.elements.spinner import SpinnerMixin

    from pages.common import loading

    spinners: list[str] = []
    real = SpinnerMixin.spinner
    def spinner(self, text: str = "", **kwargs):
        spinners.append(text)
        return real(self, text, **kwargs)

    monkeypatch.setattr(SpinnerMixin, "spinner", spinner)
    loading._local_info.clear()
    loading._worker_info.clear()
    at = start(monkeypatch, tiny_models)
    assert_ok(at)
    assert at.sidebar.radio[0].options[0] == f"Models in {tiny_models}"
    assert "Loading the model…" in spinners and not [s for s in spinners if "sandboxed" in s]


def test_deployment_mode_has_no_path_box(monkeypatch: pytest.MonkeyPatch, tiny_models: Path) -> None:
    monkeypatch.setenv("LAYA_ALLOW_PATHS", "0")
    at = start(monkeypatch, tiny_models)
    assert_ok(at)
    assert at.sidebar.radio[0].options == [f"Models in {tiny_models.name}", "Upload a checkpoint"]  # no server path
    assert not [t for t in at.sidebar.text_input if t.key == "model_path"]


def test_unexpected_error_shows_a_short_message_not_a_traceback(
    app: AppTest, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("internal detail /srv/secret")

    with monkeypatch.context() as patch, caplog.at_level("ERROR", logger="laya.app"):
        patch.setattr(explanation_views, "layer_table", broken)  # undone alone: the fixture's LAYA_MODELS stays set
        app.run()
    assert not app.exception
    message = app.error[0].value
    assert message.startswith("Something went wrong on Inspect (RuntimeError)") and "secret" not in message
    incident = re.search(r"incident ([0-9a-f]{8})", message).group(1)
    logged = [r for r in caplog.records if incident in r.getMessage()]
    assert logged and "internal detail /srv/secret" in str(logged[0].exc_info[1])
    app.run()
    assert_ok(app)  # the next run is fine again


def anyway_box(at: AppTest):
    return next(box for box in at.checkbox if box.label == ANYWAY_LABEL)


def test_nan_weights_are_refused_then_loaded_anyway_with_warnings(app: AppTest, setting: Path, tmp_path: Path) -> None:
    write_nan_weights(setting / "laya", tmp_path / "nan")
    files = [(n, (tmp_path / "nan" / n).read_bytes(), "application/octet-stream") for n in (META_FILE, WEIGHTS_FILE)]
    app.sidebar.radio[0].set_value("Upload a checkpoint").run()
    app.sidebar.file_uploader(key="model_upload").set_value(files).run()
    assert not app.exception and "hold NaN or Inf values" in app.error[0].value
    anyway_box(app).check().run()
    example = example_images(setting / "laya")[0].read_bytes()
    app.file_uploader(key="inspect_upload").set_value(("blue.png", example, "image/png")).run()
    assert not app.exception and not app.error
    warnings = [unplain(w.value) for w in app.warning]
    assert any("hold NaN or Inf values" in w for w in warnings)
    assert any(w.startswith("Not finite (NaN or Inf): probabilities") for w in warnings)
    for page in ("pages/depth-analytics.py", "pages/compare-heads.py",
                 "pages/faithfulness-overview.py", "pages/inspect-input.py"):
        app.switch_page(page).run()  # the "load anyway" choice holds on every page, and so do the warnings
        assert not app.exception and not app.error, page
        assert any("hold NaN or Inf values" in w.value for w in app.warning), page
        assert anyway_box(app).value, page
    app.switch_page("pages/depth-analytics.py").run()
    assert any(unplain(w.value).startswith("Not finite (NaN or Inf): logits") for w in app.warning)
    anyway_box(app).uncheck().run()  # undone: refused again
    assert "hold NaN or Inf values" in app.error[0].value


def test_weights_scaled_to_1e18_say_the_output_overflowed_on_every_page_that_shows_probabilities(
    app: AppTest, setting: Path, tmp_path: Path
) -> None:
    """Weights scaled to 1e18 are finite (loaded without a choice), but the logits overflow float32: Inspect,
    Depth analytics, Compare and Activation patching each say so (laya.analysis.overflow) and show no number."""
    dest = write_scaled_weights(setting / "laya", tmp_path / "huge")
    files = [(n, (dest / n).read_bytes(), "application/octet-stream") for n in (META_FILE, WEIGHTS_FILE)]
    app.sidebar.radio[0].set_value("Upload a checkpoint").run()
    app.sidebar.file_uploader(key="model_upload").set_value(files).run()
    example = ("blue.png", example_images(setting / "laya")[0].read_bytes(), "image/png")
    uploads = {"inspect-input": "inspect_upload", "compare-heads": "compare_upload"}  # the others: Inspect's input
    for page in ("inspect-input", "depth-analytics", "compare-heads", "activation-patching"):
        app.switch_page(f"pages/{page}.py").run()  # Depth analytics, patching target: the input Inspect last showed
        if page == "activation-patching":
            app.radio(key="patch_source_kind").set_value("upload").run()
            app.file_uploader(key="patch_source_upload").set_value(example).run()
        elif page in uploads:
            app.file_uploader(key=uploads[page]).set_value(example).run()
        assert not app.exception, page
        errors = [unplain(e.value) for e in app.error]
        assert any(e.startswith("The model's output overflowed: its logits are not finite") for e in errors), page
        assert not app.main.metric and not app.get("plotly_chart"), page  # no NaN prediction, confidence or chart


def assert_depth_shows(at: AppTest, checkpoint_dir: Path, data: bytes) -> None:
    """The attribution bars sum to the model's logits and the metrics are laya's own."""
    assert_ok(at)
    checkpoint = load_checkpoint(checkpoint_dir)
    spec = checkpoint.meta.input
    result = input_depth(checkpoint, load_image_tensor(data, spec.channels, spec.source_size), None)
    assert at.main.metric[0].value == checkpoint.meta.classes[result.prediction]
    bars = [t for t in charts(at)[0]["data"] if t["type"] == "bar"]
    top = charts(at)[0]["data"][-1]  # the diamond: each class's logit
    logits = result.attribution.logits[0]
    assert sum(array(t["y"]) for t in bars) == pytest.approx(array(top["y"]))
    assert array(top["y"])[0] == pytest.approx(float(logits.max()))


def test_depth_page_before_and_after_the_depth_report(
    monkeypatch: pytest.MonkeyPatch, setting: Path, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    shutil.copytree(setting, models / "colours-mlp")
    at = start(monkeypatch, models)
    at.switch_page("pages/depth-analytics.py").run()
    assert at.title[0].value == "Depth analytics" and "python -m laya depth" in at.info[0].value
    example = example_images(models / "colours-mlp" / "laya")[0].read_bytes()
    assert_depth_shows(at, models / "colours-mlp" / "laya", example)
    assert len(charts(at)) == 3  # attribution + readout path + lens (LAYA reads out with its own classifier)

    options = DepthOptions(limit=12, train_limit=30, resamples=20, random_orders=2, refit_steps=3, timing_batch=4)
    for head in ("laya", "concat"):
        run_depth(models / "colours-mlp" / head, options)
    at.sidebar.radio[1].set_value(str(models / "colours-mlp" / "concat")).run()
    at.toggle(key="depth_use_inspect").set_value(False).run()
    data = png(Image.new("RGB", (20, 20), (200, 30, 30)))
    at.file_uploader(key="depth_upload").set_value(("red.png", data, "image/png")).run()
    assert_depth_shows(at, models / "colours-mlp" / "concat", data)
    assert not at.info and len(charts(at)) == 3 + 4  # + exit curve, pruning, class-wise attribution, ROC
    scores = at.main.dataframe[0].value
    assert "multi-layer Mahalanobis" in list(scores["score"]) and (scores["threshold"] != "–").all()
    msp = scores[scores["score"] == "max softmax (baseline)"].iloc[0]  # the probability, flagged below, not −p
    assert msp["rule"] == "flagged below" and 0 < float(msp["value"]) <= 1
    fit = DepthFit.load(models / "colours-mlp" / "concat")
    value = input_depth(load_checkpoint(models / "colours-mlp" / "concat"), load_image_tensor(data, 3, 8), fit).scores
    report = json.loads((models / "colours-mlp" / "concat" / "depth.json").read_text())
    widths = load_checkpoint(models / "colours-mlp" / "concat").model.backbone.layer_dims
    expected_warning = depth_views.mahalanobis_warning(value["mahalanobis"], report["n_train"], widths,
                                                       report["covariance"])
    assert [w.value for w in at.warning if w.value.startswith("Mahalanobis")] == [expected_warning] * bool(expected_warning)
    auroc = at.main.dataframe[-1].value
    assert list(auroc.columns) == ["score", "misclassification", "OOD: uniform noise", "OOD: gaussian noise"]
    checkpoint = load_checkpoint(models / "colours-mlp" / "concat")
    result = input_depth(checkpoint, load_image_tensor(data, 3, 8), DepthFit.load(checkpoint.path))
    depth = int(result.readouts.depth[0])
    assert at.main.metric[1].value == (f"{depth} of 3" if depth <= 3 else "only the full head")
    at.slider(key="depth_threshold").set_value(0.5).run()
    assert_ok(at)
    stop = result.exit_layer(0.5)
    assert at.main.metric[2].label == "Exit at t = 0.5"
    assert at.main.metric[2].value == (checkpoint.layer_names[stop] if stop < 3 else "full model")
    verdict = exit_verdict(result, 0.5, checkpoint.meta.classes, checkpoint.layer_names)  # red.png: no label
    assert verdict.startswith(("Exit at t = 0.5: ", "At t = 0.5 no readout")) and any(m.value == verdict for m in at.main.markdown)

    from laya.analysis.depth.exits import ExitRunOptions
    from laya.analysis.depth.measured import MeasureOptions, measure, write_exits

    runs = ExitRunOptions(batch_sizes=(4,), repeats=1, resamples=20, min_seconds=0)
    measured = MeasureOptions(limit=12, train_limit=30, thresholds=(0.9,), alpha_levels=(), truncation=False, runs=runs)
    write_exits(measure(checkpoint, measured, log=lambda message: None), checkpoint.path)
    at.run()
    assert_ok(at)
    assert len(charts(at)) == 3 + 5  # + the measured early-exit runs
    assert any(c["layout"]["title"]["text"].startswith("Early exit, measured runs") for c in charts(at))
    from laya.analysis.depth.exits_record import load_exits
    from laya.app.verdicts import measured_exit_verdict

    said = measured_exit_verdict(load_exits(checkpoint.path))  # what the runs save, beyond the noise or not
    assert said.startswith("probe exits") and any(m.value == said for m in at.main.markdown)

    exits = json.loads((checkpoint.path / "exits.json").read_text())  # a damaged exits.json costs only its runs
    exits["runs"][0]["macs"] = "many"  # read unchecked, it raised a TypeError in the verdict
    (checkpoint.path / "exits.json").write_text(json.dumps(exits))
    at.run()
    assert_ok(at)
    assert len(charts(at)) == 3 + 4 and not any(m.value == said for m in at.main.markdown)
    assert [unplain(w.value) for w in at.warning if "exits.json" in w.value] == [
        "The measured early-exit runs cannot be shown: exits.json: runs[0].macs = 'many': must be a finite number"]


def test_inspect_links_its_input_to_the_depth_page(app: AppTest, setting: Path) -> None:
    examples = example_images(setting / "laya")
    app.selectbox(key="inspect_example").set_value(examples[2].name).run()
    app.switch_page("pages/depth-analytics.py").run()
    assert app.toggle(key="depth_use_inspect").value
    assert_depth_shows(app, setting / "laya", examples[2].read_bytes())


MARKDOWN_IMAGE = "![x](http://host/pixel.png)"
UNESCAPED_IMAGE = re.compile(r"(?<!\\)!(?<!\\)\[[^\]]*\]\(")  # ![...]( with neither ! nor [ escaped


def markdown_values(at: AppTest) -> list[str]:
    """The text of every element Streamlit renders as Markdown (titles, captions, alerts, markdown, labels)."""
    kinds = ("markdown", "caption", "error", "warning", "info", "success", "title", "subheader", "header")
    values = [str(e.value) for kind in kinds for e in at.get(kind)]
    return values + [str(e.label) for e in at.get("metric")]


def test_checkpoint_strings_render_as_plain_text(monkeypatch: pytest.MonkeyPatch, setting: Path, tmp_path: Path) -> None:
    """Issue 17, hole 7: a Markdown image as a class name and as the dataset is shown as text on every page,
    and in the refusal message of "Recompute", never as an image the browser would fetch."""
    folder = tmp_path / "models" / "injected"
    for head in HEADS:
        shutil.copytree(setting / head, folder / head)
        meta = json.loads((folder / head / META_FILE).read_text())
        meta["classes"][0] = MARKDOWN_IMAGE
        meta["dataset"] = MARKDOWN_IMAGE
        (folder / head / META_FILE).write_text(json.dumps(meta))
    shutil.copytree(setting / "examples", folder / "examples")
    at = start(monkeypatch, tmp_path / "models")
    shown = []
    for page in ("pages/inspect-input.py", "pages/compare-heads.py",
                 "pages/class-depth.py", "pages/faithfulness-overview.py"):
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
        shown += markdown_values(at)
    at.switch_page("pages/class-depth.py").run()
    at.button(key="classwise_recompute").click().run()
    assert not at.exception and at.error, "the dataset is refused"
    shown += markdown_values(at)
    assert any("pixel.png" in v for v in shown), "the injected text is shown (escaped)"
    assert not [v for v in shown if UNESCAPED_IMAGE.search(v)]


def test_messages_name_uploads_and_server_folders_without_their_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 17, hole 10: an upload is "the uploaded checkpoint"; in deploy mode the server's folders are
    named by their last component only."""
    from laya.app.text import UPLOADED, public

    uploads = tmp_path / "srv" / "laya-uploads-1"
    models = tmp_path / "srv" / "models"
    monkeypatch.setenv("LAYA_MODELS", str(models))
    message = f"no evaluation report at {uploads}/upload-ab12/report.json; run `python -m laya depth --checkpoint {uploads}/upload-ab12`"
    assert public(message, uploads) == (
        f"no evaluation report at {UPLOADED}; run `python -m laya depth --checkpoint {UPLOADED}`"
    )
    monkeypatch.setenv("LAYA_ALLOW_PATHS", "0")
    shown = public(f"weights not found (looked at {models}/mine/laya/w.pth)", uploads)
    assert str(tmp_path) not in shown and "models/mine/laya/w.pth" in shown


def test_compare_export_subtitle_names_the_setting(app: AppTest, setting: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 19, section 2: the Compare export's subtitle (and so the HTML report's meta line) names the setting."""
    import pages.common
    from laya.app.export import html_report

    calls = []
    monkeypatch.setattr(pages.common, "report_button", lambda *args: calls.append(args))
    app.switch_page("pages/compare-heads.py").run()
    app.radio(key="compare_mode").set_value("mean").run()
    assert_ok(app)
    title, sections, _, subtitle, source = calls[-1]
    group = describe(setting / "laya").group  # the setting as the sidebar names it: dataset · backbone
    assert group == "colours0 · mlp 16-12-8" and source.setting == group
    assert subtitle == f"{group} · {labels.mode_label('mean')} ablation"
    page = html_report(title, sections, subtitle, source)
    assert f'<p class="meta">{group} · {labels.mode_label("mean")} ablation · ' in page
