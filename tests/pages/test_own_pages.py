"""Every page for an attached network's own classifier (``laya attach``): the network explained by its units, no chart
trivial by construction, "Own classifier" as its name, and default views that differ between inputs."""

from __future__ import annotations

import base64
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from laya.analysis.network.explain import network_bytes
from laya.analysis.network.stored_references import REFERENCES_FILE
from laya.analysis.network.unit_patching import patch_units_bytes, unit_patch_table
from laya.app import browser
from laya.app.catalog import describe, example_images
from laya.app.depth_views import ONE_LAYER_NOTE, depth_metric
from laya.app.head_comparison import STAGE_SUM_TITLE, stage_sums
from laya.app.network_views import GRADCAM_TITLE, LENS_TITLE, UNIT_PROFILE_TITLE, network_depth
from laya.app.patching_plots import UNITS_TITLE
from laya.app.text import unplain
from laya.model.checkpoint import load_checkpoint
from laya.model.own_head import OWN
from laya.training.attach import Attached

APP = Path(__file__).resolve().parents[2] / "app.py"
PAGES = ("inspect-input", "compare-heads", "class-depth", "faithfulness-overview", "depth-analytics",
         "browse-test-set", "activation-patching")
UNITS = ["layer1.0", "layer1.1", "layer2.0", "layer2.1", "layer3.0", "layer3.1", "layer4.0", "layer4.1"]


@pytest.fixture(scope="module")
def attached(attached_resnet: Attached) -> Attached:
    """A torchvision ResNet-18 attached (own head first), its tuned lens and network report beside its own head."""
    return attached_resnet


