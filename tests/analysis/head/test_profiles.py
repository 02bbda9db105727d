import numpy as np
import pandas as pd
import pytest
import torch

from laya.analysis.head.profiles import class_layer_profile, heatmap_table, layer_profile, seed_table

LAYERS = ("l1", "l2")
CLASSES = ("cat", "dog")


def test_layer_profile_mean_and_std():
    values = torch.tensor([[0.2, 0.8], [0.4, 0.6]])
    table = layer_profile(values, LAYERS)
    assert table["mean"].tolist() == pytest.approx([0.3, 0.7])
    assert table["std"].tolist() == pytest.approx([0.1, 0.1])
    assert table["count"].tolist() == [2, 2]


def test_class_layer_profile_by_true_class_and_subset():
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.8]])
    labels = torch.tensor([0, 0, 1, 1])
    preds = torch.tensor([0, 1, 1, 1])  # input 1 is wrong
    table = class_layer_profile(values, labels, preds, CLASSES, LAYERS)

    def cell(subset, cls, layer):
        return table.query("subset == @subset and `class` == @cls and layer == @layer").iloc[0]

    assert cell("all", "cat", "l1")["mean"] == pytest.approx(0.5) and cell("all", "cat", "l1")["count"] == 2
    assert cell("correct", "cat", "l1")["mean"] == pytest.approx(1.0) and cell("correct", "cat", "l1")["count"] == 1
    assert cell("incorrect", "cat", "l2")["mean"] == pytest.approx(1.0)
    assert cell("correct", "dog", "l2")["mean"] == pytest.approx(0.65)
    empty = cell("incorrect", "dog", "l1")
    assert empty["count"] == 0 and np.isnan(empty["mean"])


def test_heatmap_table_is_class_by_layer_in_model_order():
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    table = class_layer_profile(values, torch.tensor([1, 0]), torch.tensor([1, 0]), CLASSES, LAYERS)
    wide = heatmap_table(table, "all")
    assert list(wide.index) == ["cat", "dog"] and list(wide.columns) == ["l1", "l2"]
    assert wide.loc["cat"].tolist() == [0.0, 1.0] and wide.loc["dog"].tolist() == [1.0, 0.0]
    assert heatmap_table(table, "all", "count").loc["dog", "l1"] == 1


def test_seed_table_is_layer_by_seed_in_model_order() -> None:
    rows = pd.DataFrame({"seed": [1, 1, 0, 0], "layer": ["b2", "b1", "b2", "b1"], "layer_index": [1, 0, 1, 0],
                         "mean": [0.4, 0.6, 0.9, 0.1]})  # fmt: skip
    table = seed_table(rows)
    assert table.index.tolist() == ["b1", "b2"] and table.columns.tolist() == [0, 1]
    assert table.to_numpy().tolist() == [[0.1, 0.6], [0.9, 0.4]]
