"""The Activation patching page and the lens on Depth analytics through AppTest: the numbers shown are
laya.analysis.patching's / laya.analysis.depth.layer_lens's own, for a bundled checkpoint (in process), through a
sandboxed worker, and with a source sent from the test-set browser."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from laya.analysis.depth.fit import DepthFit
from laya.analysis.depth.input_depth import input_depth
from laya.analysis.depth.layer_lens import load_lens
from laya.analysis.depth.report import DepthOptions, run_depth
from laya.analysis.patching import pair_table, patch_bytes
from laya.analysis.sample import Sample
from laya.app.catalog import example_images
from laya.app.patching_plots import axis_titles
from laya.app.text import unplain
from laya.data.images import load_image_tensor
from laya.model.checkpoint import load_checkpoint

APP = Path(__file__).resolve().parents[2] / "app.py"
BUNDLED = APP.parent / "models"


@pytest.fixture(autouse=True)
def _data_root(monkeypatch: pytest.MonkeyPatch, image_folder: Path) -> None:
    monkeypatch.setenv("LAYA_PATH_ROOTS", str(image_folder))


def start(monkeypatch: pytest.MonkeyPatch, models: Path, page: str = "pages/activation-patching.py") -> AppTest:
    monkeypatch.setenv("LAYA_MODELS", str(models))
    at = AppTest.from_file(str(APP), default_timeout=90).run()
    at.switch_page(page).run()
    ok(at)
    return at


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def charts(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def array(value) -> np.ndarray:
    if isinstance(value, dict):  # plotly's typed arrays
        import base64

        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return np.array(value, dtype=float)


def assert_patching_shows(at: AppTest, directory: Path, target: bytes, source: bytes, where: str) -> None:
    """Table, bars and metrics are pair_table(patch_bytes(...)) for the classes picked on the page."""
    ok(at)
    checkpoint = load_checkpoint(directory)
    classes = list(checkpoint.meta.classes)
    effects = patch_bytes(checkpoint, target, source, where)
    a, b = at.selectbox(key="patch_class_a").value, at.selectbox(key="patch_class_b").value
    expected = pair_table(effects, checkpoint.layer_names, classes, a, b)
    predicted = classes[int(effects.prediction[0])]
    assert at.main.metric[0].value == predicted
    assert at.main.metric[1].value == classes[int(effects.source_logits[0].argmax())]
    shown = at.main.dataframe[0].value
    titles = axis_titles(predicted, classes[a], classes[b])
    assert list(shown["layer"]) == list(expected["layer"])
    assert "None" not in shown.astype(str).to_numpy()  # a missing value reads "n/a"
    for title, column in zip(titles, ("prob_change", "logit_diff_change", "alpha_change")):
        values = shown[title].replace("n/a", "nan").astype(float)  # shown to 4 decimals
        assert np.allclose(values, expected[column], atol=1e-4, equal_nan=True), column
    assert list(shown["prediction"]) == list(expected["prediction"].replace("", "n/a"))
    bars = charts(at)[0]["data"]
    patched = expected[expected["patched"]]
    assert array(bars[0]["y"]) == pytest.approx(patched["prob_change"].to_numpy(), abs=1e-6)
    assert array(bars[1]["y"]) == pytest.approx(patched["logit_diff_change"].to_numpy(), abs=1e-6)


def test_bundled_checkpoint_head_and_backbone(monkeypatch: pytest.MonkeyPatch) -> None:
    at = start(monkeypatch, BUNDLED)
    directory = Path(at.session_state["laya_selection"].path)
    examples = {p.name: p.read_bytes() for p in example_images(directory)}
    assert at.toggle(key="patch_use_inspect").value  # the target is the current input: Inspect's
    target = at.session_state["laya_current_input"][1]
    source = examples[at.selectbox(key="patch_source_example").value]
    assert at.title[0].value == "Activation patching" and target != source
    assert_patching_shows(at, directory, target, source, "head")
    table = at.main.dataframe[0].value
    every = table[table["layer"] == "all layers"].iloc[0]  # the known answer: every layer = the source
    assert every["prediction"] == at.main.metric[1].value
    at.selectbox(key="patch_class_b").set_value(0 if at.selectbox(key="patch_class_a").value else 1).run()
    assert_patching_shows(at, directory, target, source, "head")
    at.radio(key="patch_where").set_value("backbone").run()
    assert_patching_shows(at, directory, target, source, "backbone")
    assert "all layers" not in list(at.main.dataframe[0].value["layer"])


def test_sandboxed_checkpoint_with_a_source_from_the_browser(monkeypatch: pytest.MonkeyPatch, tiny_models: Path) -> None:
    monkeypatch.setenv("LAYA_SANDBOX", "all")  # every checkpoint runs in a worker, as uploads do
    at = start(monkeypatch, tiny_models, "pages/browse-test-set.py")
    directory = tiny_models / "colours-mlp" / "laya"
    sample = Sample.load(directory)
    index = int(sample.table["index"].iloc[3])
    at.button(key=f"browse_source_{index}").click().run()
    ok(at)
    assert at.title[0].value == "Activation patching" and at.radio(key="patch_source_kind").value == "test input"
    assert at.selectbox(key="patch_source_test").value == index
    row = int(sample.table.index[sample.table["index"] == index][0])
    target = at.session_state["laya_current_input"][1]
    assert_patching_shows(at, directory, target, sample.png(row), "head")

    directory = tiny_models / "colours-mlp" / "concat"
    # AppTest stays on the page it was told; the button switched only the app
    at.switch_page("pages/activation-patching.py")
    at.sidebar.radio[1].set_value(str(directory)).run()
    at.radio(key="patch_source_kind").set_value("bundled example").run()
    source = {p.name: p.read_bytes() for p in example_images(directory)}[at.selectbox(key="patch_source_example").value]
    assert_patching_shows(at, directory, at.session_state["laya_current_input"][1], source, "head")
    assert any("n/a: concat has no layer weights" in unplain(c.value) for c in at.caption)  # α said n/a, not 0
    assert all(a["text"].startswith("n/a") for a in charts(at)[0]["layout"]["annotations"])
    at.radio(key="patch_source_kind").set_value("upload").run()
    assert at.info and "both a target and a source" in at.info[0].value
    at.file_uploader(key="patch_source_upload").set_value(("bad.png", b"no image", "image/png")).run()
    assert not at.exception and at.error and "Cannot use" in at.error[0].value


def test_depth_page_shows_the_lens_of_the_input_over_the_class_means(
    monkeypatch: pytest.MonkeyPatch, tiny_models: Path, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    shutil.copytree(tiny_models / "colours-mlp", models / "colours-mlp")
    directory = models / "colours-mlp" / "concat"
    run_depth(directory, DepthOptions(limit=12, train_limit=30, resamples=20, random_orders=2, refit_steps=3,
                                      timing_batch=4, timing_repeats=1))  # fmt: skip
    at = start(monkeypatch, models, "pages/depth-analytics.py")
    at.sidebar.radio[1].set_value(str(directory)).run()
    at.selectbox(key="depth_lens_metric").set_value("prob").run()
    ok(at)
    checkpoint = load_checkpoint(directory)
    data = example_images(directory)[0].read_bytes()
    result = input_depth(checkpoint, load_image_tensor(data, 3, 8), DepthFit.load(directory))
    lens_ = result.lens()
    figure = next(c for c in charts(at) if (c["layout"].get("title") or {}).get("text") == "Per-layer lens (linear probes)")
    traces = {t["name"]: t for t in figure["data"]}
    predicted = checkpoint.meta.classes[result.prediction]
    assert set(traces) == {"all", predicted, "this input"} or set(traces) == {"all", "this input"}
    assert array(traces["this input"]["y"]) == pytest.approx(lens_.prob[0].tolist(), abs=1e-6)
    summary = load_lens(directory)
    assert array(traces["all"]["y"]) == pytest.approx(summary.loc[summary["class"] == "all", "prob"].to_numpy())
    assert any("linear probes fitted on the training split" in c.value and "12 test inputs" in c.value
               for c in at.caption)  # fmt: skip
    at.toggle(key="depth_lens_all").set_value(True).run()
    every = [t["name"] for c in charts(at) if (c["layout"].get("title") or {}).get("text") == "Per-layer lens "
             "(linear probes)" for t in c["data"]]  # fmt: skip
    assert every.count("this input") == 1 and set(every) >= {"all", *summary["class"]}  # + one line per class
    table = next(d.value for d in at.main.dataframe if "kl" in d.value)
    assert table["rank"].tolist() == lens_.rank[0].tolist() and torch.allclose(
        torch.tensor(table["kl"].to_numpy()), lens_.kl[0], atol=1e-6)  # fmt: skip