def _start(attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("LAYA_MODELS", str(attached.setting.parent))
    monkeypatch.setenv("LAYA_PATH_ROOTS", str(image_folder))
    at = AppTest.from_file(str(APP), default_timeout=300).run()
    group = describe(attached.heads["laya"]).group
    at.sidebar.selectbox(key="model_group").set_value(group).run()
    at.sidebar.radio(key=f"model_head_{group}").set_value(str(attached.heads[OWN])).run()
    return at


def _on_page(attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch, page: str) -> AppTest:
    """The app on ``page`` for the own head, at its first example; no error shown."""
    at = _start(attached, image_folder, monkeypatch)
    at.switch_page(f"pages/{page}.py").run()
    _ok(at, page)
    return at


def _first_example(path: Path):
    """The own head at ``path`` and its units on its first example (the input every page opens on), in this process."""
    own = load_checkpoint(path)
    examples = [p.read_bytes() for p in example_images(path)]
    return own, network_bytes(own, examples[0], examples=examples)


def charts(at: AppTest) -> dict[str, dict]:
    """The page's charts by title (plain text)."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return {unplain(s["layout"].get("title", {}).get("text", "")): s for s in specs}


def values(field: list | dict) -> np.ndarray:
    """A trace's numbers, as plotly writes them (a list, or ``{"dtype", "bdata"}``)."""
    if isinstance(field, dict):
        return np.frombuffer(base64.b64decode(field["bdata"]), dtype=field["dtype"]).astype(float)
    return np.asarray(field, dtype=float)


def texts(at: AppTest) -> list[str]:
    kinds = ("markdown", "caption", "error", "warning", "info", "success", "title", "subheader", "header")
    return [unplain(str(e.value)) for kind in kinds for e in at.get(kind)]


def _ok(at: AppTest, page: str) -> None:
    assert not at.exception, (page, [e.value for e in at.exception])
    assert not at.error, (page, [e.value for e in at.error])


def test_inspect_leads_with_the_networks_units(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _start(attached, image_folder, monkeypatch)
    _ok(at, "inspect")
    shown = charts(at)
    profile = shown[UNIT_PROFILE_TITLE]["data"][0]
    assert profile["x"] == UNITS and set(profile["text"]) == {"resample"}  # named by module, the intervention per bar
    assert "inspect_network_branch" not in [r.key for r in at.radio]  # a ResNet's units have no branches to choose
    own = load_checkpoint(attached.heads[OWN])
    examples = [p.read_bytes() for p in example_images(attached.heads[OWN])]
    expected = network_bytes(own, examples[0], examples=examples)  # the page's first example, in this process
    assert expected.reference_source == "the training split"
    assert values(profile["y"]) == pytest.approx(expected.drops.tolist(), abs=1e-6)
    lens = next(s for t, s in shown.items() if t.startswith(LENS_TITLE))
    assert lens["data"][0]["x"] == UNITS and "tuned lens" in lens["layout"]["title"]["text"]
    assert any(t.startswith(GRADCAM_TITLE) for t in shown)
    assert not [t for t in shown if "Which layers" in t or "leave-one-layer-out" in t.lower() or "Block ablation" in t]
    assert not at.main.table, "no per-input faithfulness table (n/a: one informative layer)"
    assert not any("no longer sees the input" in t for t in texts(at))  # layer2.0 etc. keep it through downsample
    at.radio(key="inspect_network_method").set_value("skip").run()
    at.radio(key="inspect_network_granularity").set_value("stage").run()
    _ok(at, "inspect, skip by stage")
    bars, apart = charts(at)[UNIT_PROFILE_TITLE]["data"]  # every stage keeps the input; pre-logits, replaced whole,
    assert bars["x"] == ["layer1", "layer2", "layer3", "layer4"] and bars["text"] == ["skip"] * 4  # on its own axis
    assert apart["x"] == ["pre-logits"] and apart["text"] == ["resample"] and apart["yaxis"] == "y2"


def test_the_own_head_opens_without_reading_a_dataset_split(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``laya attach`` stores the unit profile's references beside the own head, so a cold open reads no split (it
    decoded all 50,000 CIFAR-10 training images before): the profile is drawn on them, named as the training
    split's draw, with every dataset read refused."""
    import streamlit as st

    from laya.analysis.network import explain
    from laya.data.datasets import DatasetNotFoundError
    from laya.model.checkpoint import Checkpoint

    assert (attached.heads[OWN] / REFERENCES_FILE).is_file()
    st.cache_data.clear()
    st.cache_resource.clear()
    explain._DRAWN.clear()
    read = []

    def refuse(self, split: str = "test", *_args, **_kwargs):
        read.append(split)
        raise DatasetNotFoundError(f"{split}: no split is read to open a checkpoint")

    monkeypatch.setattr(Checkpoint, "load_data", refuse)
    at = _start(attached, image_folder, monkeypatch)
    _ok(at, "inspect")
    assert UNIT_PROFILE_TITLE in charts(at) and read == []
    assert any("references from the training split" in t for t in texts(at))


def test_every_page_names_the_own_classifier_and_shows_nothing_trivial(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _start(attached, image_folder, monkeypatch)
    for page in PAGES:
        at.switch_page(f"pages/{page}.py").run()
        _ok(at, page)
        words = texts(at) + [unplain(str(o)) for r in at.sidebar.radio for o in r.options]
        words += [json.dumps(s) for s in charts(at).values()]
        words = [w.replace("Concat/LastLayer", "") for w in words]  # the maps' caption on every head's weights
        assert not [w for w in words if "LastLayer" in w or "lastlayer" in w], page
        trivial = ("only one seed", "one trained seed", "n/a (one informative layer)")
        assert not [w for w in words if any(t in w.lower() for t in trivial)], page
    at.switch_page("pages/compare-heads.py").run()
    shown = charts(at)
    assert shown[UNIT_PROFILE_TITLE]["data"][0]["x"] == UNITS  # the network's units beside LAYA's α
    assert any(t == "**Own classifier**" for t in texts(at))  # its column's heading


def test_browse_and_patching_open_on_views_that_differ_between_inputs(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _start(attached, image_folder, monkeypatch)
    at.switch_page("pages/browse-test-set.py").run()
    _ok(at, "browse")
    keys = [s.key for s in at.selectbox]  # every layer but pre-logits 0 by construction: no picker, no top layer
    assert "browse_layer" not in keys and "browse_top" not in keys
    assert "top layer" not in at.selectbox(key="browse_sort").options
    assert any(browser.ONE_LAYER_NOTE in t for t in texts(at))
    table = at.dataframe[0].value
    assert "top layer" not in table and table["LOO drop"].nunique() > 1 and table["score"].nunique() > 1
    at.switch_page("pages/activation-patching.py").run()
    _ok(at, "patching")
    assert "patch_where" not in [r.key for r in at.radio]  # whole layers: every row but one fixed; units instead
    figure = charts(at)[UNITS_TITLE]
    prob, logit = figure["data"]
    assert prob["x"] == logit["x"] == UNITS  # every unit of the network patched inside it, each its own row
    own = load_checkpoint(attached.heads[OWN])
    examples = [p.read_bytes() for p in example_images(attached.heads[OWN])]
    expected = unit_patch_table(patch_units_bytes(own, examples[0], examples[1]), list(own.meta.classes), 0, 1)
    assert values(prob["y"]) == pytest.approx(expected["prob_change"].tolist(), abs=1e-6)
    assert np.ptp(values(logit["y"])) > 1e-4  # rows differ where the network differs (whole stages gave one)


def test_compare_sums_the_unit_profile_by_the_heads_layers_beside_alpha(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unit profile summed by the heads' layer its units make, on LAYA's α's axis, from the same input."""
    at = _on_page(attached, image_folder, monkeypatch, "compare-heads")
    shown = charts(at)
    own, expected = _first_example(attached.heads[OWN])
    table = stage_sums(expected, list(own.layer_names))
    summed = shown[STAGE_SUM_TITLE]["data"][0]
    assert summed["x"] == list(own.layer_names)
    assert values(summed["y"]) == pytest.approx(table["drop"].tolist(), abs=1e-6, nan_ok=True)
    assert table["drop"].notna().sum() >= 4  # every stage of residual blocks has a bar
    alpha = next(s for t, s in shown.items() if t.endswith("layer scores and LOO drops"))
    assert alpha["data"][0]["x"] == summed["x"]  # the same axis as LAYA's α
    assert any("Each of the heads' layers is made of the network's units" in t for t in texts(at))


ONE_LAYER_CHARTS = ("Per-layer contributions", "Mean contribution of each layer", "Pruning")


def test_depth_analytics_names_its_depths_and_draws_nothing_fixed_by_one_layer(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one prediction depth shown is the tuned lens's over the network's units, named so; the probes' depth is
    named as theirs; no one-bar logit contributions and no flat pruning panel, and a sentence says why."""
    at = _on_page(attached, image_folder, monkeypatch, "depth-analytics")
    _, expected = _first_example(attached.heads[OWN])  # the input carried from Inspect
    metrics = {unplain(m.label): unplain(m.value) for m in at.metric}  # shown escapes Markdown
    label, value = depth_metric(network_depth(expected), len(expected.units), "tuned lens")
    assert metrics.get(label) == value and value != "–", metrics
    assert "Prediction depth" not in metrics  # no second, unnamed depth
    shown = charts(at)
    assert not [t for t in shown if t.startswith(ONE_LAYER_CHARTS)]
    assert any(ONE_LAYER_NOTE in t for t in texts(at))
    if path := shown.get("Readout path: each layer's own prediction"):  # where the depth report has probes
        named = [a["text"] for a in path["layout"].get("annotations", []) if "prediction depth" in a["text"]]
        assert all(t.startswith("probes' prediction depth") for t in named)


def test_the_stored_network_report_lights_up_faithfulness_and_classwise(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The network report attach wrote beside the own head: its agreement table on Faithfulness and its class x
    unit heatmap on Class-wise; where the report is absent, an info says how it is computed."""
    from laya.analysis.network.report_files import load_network_report
    from laya.app.network_views import agreement_view, lens_summary_view

    report = load_network_report(attached.heads[OWN])
    assert report is not None  # attach writes it
    at = _start(attached, image_folder, monkeypatch)
    at.switch_page("pages/faithfulness-overview.py").run()
    _ok(at, "faithfulness")
    table = unplain(at.main.table[0].value).reset_index()  # the score is the table's index
    expected = agreement_view(report.agreement)
    assert list(table.columns) == list(expected.columns)
    assert table.astype(str).values.tolist() == expected.astype(str).values.tolist()
    monkeypatch.setattr("laya.analysis.network.report_files.load_network_report", lambda path: None)
    at.switch_page("pages/faithfulness-overview.py").run()
    assert any("laya network --checkpoint" in i for i in texts(at))
    monkeypatch.undo()
    at = _start(attached, image_folder, monkeypatch)
    at.switch_page("pages/class-depth.py").run()
    _ok(at, "classwise")
    heatmap = next(s for t, s in charts(at).items() if t.startswith("Class x unit"))
    assert heatmap["data"][0]["x"] == UNITS and heatmap["data"][0]["y"][0] == "all"
    lens = unplain(at.main.table[0].value).reset_index()  # the tuned lens per unit beside its baselines
    assert lens.astype(str).values.tolist() == lens_summary_view(report.lens).astype(str).values.tolist()
    assert lens["unit"].tolist() == UNITS


def test_an_upload_explains_its_units_in_the_sandboxed_worker(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same bars from a sandboxed worker (the route of an uploaded checkpoint) as in this process."""
    monkeypatch.setenv("LAYA_SANDBOX", "all")
    at = _start(attached, image_folder, monkeypatch)
    _ok(at, "inspect (sandboxed)")
    bars = charts(at)[UNIT_PROFILE_TITLE]["data"][0]
    own = load_checkpoint(attached.heads[OWN])
    examples = [p.read_bytes() for p in example_images(attached.heads[OWN])]
    expected = network_bytes(own, examples[0], examples=examples)
    assert values(bars["y"]) == pytest.approx(expected.drops.tolist(), abs=1e-6)


BUNDLED = APP.parent / "models" / "cifar10-resnet18-half"


@pytest.mark.skipif(not (BUNDLED / OWN / "network.json").is_file(), reason="the bundled attached network is not here")
def test_every_page_on_the_bundled_attached_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """The network that ships in models/ (python scripts/own_networks.py --ship): its own classifier first in its
    group, every page renders, Inspect leads with its units as its stored network report names them."""
    monkeypatch.setenv("LAYA_MODELS", str(BUNDLED.parent))
    at = AppTest.from_file(str(APP), default_timeout=300).run()
    group = describe(BUNDLED / OWN).group
    at.sidebar.selectbox(key="model_group").set_value(group).run()
    from laya.app.catalog import find_checkpoints

    assert [e.head for e in find_checkpoints(BUNDLED.parent) if e.group == group][0] == OWN  # listed first
    at.sidebar.radio(key=f"model_head_{group}").set_value(str(BUNDLED / OWN)).run()
    _ok(at, "inspect")
    units = json.loads((BUNDLED / OWN / "network.json").read_text())["units"]
    kept, apart = charts(at)[UNIT_PROFILE_TITLE]["data"]  # bn1, the stem, has no shortcut: a panel of its own
    residual = json.loads((BUNDLED / OWN / "network.json").read_text())["residual"]
    assert kept["x"] == [u for u, r in zip(units, residual) if r] and apart["x"] == ["bn1"] == units[:1]
    assert (kept["yaxis"], apart["yaxis"]) == ("y", "y2")  # never on one axis
    for page in PAGES[1:]:
        at.switch_page(f"pages/{page}.py").run()
        _ok(at, page)
        assert charts(at) or page == "browse-test-set", page
        # the depth report's pruning and logit terms, fixed by the head reading one layer
        if page == "depth-analytics":
            assert not [t for t in charts(at) if t.startswith(ONE_LAYER_CHARTS)]
            assert "Prediction depth (tuned lens)" in [unplain(m.label) for m in at.metric]
        # bn1's row is the source's own output by construction: not drawn, said why
        if page == "activation-patching":
            assert charts(at)[UNITS_TITLE]["data"][0]["x"] == units[1:]
            assert any("Not drawn: `bn1`" in t and "by construction" in t for t in texts(at))
        if page == "faithfulness-overview":  # bn1 left out of the agreement, named, with its own numbers
            assert any("Reported apart" in t and "`bn1`" in t for t in texts(at))
            assert any("bn1 reported apart" in t for t in texts(at))
            assert unplain(at.main.table[1].value).reset_index()["unit"].tolist() == ["bn1"]


def _on_own_head(setting: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The app on a copy of a bundled setting (``setting``), its own head selected."""
    monkeypatch.setenv("LAYA_MODELS", str(setting.parent))
    at = AppTest.from_file(str(APP), default_timeout=300).run()
    group = describe(setting / OWN).group
    at.sidebar.selectbox(key="model_group").set_value(group).run()
    at.sidebar.radio(key=f"model_head_{group}").set_value(str(setting / OWN)).run()
    return at


@pytest.mark.skipif(not (BUNDLED / OWN / "network.json").is_file(), reason="the bundled attached network is not here")
def test_broken_stored_files_degrade_only_their_own_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the bundled attached network whose ``tuned_lens.json`` gives its units as an int, whose
    ``network.json`` holds a list for its tables, and without ``sample_images.png``: Inspect still draws the unit
    profile and the Grad-CAM strip and says why the lens is missing, naming the file; Faithfulness and Class-wise
    name ``network.json`` and draw the rest; Browse lists the inputs without thumbnails. No page shows an error."""
    setting = tmp_path / "models" / BUNDLED.name
    shutil.copytree(BUNDLED, setting)
    lens = json.loads((setting / OWN / "tuned_lens.json").read_text())
    (setting / OWN / "tuned_lens.json").write_text(json.dumps(lens | {"units": 3}))
    report = json.loads((setting / OWN / "network.json").read_text())
    (setting / OWN / "network.json").write_text(json.dumps(report | {"tables": []}))
    (setting / "sample_images.png").unlink()
    at = _on_own_head(setting, monkeypatch)
    _ok(at, "inspect")
    shown = charts(at)
    assert [x for bars in shown[UNIT_PROFILE_TITLE]["data"] for x in bars["x"]] == report["units"][1:] + ["bn1"]
    assert any(t.startswith(GRADCAM_TITLE) for t in shown) and not any(t.startswith(LENS_TITLE) for t in shown)
    assert any("No lens for this network" in t and "tuned_lens.json: units = 3" in t for t in texts(at))
    for page in ("faithfulness-overview", "class-depth"):
        at.switch_page(f"pages/{page}.py").run()
        _ok(at, page)
        assert any("network.json: tables = []" in t for t in texts(at)), page
    assert any(t.startswith("Confusion") for t in charts(at))  # Class-wise: the rest of the page
    at.switch_page("pages/browse-test-set.py").run()
    _ok(at, "browse")
    assert at.dataframe and len(at.dataframe[0].value) > 0 and not at.get("imgs")
    assert any("sample_images.png" in t for t in texts(at))


@pytest.mark.skipif(not (BUNDLED / OWN / "network.json").is_file(), reason="the bundled attached network is not here")
def test_every_other_broken_stored_file_costs_only_its_own_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43: a copy of the bundled attached network whose lens fit's constant is texts (a TypeError in
    ``laya network``), whose report's lens section has a text agreement (Class-wise raised), whose sample and
    depth report are damaged (Browse and Depth raised): Inspect draws the unit profile and names
    ``tuned_lens.json``'s field where the lens was; Class-wise, Browse and Depth each name their file and draw the
    rest. No page shows an error or an exception."""
    setting = tmp_path / "models" / BUNDLED.name
    shutil.copytree(BUNDLED, setting)
    lens = json.loads((setting / OWN / "tuned_lens.json").read_text())
    (setting / OWN / "tuned_lens.json").write_text(json.dumps(lens | {"fit": lens["fit"] | {"constant": ["x"] * 10}}))
    report = json.loads((setting / OWN / "network.json").read_text())
    report["lens"]["units"][0]["agreement"] = "high"
    (setting / OWN / "network.json").write_text(json.dumps(report))
    (setting / OWN / "sample.safetensors").write_bytes(b"\x10\x00" * 40)
    depth = json.loads((setting / OWN / "depth.json").read_text())
    (setting / OWN / "depth.json").write_text(json.dumps(depth | {"layer_names": 3}))
    at = _on_own_head(setting, monkeypatch)
    _ok(at, "inspect")
    shown = charts(at)
    assert [x for bars in shown[UNIT_PROFILE_TITLE]["data"] for x in bars["x"]] == report["units"][1:] + ["bn1"]
    assert any(t.startswith(GRADCAM_TITLE) for t in shown) and not any(t.startswith(LENS_TITLE) for t in shown)
    assert any("No lens for this network" in t and "tuned_lens.json: fit.constant = ['x'" in t for t in texts(at))
    at.switch_page("pages/class-depth.py").run()
    _ok(at, "classwise")
    assert any("network.json: lens.units[0]" in t for t in texts(at))
    assert any(t.startswith("Confusion") for t in charts(at))  # the rest of the page
    at.switch_page("pages/browse-test-set.py").run()
    _ok(at, "browse")
    assert any("sample.safetensors is not a valid safetensors file" in t for t in texts(at))
    at.switch_page("pages/depth-analytics.py").run()
    _ok(at, "depth")
    assert any("depth.json: layer_names = 3" in t for t in texts(at))
    assert charts(at)  # this input's views are drawn


def test_the_depth_page_shows_the_lesion_study_of_the_own_head(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lesion study attach stored: a bar per unit (accuracy with it skipped, its CI) and the curve over k, the
    intervention named in the title; switching to resample shows the resample rows."""
    from laya.analysis.network.report_files import load_network_report
    from laya.app.network_views import LESION_TITLE

    lesion = load_network_report(attached.heads[OWN]).lesion
    at = _start(attached, image_folder, monkeypatch)
    at.switch_page("pages/depth-analytics.py").run()
    _ok(at, "depth")
    title, spec = next((t, s) for t, s in charts(at).items() if t.startswith(LESION_TITLE))
    assert "skipped" in title
    skip = lesion.single[lesion.single["intervention"] == "skip"]
    bars, band, mean = spec["data"]
    assert bars["x"] == UNITS == skip["unit"].tolist()
    assert np.allclose(values(bars["y"]), skip["accuracy"].to_numpy())
    assert np.allclose(values(mean["y"]), lesion.curve["mean"].to_numpy()) and values(mean["x"])[0] == 0
    at.radio(key="depth_lesion_by").set_value("resample").run()
    title, spec = next((t, s) for t, s in charts(at).items() if t.startswith(LESION_TITLE))
    resample = lesion.single[lesion.single["intervention"] == "resample"]
    assert "resampled" in title and np.allclose(values(spec["data"][0]["y"]), resample["accuracy"].to_numpy())


BLOCKS = [f"blocks.{k}" for k in range(6)]


def test_an_attached_vit_s_units_patching_and_depth(
    attached_vit: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """timm's test_vit attached: every block keeps the input (one panel), while the stage bars' pre-logits (no
    module: replaced whole) is drawn apart on its own axis; Patching takes each block's branch from the source, the
    attention branch alone once chosen, as computed in this process; Depth analytics names the tuned lens's depth,
    draws the lesion study over the six blocks and leaves the pre-logits readout (the network's own classifier,
    the prediction itself) out of the lens."""
    from laya.analysis.network.report_files import load_network_report
    from laya.app.depth_views import FIXED_LENS_NOTE
    from laya.app.network_views import APART_PANEL, LESION_TITLE

    at = _start(attached_vit, image_folder, monkeypatch)
    _ok(at, "inspect")
    [bars] = charts(at)[UNIT_PROFILE_TITLE]["data"]  # every block keeps the input: no panel apart
    assert bars["x"] == BLOCKS
    at.radio(key="inspect_network_granularity").set_value("stage").run()
    _ok(at, "inspect by stage")
    profile = charts(at)[UNIT_PROFILE_TITLE]
    kept, apart = profile["data"]
    assert apart["x"] == ["pre-logits"] and (kept["yaxis"], apart["yaxis"]) == ("y", "y2")
    assert APART_PANEL in [a["text"] for a in profile["layout"]["annotations"]]
    assert any("`pre-logits`" in t and "no longer sees the input" in t for t in texts(at))

    at.switch_page("pages/activation-patching.py").run()
    _ok(at, "patching")
    own = load_checkpoint(attached_vit.heads[OWN])
    examples = [p.read_bytes() for p in example_images(attached_vit.heads[OWN])]
    for branch in ("block", "attention"):
        if branch != "block":
            at.radio(key="patch_branch").set_value(branch).run()
            _ok(at, f"patching {branch}")
        prob, _ = charts(at)[UNITS_TITLE]["data"]
        expected = unit_patch_table(patch_units_bytes(own, examples[0], examples[1], branch), list(own.meta.classes),
                                    0, 1)  # fmt: skip
        assert prob["x"] == BLOCKS and values(prob["y"]) == pytest.approx(expected["prob_change"].tolist(), abs=1e-6)
        assert set(expected["intervention"]) == {f"resample of {'the whole block' if branch == 'block' else branch}"}

    at.switch_page("pages/depth-analytics.py").run()
    _ok(at, "depth")
    assert any(unplain(m.label) == "Prediction depth (tuned lens)" for m in at.metric)
    shown = charts(at)
    lesion = next(s for t, s in shown.items() if t.startswith(LESION_TITLE))
    single = load_network_report(attached_vit.heads[OWN]).lesion.single
    assert lesion["data"][0]["x"] == BLOCKS == single["unit"][:6].tolist()  # one panel: every block keeps the input
    lens = next(s for t, s in shown.items() if t.startswith("Per-layer lens"))
    assert "pre-logits" not in [x for trace in lens["data"] for x in trace.get("x", [])]
    assert any(FIXED_LENS_NOTE in t for t in texts(at))


def test_inspect_frames_the_unit_whose_grad_cam_beats_random(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored Grad-CAM test beside the own head: its per-unit differences in an expander under the strip, and
    the unit it names framed in the strip (here made to name layer2.1 by its rows: its ROAD difference alone above 0,
    Holm-corrected)."""
    from dataclasses import replace

    from laya.analysis.network.report_files import load_network_report
    from laya.app.gradcam_views import CHOICE_TITLE, CHOSEN_MARK

    stored = load_network_report(attached.heads[OWN]).gradcam
    assert stored is not None and list(stored.units["unit"]) == UNITS  # attach tested every unit
    at = _start(attached, image_folder, monkeypatch)
    _ok(at, "inspect")
    choice = next(s for t, s in charts(at).items() if t.startswith(CHOICE_TITLE))
    road = stored.rows[stored.rows["metric"] == "road"]
    assert choice["data"][1]["x"] == road["unit"].tolist()
    assert values(choice["data"][1]["y"]) == pytest.approx(road["diff"].tolist())
    rows = stored.rows.assign(holm_p=1.0)  # no row beats random ...
    winner = (rows["unit"] == "layer2.1") & (rows["metric"] == "road")
    rows.loc[winner, ["diff_low", "diff_high", "holm_p"]] = [0.1, 0.3, 0.0]  # ... but layer2.1's on ROAD
    page_module = sys.modules["pages.common.network"]  # ``pages.common.network`` names the loader function too
    monkeypatch.setattr(page_module, "gradcam_choice", lambda path: replace(stored, rows=rows))
    at.run()
    _ok(at, "inspect, a unit chosen")
    strip = next(s for t, s in charts(at).items() if t.startswith(GRADCAM_TITLE))
    titles = [unplain(a["text"]) for a in strip["layout"]["annotations"]]
    assert [t for t in titles if t.endswith(CHOSEN_MARK)] == [f"layer2.1{CHOSEN_MARK}"]
    assert [s["line"]["width"] for s in strip["layout"]["shapes"]] == [4]
    assert any("Framed: the unit whose map beats a random one" in t for t in texts(at))


def test_the_depth_page_shows_a_units_lesion_per_class(
    attached: Attached, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the lesion study, one unit's drop per true class with its paired CI, the unit chosen in a selectbox."""
    from laya.analysis.network.report_files import load_network_report
    from laya.app.lesion_views import CLASS_LESION_TITLE

    by_class = load_network_report(attached.heads[OWN]).lesion.by_class
    at = _on_page(attached, image_folder, monkeypatch, "depth-analytics")
    at.selectbox(key="depth_lesion_unit").set_value("layer3.0").run()
    _ok(at, "depth, a unit's lesion per class")
    title, spec = next((t, s) for t, s in charts(at).items() if t.startswith(CLASS_LESION_TITLE))
    assert "layer3.0 skipped" in title
    rows = by_class[(by_class["intervention"] == "skip") & (by_class["unit"] == "layer3.0")]
    assert spec["data"][0]["x"] == rows["class"].tolist() == ["blue", "green", "red"]
    assert values(spec["data"][0]["y"]) == pytest.approx(rows["drop"].tolist())
    table = next(d.value for d in at.dataframe if "drop [95% paired CI]" in d.value.columns)
    assert table["inputs"].tolist() == rows["n"].tolist()
