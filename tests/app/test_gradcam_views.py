"""The Grad-CAM choice as the pages show it (:mod:`laya.app.gradcam_views`), and the strip's mark on the unit to use,
from a choice built by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from laya.analysis.network.gradcam_choice import ROW_COLUMNS, UNIT_COLUMNS, GradcamChoice
from laya.app import gradcam_views as gv
from laya.app import network_views as nv
from laya.app import palette
from tests.app.test_network_views import CLASSES, explanation

UNITS = ["layer1.0", "layer2.0", "layer2.1", "layer3.0"]  # the explanation's


def choice(win: bool = True) -> GradcamChoice:
    """layer2.1 beats random on ROAD and deletion (when ``win``), every other difference a tie."""
    rows = []
    for metric in ("insertion", "road", "deletion"):
        for unit in UNITS:
            good = win and unit == "layer2.1" and metric != "insertion"
            d = (0.2 if metric == "road" else -0.1) if good else 0.01
            low, high = (d - 0.05, d + 0.05) if good else (-0.02, 0.04)
            rows.append([unit, metric, 0.5, 0.4, 0.6, 0.5 - d, 0.4, 0.6, d, low, high, 0.0 if good else 0.5,
                         0.0 if good else 1.0])
    units = pd.DataFrame([[u, 8 // (i + 1), 8 // (i + 1), 0.01 * (i + 1), 2.0 + i] for i, u in enumerate(UNITS)],
                         columns=list(UNIT_COLUMNS))  # fmt: skip
    return GradcamChoice(40, 0, pd.DataFrame(rows, columns=list(ROW_COLUMNS)), units, 0.005, 0.02)


def test_the_table_gives_each_unit_its_differences_wins_and_cost() -> None:
    table = gv.gradcam_choice_table(choice())
    row = table.set_index("unit").loc["layer2.1"]
    assert row["road: unit − random [95% CI]"] == "+0.200 [+0.150, +0.250] ✔"
    assert row["insertion: unit − random [95% CI]"] == "+0.010 [-0.020, +0.040]"  # a tie: no mark
    assert row["beats random on"] == "2 of 3" and row["use"] == "✔" and row["grid"] == "2×2"
    assert table["use"].tolist() == ["", "", "✔", ""] and table["× one forward"].tolist()[0] == "2.00"
    assert table["beats random on"].tolist() == ["0 of 3", "0 of 3", "2 of 3", "0 of 3"]


def test_the_figure_fills_the_markers_of_units_that_beat_random() -> None:
    figure = gv.gradcam_choice_figure(choice())
    assert [a.text for a in figure.layout.annotations] == list(gv.METRIC_LABELS.values())
    road = figure.data[1]
    assert list(road.x) == UNITS and list(road.y) == [0.01, 0.01, 0.2, 0.01]
    assert list(road.marker.color) == [palette.NEUTRAL, palette.NEUTRAL, palette.ACCURACY, palette.NEUTRAL]
    assert list(road.marker.symbol) == ["circle-open", "circle-open", "circle", "circle-open"]
    assert np.allclose(road.error_y.array, [0.03, 0.03, 0.05, 0.03]) and np.allclose(road.error_y.arrayminus,
                                                                                      [0.03, 0.03, 0.05, 0.03])
    assert all("beats random" not in t for t in figure.data[0].hovertext)  # insertion: none
    assert figure.layout.title.text.endswith("(40 test images): layer2.1")
    assert gv.gradcam_choice_figure(choice(win=False)).layout.title.text.endswith(": none")


def test_the_caption_names_the_unit_or_says_none_beats_random() -> None:
    text = gv.gradcam_choice_caption(choice())
    assert text.startswith("The unit to use is layer2.1") and "40 test images" in text and "not a segmentation" in text
    assert gv.gradcam_choice_caption(choice(win=False)).startswith("No unit's map beats a random one")


def test_the_strip_frames_the_unit_to_use() -> None:
    pixels = np.zeros((8, 8, 3), dtype=np.uint8)
    marked = nv.gradcam_figure(explanation(), pixels, CLASSES, chosen="layer2.1")
    assert [a.text for a in marked.layout.annotations] == ["layer1.0", "layer2.0", f"layer2.1{gv.CHOSEN_MARK}",
                                                           "layer3.0"]  # fmt: skip
    (frame,) = marked.layout.shapes
    assert (frame.xref, frame.yref, frame.line.color) == ("x3 domain", "y3 domain", palette.ACCURACY)
    assert [t.xaxis for t in marked.data if t.type == "image"][2] == "x3"  # the third panel's own axes
    plain = nv.gradcam_figure(explanation(), pixels, CLASSES)
    assert not plain.layout.shapes and all(gv.CHOSEN_MARK not in a.text for a in plain.layout.annotations)
    first = nv.gradcam_figure(explanation(cam=torch.rand(4, 4, 4)), pixels, CLASSES, chosen="layer1.0")
    assert first.layout.shapes[0].xref == "x domain"
