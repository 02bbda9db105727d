"""The figures and tables of the network explained by its own units (:mod:`laya.app.network_views`), with numbers."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from laya.analysis.network.explain import NetworkExplanation
from laya.app import network_views as nv
from laya.app import palette
from laya.app.patching_plots import effects_figure

CLASSES = ["cat", "dog", "eel"]


def explanation(**changes) -> NetworkExplanation:
    """Four units of two stages; the second is not residual; the network predicts dog with p = 0.6."""
    log_q = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.1, 0.8, 0.1], [0.2, 0.6, 0.2]]))
    fields = dict(
        names=("layer1.0", "layer2.0", "layer2.1", "layer3.0"), stages=("layer1", "layer2", "layer2", "layer3"),
        granularity="unit", methods=("resample", "resample", "resample", "resample"),
        residual=(True, False, True, True), drops=torch.tensor([0.1, -0.05, 0.3, 0.0]),
        ablated=torch.tensor([1, 1, 0, 1]), prediction=1, probability=0.6, references=8,
        reference_source="the training split", units=("layer1.0", "layer2.0", "layer2.1", "layer3.0"),
        cam=torch.rand(4, 4, 4), cam_class=1, log_q=log_q, log_p=torch.log(torch.tensor([0.2, 0.6, 0.2])),
        lens_source="tuned lens",
    )  # fmt: skip
    return NetworkExplanation(**(fields | changes))


def test_unit_profile_names_each_bar_by_module_and_intervention() -> None:
    result = explanation(methods=("skip", "resample", "skip", "skip"))
    table = nv.unit_profile_table(result, CLASSES)
    assert list(table["unit"]) == ["layer1.0", "layer2.0", "layer2.1", "layer3.0"]
    assert list(table["intervention"]) == ["skip", "resample", "skip", "skip"]
    assert table["drop"].tolist() == pytest.approx([0.1, -0.05, 0.3, 0.0])
    assert list(table["label flips"]) == [False, False, True, False]  # layer2.1 turns dog into cat
    figure = nv.unit_profile_figure(result, CLASSES)
    kept, apart = figure.data  # layer2.0 has no shortcut: a panel of its own, never on the others' axis
    assert list(kept.x) == ["layer1.0", "layer2.1", "layer3.0"] and list(kept.text) == ["skip", "skip", "skip"]
    assert list(apart.x) == ["layer2.0"] and list(apart.text) == ["resample"] and apart.marker.color == palette.NEUTRAL
    assert kept.marker.color == palette.LOO_DROP and (kept.yaxis, apart.yaxis) == ("y", "y2")
    assert list(kept.marker.pattern.shape) == ["", palette.FLIP_PATTERN, ""]
    assert [a.text for a in figure.layout.annotations] == [nv.KEPT_PANEL, nv.APART_PANEL]
    assert figure.layout.title.text == nv.UNIT_PROFILE_TITLE and figure.layout.yaxis.title.text == "drop in p(dog)"
    whole = nv.unit_profile_figure(explanation(residual=(True,) * 4), CLASSES)  # every unit keeps the input
    assert len(whole.data) == 1 and list(whole.data[0].x) == list(table["unit"]) and not whole.layout.annotations
    stages = nv.unit_profile_table(explanation(granularity="stage"), CLASSES)
    assert stages.columns[0] == "stage"


def test_each_bar_names_the_part_of_the_block_it_acted_on() -> None:
    """A ViT's profile on one branch: every bar's label names intervention and part, a unit without the branch the
    whole block; the caption says which branch was replaced."""
    methods = ("resample of attention", "mean-ablation of attention", "resample of the whole block", "skip of MLP")
    result = explanation(methods=methods, branch="attention", branched=True, residual=(True,) * 4)
    table = nv.unit_profile_table(result, CLASSES)
    assert list(table["intervention"]) == ["resample of attention", "mean of attention", "resample of the whole block",
                                           "skip of MLP"]  # fmt: skip
    assert list(nv.unit_profile_figure(result, CLASSES).data[0].text) == list(table["intervention"])
    text = nv.unit_profile_caption(result, CLASSES)
    assert "Only the attention branch of each transformer block is replaced" in text and "8 references" in text
    assert "by its mean over 8" in text and "whole block have no such branch" in text
    assert "branch of each" not in nv.unit_profile_caption(explanation(), CLASSES)


def test_caption_says_where_the_network_no_longer_sees_the_input() -> None:
    text = nv.unit_profile_caption(explanation(), CLASSES)
    assert "resample" in text and "8 references" in text and "the training split" in text
    assert "`layer2.0`" in text and "no longer sees the input" in text and "`layer1.0`" not in text
    assert "not residual" not in nv.unit_profile_caption(explanation(residual=(True,) * 4), CLASSES)
    skip = nv.unit_profile_caption(explanation(methods=("skip",) * 4, references=0, residual=(True,) * 4), CLASSES)
    assert "references" not in skip and "skip" in skip


def test_lens_table_depth_and_figure() -> None:
    result = explanation()
    table = nv.lens_table(result, CLASSES)
    assert list(table["predicted"]) == ["cat", "dog", "dog", "dog"]
    assert table["prob"].tolist() == pytest.approx([0.3, 0.5, 0.8, 0.6])
    kl = [sum(p * math.log(p / q) for p, q in zip([0.2, 0.6, 0.2], row)) for row in
          ([0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.1, 0.8, 0.1], [0.2, 0.6, 0.2])]  # fmt: skip
    assert table["kl"].tolist() == pytest.approx(kl, abs=1e-6)
    assert nv.network_depth(result) == 2  # from layer2.0 on every unit reads dog
    assert "Prediction depth (tuned lens) 2 of 4" in nv.depth_text(result) and "layer2.0" in nv.depth_text(result)
    assert list(nv.lens_figure(result, CLASSES).data[0].x) == list(result.units)
    none = explanation(log_q=None, log_p=None, lens_source="no tuned lens")
    assert nv.lens_table(none, CLASSES) is None and nv.lens_figure(none, CLASSES) is None
    assert nv.depth_text(none) is None


def test_gradcam_strip_has_one_panel_per_unit_over_the_image() -> None:
    pixels = np.zeros((8, 8, 3), dtype=np.uint8)
    figure = nv.gradcam_figure(explanation(), pixels, CLASSES)
    images = [t for t in figure.data if t.type == "image"]
    maps = [t for t in figure.data if t.type == "heatmap"]
    assert len(images) == len(maps) == 4 and [a.text for a in figure.layout.annotations] == list(explanation().units)
    assert np.asarray(maps[0].z).shape == (8, 8) and 0 <= np.min(maps[0].z) and np.max(maps[0].z) <= 1
    assert figure.layout.title.text.endswith(": dog")


@pytest.mark.parametrize("U, rows", [(4, [4]), (8, [8]), (9, [5, 4]), (12, [6, 6]), (17, [6, 6, 5])])
def test_gradcam_strip_rows_are_filled_evenly(U: int, rows: list[int]) -> None:
    names = tuple(f"blocks.{u}" for u in range(U))
    result = explanation(names=names, stages=names, units=names, cam=torch.rand(U, 4, 4), methods=("skip",) * U,
                         residual=(True,) * U, drops=torch.zeros(U), ablated=torch.ones(U, dtype=torch.long))
    figure = nv.gradcam_figure(result, np.zeros((8, 8), dtype=np.uint8), CLASSES)
    panels = [(t.xaxis, t.yaxis) for t in figure.data if t.type == "image"]
    by_row = {}
    for x, y in panels:  # one y axis per grid row, in order
        by_row.setdefault(figure.layout[y.replace("y", "yaxis")].domain, []).append(x)
    assert sorted((len(v) for v in by_row.values()), reverse=True) == rows


def test_round_trip_through_tensors() -> None:
    result = explanation(branch="mlp", branched=True)
    again = NetworkExplanation.from_tensors(*result.to_tensors())
    assert again.names == result.names and again.methods == result.methods and again.residual == result.residual
    assert again.branch == "mlp" and again.branched is True
    assert torch.equal(again.drops, result.drops) and torch.equal(again.log_q, result.log_q)
    bare = NetworkExplanation.from_tensors(*explanation(log_q=None, log_p=None).to_tensors())
    assert bare.lens is None


def test_class_unit_table_from_the_stored_report() -> None:
    agrees = pd.DataFrame({"a": [2 / 3, 0.5, 1.0], "b": [1 / 3, 0.0, 1.0], "n": [3, 2, 1]},
                          index=pd.Index(["all", "cat", "eel"], name="class"))  # fmt: skip
    drops = pd.DataFrame({"a": [0.3, 0.1, 0.3, 0.5], "b": [0.4, 0.2, 0.4, 0.6], "n": [3, 1, 1, 1]},
                         index=pd.Index(["all", "cat", "dog", "eel"], name="class"))  # fmt: skip
    report = SimpleNamespace(tables={"lens_agrees/true": agrees, "drops/predicted": drops})
    table = nv.stored_class_units(report, "agrees")
    assert table is agrees
    assert nv.stored_class_units(report, "drop", "predictions") is drops
    assert nv.stored_class_units(report, "kl") is None and nv.stored_class_units(SimpleNamespace(), "kl") is None
    figure = nv.class_unit_heatmap(table, "agrees", "t", apart=["b"])  # a lens reads every unit alike
    assert list(figure.data[0].x) == ["a", "b"] and figure.data[0].colorbar.title.text == nv.CLASS_UNIT_VALUES["agrees"]
    split = nv.class_unit_heatmap(drops, "drop", "t", apart=["a"])  # a's drops: whole output replaced, apart
    kept, apart = split.data
    assert list(kept.x) == ["b"] and list(apart.x) == ["a"] and (kept.xaxis, apart.xaxis) == ("x", "x2")
    assert apart.z.tolist() == [[0.3], [0.1], [0.3], [0.5]] and kept.colorbar.x != apart.colorbar.x
    assert [a.text for a in split.layout.annotations] == [nv.KEPT_PANEL, nv.APART_PANEL]


def test_agreement_view_keeps_its_interval_and_n() -> None:
    frame = pd.DataFrame({"score": ["gradient norm", "activation norm"], "intervention": ["resample", "skip"],
                          "spearman_mean": [0.41, float("nan")],
                          "ci_low": [0.3, float("nan")], "ci_high": [0.5, float("nan")],
                          "n": [1000, 1000]})  # fmt: skip
    view = nv.agreement_view(frame)
    assert view.iloc[0, 2] == "0.410 [0.300, 0.500]" and view.iloc[1, 2] == "–" and view.iloc[0, 3] == "1,000"
    assert view.iloc[1, 1] == "skip"


def test_lens_summary_view_names_what_does_not_apply() -> None:
    lens = {"fit": {"exact": ["b"], "epochs_run": [37, 0], "best_epoch": [27, 0]},
            "units": [{"unit": "a", "kl": 0.5, "logit_kl": None, "constant_kl": 1.25, "agreement": 0.625},
                      {"unit": "b", "kl": 0.0, "logit_kl": None, "constant_kl": 1.25, "agreement": 1.0}]}  # fmt: skip
    view = nv.lens_summary_view(lens)
    assert view["logit lens KL (nats)"].tolist() == ["–", "–"] and view["best constant KL (nats)"][0] == "1.250"
    assert view["agrees with the network"].tolist() == ["62.5%", "100.0% (identity: by construction)"]
    assert view["epochs (run, best)"].tolist() == ["37, 27", "–"]
    assert nv.lens_summary_view({"fit": {"kl": [0.5]}}) is None  # a report written before the summary


def test_patching_without_alpha_keeps_the_layer_names() -> None:
    """A head without α (the own classifier, Concat, LastLayer) has no third row of bars: its layer names show
    under the second row instead of vanishing with the empty one."""
    table = pd.DataFrame({"layer": ["l1", "l2"], "patched": [True, True], "prob_change": [0.1, 0.2],
                          "logit_diff_change": [0.3, 0.4], "alpha_change": [np.nan, np.nan],
                          "prediction": ["a", "b"]})  # fmt: skip
    figure = effects_figure(table, "backbone", "a", "a", "b", "n/a: lastlayer has no layer weights α(x)")
    assert figure.layout.xaxis2.showticklabels is True
    with_alpha = effects_figure(table.assign(alpha_change=[0.1, 0.2]), "backbone", "a", "a", "b")
    assert with_alpha.layout.xaxis2.showticklabels is not True  # unchanged where α has bars


def test_the_unit_profile_caption_escapes_every_name_it_reads() -> None:
    """A trusted Markdown builder (tests/pages/test_untrusted_text.py): class, unit and source names read from a
    checkpoint come out plain; its own code spans stay."""
    from laya.app.text import plain

    hostile = "![px](http://x/a.png) **b**"
    result = explanation(names=("layer1.0", hostile, "layer2.1", "layer3.0"), reference_source=hostile)
    caption = nv.unit_profile_caption(result, ["cat", hostile, "eel"])
    before, code, after = caption.split("`")  # the one lost unit, in one code span (where Markdown is inert)
    assert "![px](" in code and "![px](" not in before + after and plain(hostile) in before


def test_agreement_view_shows_a_missing_n_as_a_dash() -> None:
    """``int(NaN)`` raised on a row whose ``n`` was not a number; such a row now shows "–"."""
    frame = pd.DataFrame({"score": ["gradient norm"], "intervention": ["resample"], "spearman_mean": [0.41],
                          "ci_low": [0.3], "ci_high": [0.5], "n": [float("nan")]})  # fmt: skip
    assert nv.agreement_view(frame).iloc[0, 3] == "–"


def test_agreement_view_names_the_baselines_and_what_is_trusted() -> None:
    """Baseline rows say so; each score its margin over the better baseline and whether it is trusted; the summary
    names the best trusted score, or says that none beats structure alone."""
    frame = pd.DataFrame({"score": ["integrated_gradients", "grad_x_act", "unit_mean", "random"],
                          "intervention": ["resample"] * 4, "spearman_mean": [0.8, 0.5, 0.6, 0.0],
                          "ci_low": [0.7, 0.4, 0.5, -0.1], "ci_high": [0.9, 0.6, 0.7, 0.1], "n": [50] * 4,
                          "kind": ["score", "score", "baseline", "baseline"], "units": [8] * 4,
                          "vs_baseline": [0.2, -0.1, float("nan"), float("nan")],
                          "vs_low": [0.1, -0.2, float("nan"), float("nan")],
                          "vs_high": [0.3, 0.0, float("nan"), float("nan")],
                          "trusted": [True, False, False, False]})  # fmt: skip
    view = nv.agreement_view(frame)
    assert view["units per input (keep the input)"].tolist() == ["8"] * 4
    assert view["beats the better baseline by [95% CI]"].tolist() == [
        "0.200 [0.100, 0.300]", "-0.100 [-0.200, 0]", "baseline", "baseline"]
    assert view["trusted"].tolist() == ["yes", "no", "baseline", "baseline"]
    summary = nv.agreement_summary(frame, "resample")
    assert summary.startswith("Trusted against resample: integrated gradients") and "8 units" in summary
    none = nv.agreement_summary(frame.assign(trusted=False), "resample")
    assert none.startswith("No cheap score beats what structure alone gives")
    old = nv.agreement_summary(frame[["score", "intervention", "spearman_mean", "ci_low", "ci_high", "n"]], "resample")
    assert "predates the baselines" in old
    assert nv.agreement_view(frame.iloc[:, :6])["trusted"].tolist() == ["–"] * 4  # a report from before


def test_the_lesion_figure_names_the_intervention_and_hatches_the_fallback() -> None:
    from laya.analysis.network.lesion import CURVE_COLUMNS, SINGLE_COLUMNS, LesionStudy

    single = pd.DataFrame([["skip", "bn1", "resample", 0.2, 0.1, 0.3, 0.6, 0.5, 0.7, 0.0],
                           ["skip", "layer1.0", "skip", 0.7, 0.6, 0.8, 0.1, 0.0, 0.2, 0.1],
                           ["resample", "bn1", "resample", 0.2, 0.1, 0.3, 0.6, 0.5, 0.7, 0.0],
                           ["resample", "layer1.0", "resample", 0.5, 0.4, 0.6, 0.3, 0.2, 0.4, 0.0]],
                          columns=list(SINGLE_COLUMNS))  # fmt: skip
    curve = pd.DataFrame([[0, 1, 0.8, 0.0, 0.8, 0.8], [1, 3, 0.7, 0.0, 0.7, 0.7]], columns=list(CURVE_COLUMNS))
    study = LesionStudy(20, [0.8, 0.6, 0.9], single, {}, curve)
    figure = nv.lesion_figure(study, "skip", [False, True])
    kept, apart, band, mean = figure.data  # bn1 has no shortcut: its own panel, never on layer1.0's axis
    assert "skipped" in figure.layout.title.text and list(kept.x) == ["layer1.0"] and list(apart.x) == ["bn1"]
    assert (kept.yaxis, apart.yaxis, mean.yaxis) == ("y", "y2", "y3")
    assert list(kept.y) == [0.7] and list(apart.y) == [0.2] and list(apart.error_y.array) == pytest.approx([0.1])
    assert list(apart.marker.pattern.shape) == [palette.FLIP_PATTERN]  # bn1 could not be skipped
    assert list(mean.x) == [0, 1] and list(mean.y) == [0.8, 0.7] and list(band.y) == [0.8, 0.7, 0.7, 0.8]
    resampled = nv.lesion_figure(study, "resample", [True, True])  # every unit kept: one panel of bars
    assert "resampled" in resampled.layout.title.text and list(resampled.data[0].y) == [0.2, 0.5]
    assert list(resampled.data[0].marker.pattern.shape) == ["", ""] and resampled.data[1].yaxis == "y2"


def test_the_units_that_do_not_keep_the_input_are_reported_apart_from_the_agreement() -> None:
    """Named in the summary, with their own numbers: the mean drop and each score's Spearman over inputs with it."""
    g = torch.Generator().manual_seed(0)
    drops = torch.rand(40, 3, generator=g, dtype=torch.float64)
    scores = {"grad_x_act": drops * 2 + 1, "gradcam_mass": -drops}  # at bn1: ρ over inputs 1 and -1
    report = SimpleNamespace(units=["bn1", "layer1.0", "layer1.1"], residual=[False, True, True], method="resample",
                             drops=drops, scores=scores, options={"resamples": 200, "seed": 0})  # fmt: skip
    assert nv.apart_units(report) == ["bn1"]
    view = nv.apart_view(report)
    assert view["unit"].tolist() == ["bn1"] and view["inputs"].tolist() == ["40"]
    mean = float(drops[:, 0].mean())
    assert view["mean drop under resample [95% CI]"].iloc[0].startswith(nv.number_text(mean) + " [")
    assert view["gradient x activation: ρ over inputs [95% CI]"].iloc[0] == "1.000 [1.000, 1.000]"
    assert view["Grad-CAM mass: ρ over inputs [95% CI]"].iloc[0] == "-1.000 [-1.000, -1.000]"
    assert "`bn1`" in nv.apart_text(report) and "no shortcut" in nv.apart_text(report)
    kept = SimpleNamespace(**{**vars(report), "residual": [True] * 3})
    assert nv.apart_view(kept) is None and nv.apart_text(kept) is None
    frame = pd.DataFrame({"score": ["grad_x_act", "unit_mean"], "intervention": ["resample"] * 2,
                          "spearman_mean": [0.8, 0.6], "ci_low": [0.7, 0.5], "ci_high": [0.9, 0.7], "n": [40] * 2,
                          "kind": ["score", "baseline"], "units": [2] * 2, "vs_baseline": [0.2, float("nan")],
                          "vs_low": [0.1, float("nan")], "vs_high": [0.3, float("nan")], "trusted": [True, False]})
    assert "2 units that keep the input, within each input; bn1 reported apart" in nv.agreement_summary(
        frame, "resample", ["bn1"])  # fmt: skip
