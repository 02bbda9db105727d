"""laya.app.map_plots: the per-layer spatial map grids show laya's numbers, on one shared scale, honestly labelled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from laya.analysis.head.explain import explain_bytes
from laya.analysis.head.logit_attribution import logit_attribution
from laya.analysis.head.spatial import APPROXIMATE, DEFERRED, sample_class_maps
from laya.app import input_images
from laya.app.catalog import example_images
from laya.app.map_plots import NOT_KEPT, UNIT, MapRow, class_maps_figure, map_classes, maps_figure, no_maps_note
from laya.model.checkpoint import load_checkpoint

MODELS = Path(__file__).resolve().parents[2] / "models"
HEADS = ("laya", "scalarmix", "concat", "lastlayer")


def explained(setting: str, head: str, example: int = 0):
    checkpoint = load_checkpoint(MODELS / setting / head)
    data = example_images(MODELS / setting / head)[example].read_bytes()
    return checkpoint, explain_bytes(checkpoint, data)


def row(checkpoint, e, title: str = "") -> MapRow:
    return MapRow(title or checkpoint.meta.head.name, e, input_images.model_view(e, checkpoint.meta.input, 1))


def heatmaps(figure) -> list:
    return [t for t in figure.data if t.type == "heatmap"]


def terms_of(checkpoint, e) -> torch.Tensor:
    """The per-layer logit terms (L, C) of laya's logit attribution, from the hidden states recomputed here."""
    with torch.no_grad():
        hidden = checkpoint.model.backbone(e.model_input.unsqueeze(0))
    return logit_attribution(checkpoint.model.head, hidden).terms[0]


@pytest.mark.parametrize("head", HEADS)
def test_hover_numbers_equal_the_logit_attribution_bars(head: str) -> None:
    checkpoint, e = explained("cifar10-cnn", head)
    classes = map_classes(e)
    assert classes[0] == e.label and len(classes) == 10  # predicted first, every CIFAR-10 class kept
    terms = terms_of(checkpoint, e)
    for name in (e.label, classes[3]):
        figure = maps_figure([row(checkpoint, e)], name, weighted=True)
        c = e.classes.index(name)
        maps = heatmaps(figure)
        assert [m.meta["layer"] for m in maps] == list(e.layer_names) and {m.meta["kind"] for m in maps} == {"exact"}
        for i, trace in enumerate(maps):
            custom = np.asarray(trace.customdata)  # (H_i, W_i, 5): cell, map sum + offset, offset, term, weight
            assert custom[..., 3] == pytest.approx(float(terms[i, c]), abs=1e-5)  # the bar
            assert custom[..., 1] == pytest.approx(float(terms[i, c]), abs=1e-5)  # the map's sum + offset
            assert trace.meta["sum"] == pytest.approx(trace.meta["term"], abs=1e-5)
            assert custom[..., 0].sum() + trace.meta["offset"] == pytest.approx(float(terms[i, c]), abs=1e-5)
            # the colour is the cell's value per input pixel: the map covers the image once
            h, w = custom.shape[:2]
            assert np.asarray(trace.z) * 32 * 32 / (h * w) == pytest.approx(custom[..., 0], rel=1e-9, abs=1e-15)
            assert trace.dx * w == 32 and trace.dy * h == 32
        if head == "lastlayer":  # CAM: only the last layer votes
            assert all(np.abs(np.asarray(m.customdata)[..., 0]).max() == 0 for m in maps[:-1])


def test_one_symmetric_colour_scale_across_layers_and_heads_in_logit_units() -> None:
    rows = [row(*explained("cifar10-cnn", h)) for h in HEADS]
    figure = maps_figure(rows, rows[0].explanation.label)
    maps = heatmaps(figure)
    assert len(maps) == 4 * 5 and {m.coloraxis for m in maps} == {"coloraxis"}
    top = max(np.abs(np.asarray(m.z)).max() for m in maps)
    axis = figure.layout.coloraxis
    assert axis.cmin == -axis.cmax and axis.cmax == pytest.approx(top)
    assert axis.colorbar.title.text == UNIT and "logit" in UNIT
    assert [a.text for a in figure.layout.annotations if a.textangle == 90] == [r.title for r in rows]  # row titles
    alone = maps_figure(rows[:1], rows[0].explanation.label)  # the scale is the grid's: one head alone differs
    assert alone.layout.coloraxis.cmax <= axis.cmax


