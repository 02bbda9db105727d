import pytest
import torch
from captum.attr import IntegratedGradients

from laya.analysis.attribution import intrinsic_method, layer_attributions, methods_for, raw_attributions
from tests.model.test_heads import hidden, make


def prob_of(head, h, target):
    with torch.no_grad():
        return torch.softmax(head(h).logits, -1).gather(1, target[:, None]).squeeze(1)


@pytest.mark.parametrize("name", ["laya", "scalarmix", "concat", "lastlayer"])
def test_integrated_gradients_completeness(name):
    head, h = make(name), hidden()
    target = head(h).logits.argmax(-1)
    parts = raw_attributions(head, h, "integrated_gradients", target, steps=256)
    total = sum(p.sum(1) for p in parts)
    baseline = [r.expand_as(x) for r, x in zip(head.references, h)]
    expected = prob_of(head, h, target) - prob_of(head, baseline, target)
    assert torch.allclose(total, expected, atol=1e-4)


def test_summed_output_matches_captum_per_row_targets():
    head, h = make("laya"), hidden()
    target = torch.tensor([0, 1, 2, 3, 0, 1])
    ours = raw_attributions(head, h, "integrated_gradients", target, steps=8)

    def probs(*xs):
        return torch.softmax(head(list(xs)).logits, -1)

    baselines = tuple(r.expand_as(x) for r, x in zip(head.references, h))
    reference = IntegratedGradients(probs).attribute(tuple(h), baselines=baselines, target=target, n_steps=8)
    assert all(torch.allclose(a, b) for a, b in zip(ours, reference))


def test_saliency_and_grad_x_input_are_gradients():
    head, h = make("concat"), hidden()
    target = head(h).logits.argmax(-1)
    xs = [x.clone().requires_grad_() for x in h]
    p = torch.softmax(head(xs).logits, -1).gather(1, target[:, None]).sum()
    grads = torch.autograd.grad(p, xs)
    saliency = layer_attributions(head, h, "saliency", target)
    gxi = layer_attributions(head, h, "input_x_gradient", target)
    assert saliency.shape == (6, 3)
    assert torch.allclose(saliency, torch.stack([g.abs().sum(1) for g in grads], 1))
    assert torch.allclose(gxi, torch.stack([(g * x).sum(1) for g, x in zip(grads, h)], 1))  # signed by default
    magnitude = layer_attributions(head, h, "input_x_gradient", target, reduction="magnitude")
    assert torch.allclose(magnitude, torch.stack([(g * x).abs().sum(1) for g, x in zip(grads, h)], 1))
    with pytest.raises(ValueError, match="unknown reduction"):
        layer_attributions(head, h, "saliency", target, reduction="absolute")


def test_lastlayer_gives_zero_to_layers_it_ignores():
    head, h = make("lastlayer"), hidden()
    for method in ("integrated_gradients", "input_x_gradient", "saliency"):
        scores = layer_attributions(head, h, method, reduction="magnitude")
        assert torch.all(scores[:, :2] == 0) and torch.all(scores[:, 2] > 0)
        assert torch.all(layer_attributions(head, h, method)[:, :2] == 0)


def test_intrinsic_scores_and_method_lists():
    laya, mix, concat = make("laya"), make("scalarmix"), make("concat")
    h = hidden()
    assert torch.equal(layer_attributions(laya, h, "laya_alpha"), laya(h).layer_scores)
    assert intrinsic_method(mix) == "scalarmix_weights" and intrinsic_method(concat) is None
    assert methods_for(laya)[0] == "laya_alpha" and methods_for(laya)[-1] == "random"
    assert "laya_alpha" not in methods_for(concat)
    with pytest.raises(ValueError, match="not available"):
        layer_attributions(concat, h, "laya_alpha")
    with pytest.raises(ValueError, match="unknown post-hoc method"):
        layer_attributions(concat, h, "lime")


def test_random_control_is_seeded():
    head, h = make("laya"), hidden()
    a = layer_attributions(head, h, "random", seed=3)
    assert torch.equal(a, layer_attributions(head, h, "random", seed=3))
    assert not torch.equal(a, layer_attributions(head, h, "random", seed=4))
