import pytest
import torch

from laya.analysis.head.ablation import ablate, deletion_curve, float64_head, leave_one_out, loo_masks, topk_masks
from tests.model.test_heads import hidden, make


def slow_loo(head, h, mode):
    """The naive loop: one head call per removed layer."""
    with torch.no_grad():
        h64 = [x.double() for x in h]
        base = torch.softmax(head(h64).logits, -1)
        pred = base.argmax(-1)
        drops = []
        for i in range(head.num_layers):
            keep = torch.ones(head.num_layers, dtype=torch.bool)
            keep[i] = False
            after = torch.softmax(head(h64, keep, mode).logits, -1)
            drops.append(base.gather(1, pred[:, None]) - after.gather(1, pred[:, None]))
    return torch.cat(drops, 1), pred


@pytest.mark.parametrize("name", ["laya", "scalarmix", "concat", "lastlayer"])
def test_batched_loo_equals_the_per_layer_loop(name):
    head, h = make(name), hidden(batch=9)  # float64 throughout: the two must agree exactly
    for mode in head.modes:
        result = leave_one_out(head, h, mode)
        drops, pred = slow_loo(head, h, mode)
        assert torch.equal(result.prediction, pred)
        assert torch.allclose(result.drops, drops, atol=1e-12), mode
        assert torch.allclose(result.base_prob[:, None] - result.probs_after, result.drops)


@pytest.mark.parametrize("name", ["laya", "concat"])
def test_float32_model_gets_float64_drops(name):
    head32, h = make(name).float(), hidden(batch=9, dtype=torch.float32)
    result = leave_one_out(head32, h, "zero")
    assert result.drops.dtype == torch.float64
    drops, _ = slow_loo(make(name), [x.double() for x in h], "zero")
    assert torch.allclose(result.drops, drops, atol=1e-6)


def test_loo_masks_and_flips():
    masks = loo_masks(3)
    assert masks.shape == (1, 4, 3)
    assert masks[0, 0].all() and masks[0, 1:].sum(-1).tolist() == [2, 2, 2]
    assert [int(torch.nonzero(~m)) for m in masks[0, 1:]] == [0, 1, 2]
    head, h = make("lastlayer"), hidden()
    result = leave_one_out(head, h, "zero")
    # LastLayer: removing an earlier layer changes nothing; removing the last leaves only the bias
    assert torch.allclose(result.drops[:, :2], torch.zeros(6, 2, dtype=torch.float64))
    bias_class = int(head.linear.bias.argmax())
    assert torch.equal(result.flipped[:, 2], result.prediction != bias_class)


def test_topk_masks_remove_highest_scores_first_with_ties_in_layer_order():
    scores = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.5, 0.0]])
    masks = topk_masks(scores)
    assert masks.shape == (2, 4, 3)
    assert masks[0].tolist() == [[True, True, True], [True, False, True], [True, False, False], [False, False, False]]
    assert masks[1].tolist() == [[True, True, True], [False, True, True], [False, False, True], [False, False, False]]


def test_deletion_curve_first_point_is_loo_drop_of_top_layer_and_last_removes_all():
    head, h = make("laya"), hidden()
    scores = head(h).layer_scores
    curve = deletion_curve(head, h, scores)
    loo = leave_one_out(head, h)
    top = scores.argmax(1)
    assert torch.allclose(curve[:, 0], loo.drops[torch.arange(6), top])
    with torch.no_grad():
        empty = torch.softmax(head(h, torch.zeros(3, dtype=torch.bool)).logits, -1)
    assert torch.allclose(curve[:, -1], loo.base_prob - empty.gather(1, loo.prediction[:, None]).squeeze(1))


def test_ablate_requires_a_full_first_row():
    head, h = make("laya"), hidden()
    with pytest.raises(ValueError, match="row 0"):
        ablate(head, h, torch.zeros(1, 2, 3, dtype=torch.bool))


def test_float64_copy_is_cached_and_refreshed_after_weight_changes():
    head = make("laya").float()
    first = float64_head(head)
    assert first is float64_head(head) and next(first.parameters()).dtype == torch.float64
    with torch.no_grad():
        head.classifier.bias.add_(1.0)
    second = float64_head(head)
    assert second is not first
    assert torch.allclose(second.classifier.bias.float(), head.classifier.bias)
