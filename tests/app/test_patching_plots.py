"""The Activation patching page's figures: bars equal the pair table, α said n/a where a head has none."""

import numpy as np
import pandas as pd
import pytest

from laya.app.patching_plots import alpha_note, axis_titles, display_table, effects_figure, image_figure, patching_caption

NAN = float("nan")
TABLE = pd.DataFrame({
    "layer": ["l1", "l2", "l3", "all layers"],
    "patched": [True, False, True, True],
    "prob_change": [-0.25, NAN, 0.125, -0.5],
    "logit_diff_change": [-1.5, NAN, 0.75, -3.0],
    "alpha_change": [0.1, NAN, -0.2, NAN],
    "prediction": ["cat", "", "dog", "frog"],
    "probability": [0.6, NAN, 0.7, 0.9],
})  # fmt: skip


def test_effects_figure_rows_are_the_table():
    figure = effects_figure(TABLE, "head", "cat", "cat", "dog")
    prob, diff, alpha = figure.data
    assert list(prob.x) == ["l1", "l3", "all layers"]  # the unpatchable layer is left out
    assert list(prob.y) == [-0.25, 0.125, -0.5] and list(diff.y) == [-1.5, 0.75, -3.0]
    assert list(alpha.y[:2]) == [0.1, -0.2] and np.isnan(alpha.y[2])
    assert list(prob.customdata) == ["cat", "dog", "frog"] and (prob.yaxis, diff.yaxis, alpha.yaxis) == ("y", "y2", "y3")
    assert figure.layout.yaxis2.title.text == "Δ (logit cat − logit dog)" and "direct effect" in figure.layout.title.text
    assert axis_titles("cat", "cat", "dog")[0] == "Δ p(cat)"


def test_alpha_row_says_why_it_is_empty():
    note = alpha_note("concat", has_alpha=False)
    assert note == "n/a: concat has no layer weights α(x)" and alpha_note("laya", True) is None
    assert "0 by construction" in alpha_note("scalarmix", True)
    figure = effects_figure(TABLE, "backbone", "cat", "cat", "dog", note)
    assert len(figure.data) == 2 and [a.text for a in figure.layout.annotations] == [note]
    assert "total effect" in figure.layout.title.text
    with pytest.raises(ValueError, match="where must be"):
        effects_figure(TABLE, "middle", "cat", "cat", "dog")


def test_caption_counts_passes_and_image_figure():
    assert "4 backbone passes" in patching_caption("backbone", "laya", 4, 3) and "1 layer(s) have no module" in (
        patching_caption("backbone", "laya", 4, 3))  # fmt: skip
    assert "one batched head call (5 single layers" in patching_caption("head", "laya", 5, 5)
    grey = image_figure(np.full((4, 5), 7, dtype=np.uint8), "src")
    assert np.asarray(grey.data[0].z).shape == (4, 5, 3) and grey.layout.title.text == "src"


def test_html_export_carries_figure_table_and_source_image():
    from laya.app.export import html_report

    page = html_report("Activation patching", [("effects", effects_figure(TABLE, "head", "cat", "cat", "dog")),
                                               ("Per layer", TABLE),
                                               ("Source image", image_figure(np.zeros((2, 2, 3), np.uint8), "s"))])  # fmt: skip
    assert page.count('class="plotly-graph-div"') == 2 and "<td>all layers</td>" in page and "frog" in page


def test_display_table_formats_and_says_n_a():
    titles = axis_titles("cat", "cat", "dog")
    shown = display_table(TABLE, titles)
    assert list(shown[titles[0]]) == ["-0.2500", "n/a", "+0.1250", "-0.5000"]
    assert list(shown[titles[2]]) == ["+0.1000", "n/a", "-0.2000", "n/a"]
    assert list(shown["p(prediction after)"]) == ["0.600", "n/a", "0.700", "0.900"]
    assert list(shown["prediction"]) == ["cat", "n/a", "dog", "frog"]


UNITS = pd.DataFrame({
    "unit": ["bn1", "layer1.0", "layer2.0", "stem2"], "stage": ["bn1", "layer1", "layer2", "x"],
    "keeps input": [False, True, True, False], "intervention": ["resample"] * 4,
    "prob_change": [-0.5, -0.25, 0.125, 0.01], "logit_diff_change": [-3.0, -1.5, 0.75, 0.1],
    "prediction": ["frog", "cat", "dog", "cat"], "probability": [0.9, 0.6, 0.7, 0.5],
    "constructed": [True, False, False, False],
})  # fmt: skip


def test_the_unit_figure_leaves_out_rows_fixed_by_construction_and_draws_the_rest_apart():
    """bn1's row is the source's own output by construction: not drawn, named in the caption with its value; a unit
    without a shortcut whose row is not fixed (a head that reads a layer before it) gets its own axes."""
    from laya.app.patching_plots import unit_display_table, unit_effects_figure, unit_patching_caption

    figure = unit_effects_figure(UNITS, "cat", "cat", "dog")
    prob, logit, apart_prob, apart_logit = figure.data
    assert list(prob.x) == list(logit.x) == ["layer1.0", "layer2.0"] and list(apart_prob.x) == ["stem2"]
    assert list(prob.y) == [-0.25, 0.125] and list(logit.y) == [-1.5, 0.75] and list(apart_logit.y) == [0.1]
    assert len({prob.yaxis, logit.yaxis, apart_prob.yaxis, apart_logit.yaxis}) == 4  # no axis shared across them
    caption = unit_patching_caption(UNITS, "own classifier")
    assert "Not drawn: `bn1`" in caption and "by construction" in caption and "-0.5000" in caption
    assert "Drawn apart" in caption
    kept = UNITS.iloc[1:3]
    assert len(unit_effects_figure(kept, "cat", "cat", "dog").data) == 2
    assert "Not drawn" not in unit_patching_caption(kept, "own classifier")
    shown = unit_display_table(UNITS, axis_titles("cat", "cat", "dog"))
    assert shown["row"].tolist()[:2] == ["the source's own output by construction: not drawn", "drawn"]
    assert shown["Δ p(cat)"].tolist()[0] == "-0.5000" and "constructed" not in shown