def test_unweighted_maps_are_divided_by_the_heads_layer_weight() -> None:
    checkpoint, e = explained("cifar10-cnn", "scalarmix")
    weighted = heatmaps(maps_figure([row(checkpoint, e)], e.label, weighted=True))
    plain = maps_figure([row(checkpoint, e)], e.label, weighted=False)
    with torch.no_grad():
        gamma_alpha = checkpoint.model.head.scale() * torch.softmax(checkpoint.model.head.w, 0)
    for i, (w, u) in enumerate(zip(weighted, heatmaps(plain))):
        assert u.meta["weight"] == pytest.approx(float(gamma_alpha[i]), rel=1e-6)
        assert np.asarray(u.customdata)[..., 0] == pytest.approx(np.asarray(w.customdata)[..., 0] / u.meta["weight"])
        assert u.meta["term"] == w.meta["term"]  # the bar itself is unchanged
    assert plain.layout.coloraxis.colorbar.title.text == f"{UNIT} ÷ layer weight"


def test_cls_token_layers_are_labelled_approximate_and_mlp_layers_na() -> None:
    checkpoint, e = explained("cifar10-vit", "laya")
    figure = maps_figure([row(checkpoint, e)], e.label)
    titles = [a.text for a in figure.layout.annotations]
    assert all(APPROXIMATE.replace(" (", "<br>(") in t for t in titles) and not any("exact" in t for t in titles)
    maps = heatmaps(figure)
    assert {m.meta["kind"] for m in maps} == {"approximate"} and all(m.meta["offset"] == 0 for m in maps)
    assert "approximate: not equal to the term" in maps[0].hovertemplate
    beyond = map_classes(e)[5]  # approximations are kept for the top 3 classes only
    assert not heatmaps(maps_figure([row(checkpoint, e)], beyond))
    data = example_images(MODELS / "cifar10-vit" / "laya")[0].read_bytes()
    lazy = explain_bytes(checkpoint, data, approximate=False)  # not computed yet: said so, nothing drawn
    figure = maps_figure([row(checkpoint, lazy)], lazy.label)
    assert not heatmaps(figure) and all(DEFERRED.replace(" (", "<br>(") in a.text for a in figure.layout.annotations)
    checkpoint, e = explained("fashion-mnist-mlp", "laya")
    assert e.spatial is None  # no layer has positions: nothing computed, nothing carried
    figure = maps_figure([row(checkpoint, e)], e.label)
    assert not heatmaps(figure) and len([t for t in figure.data if t.type == "image"]) == len(e.layer_names)
    assert [a.text for a in figure.layout.annotations] == [f"{n}<br><sup>n/a</sup>" for n in e.layer_names]
    assert "n/a for every layer" in no_maps_note([e])  # the pages say so instead of drawing this grid
    assert no_maps_note([e, explained("cifar10-vit", "concat")[1]]) is None  # approximate maps are maps


def test_a_class_not_kept_by_a_head_is_said_so() -> None:
    checkpoint, e = explained("cifar10-cnn", "laya")
    figure = maps_figure([row(checkpoint, e)], "no such class")
    assert not heatmaps(figure) and all(NOT_KEPT.replace(" (", "<br>(") in a.text for a in figure.layout.annotations)
    with pytest.raises(ValueError, match="no rows"):
        maps_figure([], e.label)


def test_class_maps_figure_shows_the_mean_maps_with_n_on_one_scale() -> None:
    checkpoint = load_checkpoint(MODELS / "cifar10-cnn" / "concat")
    maps = sample_class_maps(checkpoint)
    classes, layers = checkpoint.meta.classes, checkpoint.layer_names
    figure = class_maps_figure(maps, classes, layers, "correct")
    traces = heatmaps(figure)
    assert len(traces) == len(classes) * len(layers) and {t.coloraxis for t in traces} == {"coloraxis"}
    assert [a.text for a in figure.layout.annotations if "(n=" in a.text] == [
        f"{c} (n={n})" for c, n in zip(classes, maps.counts[1].tolist())
    ]
    for t in traces:
        assert t.meta["sum"] == pytest.approx(t.meta["term"], abs=1e-5)
    top = max(np.abs(np.asarray(t.z)).max() for t in traces)
    assert figure.layout.coloraxis.cmin == -figure.layout.coloraxis.cmax == pytest.approx(-top)


def test_map_sums_equal_the_bars_of_the_depth_pages_logit_attribution_chart() -> None:
    """The bar a user compares with: Depth analytics' per-layer logit attribution of the same input."""
    from laya.analysis.depth.input_depth import input_depth
    from laya.analysis.head.logit_attribution import top_class_table

    checkpoint, e = explained("cifar10-cnn", "laya", example=2)
    depth = input_depth(checkpoint, e.image, None)
    bars = top_class_table(depth.attribution, 0, e.classes, e.layer_names)  # what the Depth chart draws
    for name in bars["class"].unique():
        figure = maps_figure([row(checkpoint, e)], name)
        shown = {t.meta["layer"]: (t.meta["sum"], t.meta["term"]) for t in heatmaps(figure)}
        for _, bar in bars[(bars["class"] == name) & (bars["part"] != "bias")].iterrows():
            total, term = shown[bar["part"]]
            assert total == pytest.approx(bar["contribution"], abs=1e-5) and term == pytest.approx(
                bar["contribution"], abs=1e-5
            )
