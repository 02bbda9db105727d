"""The lesion study per true class as the Depth analytics page shows it (:mod:`laya.app.lesion_views`), from the
study of a tiny network with a known answer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from laya.analysis.network.lesion import lesion_study
from laya.app import lesion_views as lv
from laya.app import palette

CLASSES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def study():
    """Six inputs per class, all right when intact; removing u1 makes every input of class a wrong, u0 nothing."""
    labels = torch.arange(3).repeat(6)
    lesioned = torch.stack([labels, torch.where(labels == 0, torch.tensor(1), labels)], 1)  # (N, U)
    return lesion_study(labels, labels.clone(), {"skip": lesioned}, {"skip": ["skip", "skip"]}, None, None,
                        ["u0", "u1"], CLASSES, resamples=100)  # fmt: skip


def test_the_units_of_an_intervention(study) -> None:
    assert lv.lesion_class_units(study, "skip") == ["u0", "u1"] and lv.lesion_class_units(study, "resample") == []
    study_before = type(study)(study.n, study.intact, study.single, study.classes, study.curve)
    assert lv.lesion_class_units(study_before, "skip") == []


def test_the_figure_and_table_give_each_class_its_drop_with_ci(study) -> None:
    figure = lv.lesion_class_figure(study, "skip", "u1", "skipped")
    bar = figure.data[0]
    assert list(bar.x) == CLASSES and list(bar.y) == [1.0, 0.0, 0.0] and bar.marker.color == palette.LOO_DROP
    assert np.allclose(bar.error_y.array, 0) and "skipped" in figure.layout.title.text
    assert bar.hovertext[0].startswith("a (n = 6): intact 1.000 [1.000, 1.000], removed 0.000")
    table = lv.lesion_class_table(study, "skip", "u1")
    assert table["class"].tolist() == CLASSES and table["inputs"].tolist() == [6, 6, 6]
    assert table["drop [95% paired CI]"].tolist() == ["+1.000 [+1.000, +1.000]", "+0.000 [+0.000, +0.000]",
                                                      "+0.000 [+0.000, +0.000]"]  # fmt: skip
    assert table["accuracy removed [95% CI]"].iloc[0] == "0.000 [0.000, 0.000]"
    assert table["p"].iloc[0] == "p < 0.001" and table["p"].iloc[1] == "p = 1.000"
    with pytest.raises(ValueError, match="no per-class rows of 'u9'"):
        lv.lesion_class_table(study, "skip", "u9")
