"""laya.app.plots, depth_plots and palette: one unit per axis, a legend entry for every mark, a title on every
colorbar, one meaning per colour, spreads that stay inside their bounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from laya.analysis.head.explain import explain
from laya.app import classwise_views, depth_plots, head_comparison, palette, plots
from laya.app.catalog import example_images
from laya.data.images import load_image_tensor
from laya.model.checkpoint import load_checkpoint


@pytest.fixture(scope="module")
def explanations(tiny_models: Path):
    """LAYA with α + IG + Saliency, and LastLayer (IG only), on one example."""
    out = {}
    for head, posthoc in (("laya", ("integrated_gradients", "saliency")), ("lastlayer", ())):
        checkpoint = load_checkpoint(tiny_models / "colours-mlp" / head)
        data = example_images(tiny_models / "colours-mlp" / "laya")[0].read_bytes()
        spec = checkpoint.meta.input
        out[head] = explain(checkpoint, load_image_tensor(data, spec.channels, spec.source_size), posthoc=posthoc)
    return out


def test_layer_scores_one_unit_per_axis(explanations) -> None:
    e = explanations["laya"]
    alone = plots.layer_scores_figure(e, ["laya_alpha"])  # one unit: the raw weights on their own axis
    assert alone.layout.yaxis.title.text == "weight α_i (sums to 1)"
    assert alone.layout.yaxis2.title.text == plots.DROP_AXIS
    assert list(alone.data[0].y) == pytest.approx(e.scores["laya_alpha"].tolist()) and alone.data[0].yaxis == "y"
    assert list(alone.data[1].y) == pytest.approx(e.drops.tolist()) and alone.data[1].yaxis == "y2"
    assert alone.layout.xaxis.matches == "x2" or alone.layout.xaxis2.matches == "x"  # aligned panels
    assert "<br>" not in alone.layout.title.text  # one line: nothing to cut off

    mixed = plots.layer_scores_figure(e)  # α (weight), IG (probability), Saliency (gradient): normalised, said so
    assert mixed.layout.yaxis.title.text == plots.NORMALISED_AXIS
    for trace, method in zip(mixed.data, e.scores):
        raw = e.scores[method].double().numpy()
        assert list(trace.customdata) == pytest.approx(raw.tolist())
        assert list(trace.y) == pytest.approx((raw / np.abs(raw).max()).tolist())
    ig_only = plots.layer_scores_figure(e, ["integrated_gradients"])
    assert ig_only.layout.yaxis.title.text == "contribution to p(predicted)"
    assert plots.score_scale(["integrated_gradients", "input_x_gradient"]) == (False, "contribution to p(predicted)")


def test_every_mark_has_a_legend_entry(explanations) -> None:
    e = explanations["laya"]
    fig = plots.layer_scores_figure(e)
    drops = next(t for t in fig.data if t.name == plots.DROP_AXIS)
    flips = e.loo.flipped[0].tolist()
    assert drops.marker.color == palette.LOO_DROP
    assert list(drops.marker.pattern.shape) == [palette.FLIP_PATTERN if f else "" for f in flips]
    hatched = [t for t in fig.data if t.legendgroup == "flips"]
    assert len(hatched) == int(any(flips))  # a legend entry for the hatching exactly when a bar is hatched
    colors = {t.name: t.marker.color for t in fig.data}
    assert colors["LAYA α (intrinsic)"] == palette.ATTRIBUTION
    assert colors["Integrated Gradients (baseline: training mean) (post-hoc)"] == palette.ATTRIBUTION_POSTHOC


def test_compare_figure_rows_share_one_scale(explanations) -> None:
    es = [explanations["lastlayer"], explanations["laya"]]
    fig = plots.compare_figure(es, head_comparison.compare_titles(["lastlayer", "laya"], es))
    assert fig.layout.yaxis.title.text == plots.NORMALISED_AXIS  # IG and α differ in unit
    assert fig.layout.yaxis2.matches == "y" and fig.layout.yaxis4.matches == "y3"  # one scale per row
    assert fig.layout.yaxis3.title.text == plots.DROP_AXIS
    drops = [t for t in fig.data if t.name == plots.DROP_AXIS]
    assert [t.showlegend for t in drops] == [True, False]  # one legend entry per meaning
    assert [a.text for a in fig.layout.annotations] == ["LastLayer", "LAYA"]
    assert fig.layout.legend.yanchor == "top" and fig.layout.legend.y < 0 and fig.layout.margin.b >= 100  # below
    assert "<br>" not in fig.layout.title.text  # the legend under the x titles, nothing over the titles
    both_laya = plots.compare_figure([explanations["laya"]] * 2, ["a", "b"])
    assert both_laya.layout.yaxis.title.text == "weight α_i (sums to 1)"  # same unit: raw values


def test_palette_gives_one_meaning_per_colour() -> None:
    assert not set(palette.SERIES) & set(palette.RESERVED.values())
    assert len(set(palette.RESERVED.values())) == len(palette.RESERVED)
    table = pd.DataFrame({"mode": ["mean"] * 2, "reduction": ["signed"] * 2, "label": ["a", "b"], "status": [None, ""]}
                         | {f"{m}{s}": [0.5, 0.6] for m in plots.FAITHFULNESS_PANELS for s in ("", "_low", "_high")})  # fmt: skip
    faith = plots.faithfulness_figure(table)
    assert {t.marker.color for t in faith.data} == {palette.FAITHFULNESS}  # a metric is never LOO-drop orange
    assert faith.layout.xaxis.tickangle == -40  # long method names do not overlap
    heads = pd.DataFrame({"head": ["A", "B"], "accuracy": [0.9, 0.8], "accuracy_low": [0.85, 0.7], "accuracy_high": [0.95, 0.9],
                          "faithfulness": [0.5, None], "faithfulness_low": [0.4, None], "faithfulness_high": [0.6, None],
                          "status": ["", "n/a (one informative layer)"]})  # fmt: skip
    overview = plots.heads_overview_figure(heads)
    assert [t.marker.color for t in overview.data] == [palette.ACCURACY, palette.FAITHFULNESS]


def test_mean_interval_is_a_t_interval_inside_the_bounds() -> None:
    profile = pd.DataFrame({"mean": [0.02, 0.5, 0.3], "std": [0.2, 0.1, 0.1], "count": [5, 100, 1]})
    ci = plots.mean_interval(profile, (0.0, 1.0))
    half = stats.t.ppf(0.975, 99) * 0.1 / 10
    assert ci["low"][1] == pytest.approx(0.5 - half) and ci["high"][1] == pytest.approx(0.5 + half)
    assert ci["low"][0] == 0.0  # 0.02 - t * 0.2 / sqrt(5) < 0: clipped, an α cannot go below zero
    assert np.isnan(ci["low"][2])  # one input: no interval
    fig = plots.profile_bars_figure(profile.assign(layer=["a", "b", "c"]), "t", "scores", (0.0, 1.0))
    assert np.nanmin(np.array(fig.data[0].y, dtype=float) - np.array(fig.data[0].error_y.arrayminus, dtype=float)) >= 0
    assert plots.profile_bars_figure(profile.assign(layer=["a", "b", "c"]), "t", "loo").data[0].marker.color == palette.LOO_DROP


def test_colorbars_have_titles_and_the_selected_cell_is_outlined() -> None:
    profile = pd.DataFrame({"class": ["x", "x", "y", "y"], "class_index": [0, 0, 1, 1], "layer": ["l1", "l2"] * 2,
                            "layer_index": [0, 1] * 2, "subset": ["all"] * 4, "mean": [0.1, 0.9, 0.4, 0.6],
                            "std": [0.01] * 4, "count": [3, 3, 2, 2]})  # fmt: skip
    fig = plots.heatmap_figure(profile, "all", "t", "loo", "mean LOO drop")
    assert fig.data[0].colorbar.title.text == "mean LOO drop" and fig.data[0].colorscale[0][1] != ""
    fig = classwise_views.clickable_heatmap(fig, selected=("y", "l2"))
    (shape,) = fig.layout.shapes
    assert (shape.x0, shape.x1, shape.y0, shape.y1) == (0.5, 1.5, 0.5, 1.5)  # column l2, row y
    row = classwise_views.clickable_heatmap(plots.heatmap_figure(profile), selected=("x", None)).layout.shapes[0]
    assert (row.x0, row.x1, row.y0, row.y1) == (-0.5, 1.5, -0.5, 0.5)  # the whole row of class x
    event = {"selection": {"points": [{"x": "l1", "y": "x"}, {"x": "l2", "y": "y"}]}}
    assert classwise_views.clicked_cell(event, ["x", "y"]) == ("y", "l2")
    assert classwise_views.clicked_class(event, ["x", "y"]) == "y"
    terms = pd.DataFrame({"class": ["a", "a"], "layer": ["l1", "l2"], "layer_index": [0, 1], "mean": [0.2, -0.1]})
    assert depth_plots.class_terms_figure(terms).data[0].colorbar.title.text.startswith("mean contribution")


def test_depth_charts_legends_and_facets() -> None:
    path = pd.DataFrame({"layer": ["l1", "l2", "l3"], "confidence": [0.6, 0.7, 0.9], "class": ["b", "a", "a"],
                         "agrees": [False, True, True]})  # fmt: skip
    fig = depth_plots.readout_path_figure(path, depth=2, exit_layer=1)
    named = {t.name: t.marker.color for t in fig.data if t.type == "bar"}
    assert named == {"readout agrees with the final prediction": palette.CONFIDENCE,
                     "readout disagrees with the final prediction": palette.DISAGREE}  # fmt: skip
    rows = [{"criterion": c, "layers_kept": k, "accuracy": 0.8, "accuracy_low": 0.7, "accuracy_high": 0.9,
             "refit_accuracy": 0.85, "refit_low": 0.8, "refit_high": 0.9} for c in "ABCD" for k in (3, 2, 1)]  # fmt: skip
    fig = depth_plots.pruning_figure(pd.DataFrame(rows))
    assert [a.text for a in fig.layout.annotations] == list("ABCD")  # one panel per criterion, not 8 series on one
    assert {t.xaxis for t in fig.data} == {"x", "x2", "x3", "x4"}
    assert [t.name for t in fig.data if t.showlegend] == ["as pruned", "classifier re-fit"]


def test_the_page_icon_is_drawn_here_in_the_attribution_colour():
    """app.py's page icon is an image the server sends itself (a ``:material/…:`` icon is fetched from Google)."""
    from laya.app.palette import ATTRIBUTION, favicon

    icon = np.asarray(favicon(32))
    assert icon.shape == (32, 32, 4) and icon.dtype == np.uint8
    opaque = icon[icon[..., 3] == 255]
    assert 0.3 < len(opaque) / 32**2 < 0.6  # three bars, transparent between them
    assert {tuple(p[:3]) for p in opaque} == {tuple(int(ATTRIBUTION[i : i + 2], 16) for i in (1, 3, 5))}
