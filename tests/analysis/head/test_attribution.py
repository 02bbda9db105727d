import pytest
import torch
from captum.attr import IntegratedGradients

from laya.analysis.head.attribution import intrinsic_method, layer_attributions, methods_for, raw_attributions
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


@pytest.mark.parametrize("name", ["laya", "scalarmix", "concat", "lastlayer"])
@pytest.mark.parametrize("method", ["integrated_gradients", "integrated_gradients_zero"])
def test_batched_integrated_gradients_equal_captums_bit_for_bit(name, method):
    from laya.analysis.head.ablation import float64_head
    from laya.analysis.head.attribution import _summed_target_probability

    head, h = make(name), hidden()
    target = head(h).logits.argmax(-1)
    head64 = float64_head(head)
    inputs = tuple(x.detach().double().clone().requires_grad_() for x in h)
    fill = head64.fill("mean" if method == "integrated_gradients" else "zero")
    baselines = tuple(r.expand_as(x) for r, x in zip(fill, inputs))
    for steps in (1, 7, 32):
        ours = raw_attributions(head, h, method, target, steps=steps)
        captum = IntegratedGradients(_summed_target_probability(head64, target)).attribute(
            inputs, baselines=baselines, n_steps=steps, method="gausslegendre"
        )
        assert all(torch.equal(a, b) for a, b in zip(ours, captum)), steps
    with pytest.raises(ValueError, match="at least 1 step"):
        raw_attributions(head, h, method, target, steps=0)


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


def saturated_head():
    """Concat head on layers of width 1 with logits ``z_0 = 2 h_1``, ``z_1 = h_1``: at ``h_1 = 20`` the margin is
    20, ``p_0 = 1 - 2.1e-9`` rounds to 1.0 in float32, and the float32 softmax gradient loses ``p_0 (1 - p_0)``."""
    from laya.model.heads import LinearHead

    head = LinearHead([1, 1], 2, layers="all").eval()
    with torch.no_grad():
        head.linear.weight.copy_(torch.tensor([[2.0, 0.0], [1.0, 0.0]]))
        head.linear.bias.zero_()
    return head, [torch.tensor([[20.0]]), torch.tensor([[1.0]])]


def test_gradient_methods_do_not_underflow_on_a_saturated_softmax():
    head, h = saturated_head()
    target = torch.tensor([0])
    assert float(torch.softmax(head(h).logits.detach(), -1)[0, 0]) == 1.0  # saturated in float32
    # Analytic: dp_0/dh_1 = p_0 p_1 (w_0 - w_1) = p_0 p_1 (2 - 1), p_1 = sigmoid(-20); G×I = h_1 * that.
    p1 = 1.0 / (1.0 + torch.exp(torch.tensor(20.0, dtype=torch.float64)))
    gradient = (1 - p1) * p1
    # The float32 softmax path: dp_0/dz_0 = 1 * (1 - 1) = 0, dp_0/dz_1 = -p_1, so dp_0/dh_1 = -p_1 < 0: wrong sign.
    x = h[0].clone().requires_grad_()
    (float32_grad,) = torch.autograd.grad(torch.softmax(head([x, h[1]]).logits, -1)[0, 0], x)
    assert float32_grad.item() < 0 < gradient.item()
    gxi = layer_attributions(head, h, "input_x_gradient", target)
    assert gxi.dtype == torch.float64
    assert gxi[0, 0].item() == pytest.approx(20.0 * gradient.item(), rel=1e-9)
    assert gxi[0, 1].item() == 0.0
    assert layer_attributions(head, h, "saliency", target)[0, 0].item() == pytest.approx(gradient.item(), rel=1e-9)


def test_target_probability_is_the_softmax_with_a_gradient_that_survives_saturation():
    from laya.analysis.head.attribution import target_probability

    logits = torch.tensor([[40.0, 0.0, -3.0], [0.3, 0.1, 2.0]], dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 2])
    p = target_probability(logits, target)
    assert torch.allclose(p, torch.softmax(logits, -1).gather(1, target[:, None]).squeeze(1), rtol=1e-14)
    (grad,) = torch.autograd.grad(p.sum(), logits)
    q = torch.softmax(logits.detach(), -1)
    expected = -q.gather(1, target[:, None]) * q  # dp_t/dz_j = -p_t p_j for j != t
    # j = t: p_t (1 - p_t) = -sum_{j != t} dp_t/dz_j (a softmax is shift-invariant), never 1 - p_t: the naive
    # float64 softmax gradient is exactly 0 there for row 0 (margin 40).
    expected.scatter_(1, target[:, None], 0.0)
    expected.scatter_(1, target[:, None], -expected.sum(1, keepdim=True))
    assert torch.allclose(grad, expected, rtol=1e-10, atol=0)
    assert grad[0, 0].item() == pytest.approx(float(torch.exp(torch.tensor(-40.0, dtype=torch.float64))), rel=1e-9)


@pytest.mark.parametrize("name", ["laya", "concat"])
def test_integrated_gradients_zero_baseline_completeness(name):
    head, h = make(name), hidden()
    target = head(h).logits.argmax(-1)
    parts = raw_attributions(head, h, "integrated_gradients_zero", target, steps=256)
    expected = prob_of(head, h, target) - prob_of(head, [torch.zeros_like(x) for x in h], target)
    assert torch.allclose(sum(p.sum(1) for p in parts), expected, atol=1e-6)
    mean_baseline = raw_attributions(head, h, "integrated_gradients", target, steps=256)
    assert not torch.allclose(parts[0], mean_baseline[0])  # the baseline matters


def test_gradients_after_an_inference_mode_ablation_share_the_float64_copy():
    from laya.analysis.head.ablation import float64_head, leave_one_out

    head, h = make("concat").float(), [x.float() for x in hidden()]
    with torch.inference_mode():
        leave_one_out(head, h)  # makes the cached float64 copy under inference mode (as explain does)
    assert not any(t.is_inference() for t in float64_head(head).parameters())
    scores = layer_attributions(head, h, "input_x_gradient")
    assert scores.shape == (6, 3) and torch.isfinite(scores).all()
