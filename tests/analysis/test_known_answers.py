"""Known-answer tests for the faithfulness pipeline: synthetic heads whose layer effects are set by
construction, so every metric has a value it must take."""

import pytest
import torch

from laya.analysis.head.ablation import leave_one_out
from laya.analysis.head.attribution import layer_attributions, raw_attributions, reduce_layers
from laya.analysis.head.faithfulness import NOT_APPLICABLE, per_input_metrics
from laya.model.heads import LinearHead
from tests.model.test_heads import DIMS, C, hidden, make


def concat_weighted(weights: tuple[float, ...]) -> LinearHead:
    """Concat whose logits are ``sum_i weights[i] * A h_i`` (one fixed random map per layer, scaled)."""
    torch.manual_seed(0)
    head = LinearHead(DIMS, C, layers="all").double().eval()
    with torch.no_grad():
        blocks = torch.split(torch.randn(C, sum(DIMS), dtype=torch.float64) * 3, DIMS, dim=1)
        head.linear.weight.copy_(torch.cat([w * b for w, b in zip(weights, blocks)], dim=1))
        head.linear.bias.zero_()
    return head


@pytest.mark.parametrize("k", range(len(DIMS)))
def test_only_layer_k_matters_gives_loo_argmax_k_and_no_testable_ranking(k):
    weights = tuple(1.0 if i == k else 0.0 for i in range(len(DIMS)))
    head, h = concat_weighted(weights), hidden(batch=50)
    for mode in head.modes:
        drops = leave_one_out(head, h, mode).drops
        moved = drops.abs().sum(0) > 0
        assert moved.tolist() == [i == k for i in range(len(DIMS))], mode  # exact zeros elsewhere
        assert (drops.argmax(1)[drops[:, k] > 0] == k).all()
        metrics = per_input_metrics(drops, drops)  # even the oracle's own ranking is not testable
        assert torch.isnan(metrics["top1"]).all() and torch.isnan(metrics["spearman_eps"]).all()


def test_dominant_layer_exact_method_scores_one_and_a_reversed_one_zero():
    head, h = concat_weighted((0.6, 0.3, 2.0)), hidden(batch=200, seed=1)
    drops = leave_one_out(head, h, "mean").drops
    testable = ~torch.isnan(per_input_metrics(drops, drops)["top1"])
    assert testable.sum() > 50 and int(drops.mean(0).argmax()) == 2
    exact = per_input_metrics(drops, drops)  # an exact method: its scores are the LOO drops
    assert exact["top1"][testable].eq(1).all()
    assert exact["deletion_at_1_norm"][testable].tolist() == pytest.approx([1.0] * int(testable.sum()))
    assert exact["spearman_eps"][testable].eq(1).all()
    reversed_ = per_input_metrics(-drops, drops)
    assert reversed_["top1"][testable].eq(0).all()
    assert (reversed_["spearman_eps"][testable] <= -1 + 1e-12).all()


def test_constant_scorer_does_not_score_perfectly_on_lastlayer():
    head, h = make("lastlayer"), hidden(batch=40)
    constant = torch.zeros(40, len(DIMS), dtype=torch.float64)
    constant[:, -1] = 1.0
    for mode in head.modes:
        drops = leave_one_out(head, h, mode).drops
        metrics = per_input_metrics(constant, drops)
        for metric in ("spearman_eps", "top1", "deletion_at_1_norm"):
            assert torch.isnan(metrics[metric]).all(), (mode, metric)  # "n/a", never 1.000
        assert NOT_APPLICABLE.startswith("n/a")


def test_alpha_is_a_distribution_over_layers():
    head, h = make("laya"), hidden(batch=30)
    alpha = layer_attributions(head, h, "laya_alpha")
    assert (alpha >= 0).all()
    assert torch.allclose(alpha.sum(1), torch.ones(30, dtype=torch.float64))


@pytest.mark.parametrize("name", ["laya", "scalarmix", "concat", "lastlayer"])
def test_integrated_gradients_completeness_holds_for_the_signed_layer_sum(name):
    head, h = make(name), hidden()
    target = head(h).logits.argmax(-1)
    signed = reduce_layers(raw_attributions(head, h, "integrated_gradients", target, steps=256), "signed")
    with torch.no_grad():
        p = torch.softmax(head(h).logits, -1).gather(1, target[:, None]).squeeze(1)
        p0 = torch.softmax(head([r.expand_as(x) for r, x in zip(head.references, h)]).logits, -1)
        p0 = p0.gather(1, target[:, None]).squeeze(1)
    assert torch.allclose(signed.sum(1), p - p0, atol=1e-4)
    magnitude = reduce_layers(raw_attributions(head, h, "integrated_gradients", target, steps=256), "magnitude")
    assert (magnitude >= signed.abs() - 1e-12).all()


def test_zero_input_recomputes_alpha_and_equals_zero_for_linear_heads():
    laya, h = make("laya"), hidden(batch=8)
    keep = torch.tensor([False, True, True])
    zeroed = [torch.zeros_like(h[0]), h[1], h[2]]
    assert torch.allclose(laya(h, keep, "zero_input").logits, laya(zeroed).logits, atol=1e-12)
    assert not torch.allclose(laya(h, keep, "zero_input").logits, laya(h, keep, "zero").logits)
    concat = make("concat")
    assert torch.equal(concat(h, keep, "zero_input").logits, concat(h, keep, "zero").logits)
