import pytest
import torch

from laya.analysis.pruning import keep_masks, pooled_features, pruning_curves, pruning_mode, removal_orders
from tests.model.test_heads import hidden, make


def test_keep_masks_remove_in_order():
    assert keep_masks(torch.tensor([2, 0, 1])).tolist() == [
        [True, True, True],
        [True, True, False],
        [False, True, False],
    ]


@pytest.mark.parametrize("name", ["laya", "scalarmix", "concat", "lastlayer"])
def test_pooled_features_are_the_output_layers_input(name):
    head, h = make(name), hidden(batch=5)
    keep = torch.tensor([True, False, True])
    features, logits = pooled_features(head, h, keep)
    with torch.no_grad():
        assert torch.allclose(head.output_layer(features), logits)
        assert torch.allclose(logits, head(h, keep, pruning_mode(head)).logits)


def test_pruning_curves_full_head_is_the_head_and_deepest_removal_has_a_speedup():
    head, h = make("laya"), hidden(batch=40)
    with torch.no_grad():
        out = head(h)
    labels = out.logits.argmax(-1)
    orders = removal_orders(head, h, out.layer_scores, random_orders=3)
    assert list(orders) == ["head weight", "LOO drop", "deepest first", "random"] and len(orders["random"]) == 3
    assert orders["deepest first"][0].tolist() == [2, 1, 0]
    cost = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    table = pruning_curves(head, (h, labels), (h, labels), orders, ["a", "b", "c"], cost, refit_steps=5, resamples=20)
    assert len(table) == 4 * 3
    full = table[table["layers_kept"] == 3]
    assert (full["accuracy"] == 1.0).all()
    deepest = table[table["criterion"] == "deepest first"].set_index("layers_kept")
    assert deepest["removes_deepest"].tolist() == [False, True, True]
    assert deepest.loc[2, "speedup"] == 2.0 and deepest.loc[1, "speedup"] == 4.0
    assert deepest.loc[1, "removed"] == "b, c"
    assert (table["refit_accuracy"].between(0, 1)).all()
