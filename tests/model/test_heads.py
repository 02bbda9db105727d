import pytest
import torch

from laya.model.heads import HeadConfig, LayaHead, LinearHead, ScalarMixHead, build_head

DIMS = (5, 4, 3)
C = 4


def hidden(batch: int = 6, seed: int = 0, dtype=torch.float64) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, d, generator=g, dtype=dtype) for d in DIMS]


def make(name: str, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    head = build_head(HeadConfig(name=name, d_star=6, scorer_hidden=7, **kw), DIMS, C).double().eval()
    head.set_references([torch.full((d,), 0.5 * (i + 1), dtype=torch.float64) for i, d in enumerate(DIMS)])
    return head


def laya_parts(head: LayaHead, h: list[torch.Tensor]):
    z = torch.stack([g(x) for g, x in zip(head.adapters, h)], dim=1)  # (B, L, d*)
    s = head.scorer(head.psi(z).flatten(1))  # (B, L)
    return z, s


@pytest.mark.parametrize("name", ["laya", "scalarmix", "concat", "lastlayer"])
def test_output_shapes_and_mask_forms(name):
    head, h = make(name), hidden()
    out = head(h)
    assert out.logits.shape == (6, C)
    if name in ("laya", "scalarmix"):
        assert out.layer_scores.shape == (6, 3)
        assert torch.allclose(out.layer_scores.sum(1), torch.ones(6, dtype=torch.float64))
    else:
        assert out.layer_scores is None
    all_kept = head(h, torch.ones(3, dtype=torch.bool)).logits
    assert torch.allclose(all_kept, out.logits)
    per_input = head(h, torch.ones(6, 3, dtype=torch.bool)).logits
    assert torch.allclose(per_input, out.logits)
    multi = head(h, torch.ones(1, 5, 3, dtype=torch.bool)).logits
    assert multi.shape == (6, 5, C)
    assert torch.allclose(multi[:, 2], out.logits)


def test_laya_equations_and_temperature():
    for tau in (0.5, 1.5, 4.0):
        head, h = make("laya", tau=tau), hidden()
        z, s = laya_parts(head, h)
        alpha = torch.softmax(s / tau, dim=1)
        out = head(h)
        assert torch.allclose(out.layer_scores, alpha)
        assert torch.allclose(out.logits, head.classifier((alpha.unsqueeze(-1) * z).sum(1)))
    # a higher temperature flattens alpha: log-ratios scale as 1/tau
    a1 = make("laya", tau=1.0)(hidden()).layer_scores
    a2 = make("laya", tau=2.0)(hidden()).layer_scores
    ratio1 = torch.log(a1[:, 0] / a1[:, 1])
    ratio2 = torch.log(a2[:, 0] / a2[:, 1])
    assert torch.allclose(ratio2, ratio1 / 2)


def test_psi_mlp_changes_scores_only():
    head, h = make("laya", psi="mlp"), hidden()
    assert isinstance(head.psi, torch.nn.Sequential)
    z, s = laya_parts(head, h)
    alpha = torch.softmax(s / head.tau, dim=1)
    assert torch.allclose(head(h).logits, head.classifier((alpha.unsqueeze(-1) * z).sum(1)))


@pytest.mark.parametrize("name", ["laya", "scalarmix"])
def test_mix_heads_zero_mode_drops_term_without_renormalising(name):
    head, h = make(name), hidden()
    z = head.project(h)
    alpha = head(h).layer_scores
    scale = head.gamma if name == "scalarmix" else 1.0
    for i in range(3):
        keep = torch.ones(3, dtype=torch.bool)
        keep[i] = False
        weights = alpha * keep
        expected = head.classifier(scale * (weights.unsqueeze(-1) * z).sum(1))
        assert torch.allclose(head(h, keep, "zero").logits, expected)


@pytest.mark.parametrize("name", ["laya", "scalarmix"])
def test_mix_heads_renormalise_mode(name):
    head, h = make(name), hidden()
    z = head.project(h)
    s = head.scores(z)
    scale = head.gamma if name == "scalarmix" else 1.0
    keep = torch.tensor([True, False, True])
    weights = torch.zeros_like(s)
    weights[:, keep] = torch.softmax(s[:, keep], dim=1)
    expected = head.classifier(scale * (weights.unsqueeze(-1) * z).sum(1))
    assert torch.allclose(head(h, keep, "renormalise").logits, expected)
    nothing = head(h, torch.zeros(3, dtype=torch.bool), "renormalise").logits
    assert torch.allclose(nothing, head.classifier.bias.expand(6, C))


@pytest.mark.parametrize("name", ["laya", "scalarmix", "concat", "lastlayer"])
def test_mean_mode_equals_replacing_the_input_by_its_reference(name):
    head, h = make(name), hidden()
    for i in range(3):
        keep = torch.ones(3, dtype=torch.bool)
        keep[i] = False
        replaced = [x if j != i else head.references[i].expand_as(x) for j, x in enumerate(h)]
        assert torch.allclose(head(h, keep, "mean").logits, head(replaced).logits)


@pytest.mark.parametrize("mode", ["zero", "zero_input"])
def test_linear_heads_zero_modes_zero_the_input(mode):
    concat, lastlayer, h = make("concat"), make("lastlayer"), hidden()
    for i in range(3):
        keep = torch.ones(3, dtype=torch.bool)
        keep[i] = False
        zeroed = [x if j != i else torch.zeros_like(x) for j, x in enumerate(h)]
        assert torch.allclose(concat(h, keep, mode).logits, concat(zeroed).logits)
        assert torch.allclose(lastlayer(h, keep, mode).logits, lastlayer(zeroed).logits)
    # LastLayer ignores earlier layers entirely; removing h_L leaves only the bias
    assert torch.allclose(lastlayer(h, torch.tensor([False, False, True]), mode).logits, lastlayer(h).logits)
    bias = lastlayer.linear.bias.expand(6, C)
    assert torch.allclose(lastlayer(h, torch.tensor([True, True, False]), mode).logits, bias)


@pytest.mark.parametrize("name", ["laya", "scalarmix"])
def test_mix_heads_zero_input_equals_zeroing_the_input_with_alpha_recomputed(name):
    head, h = make(name), hidden()
    for i in range(3):
        keep = torch.ones(3, dtype=torch.bool)
        keep[i] = False
        zeroed = [x if j != i else torch.zeros_like(x) for j, x in enumerate(h)]
        assert torch.allclose(head(h, keep, "zero_input").logits, head(zeroed).logits)


def test_scalarmix_scores_are_global():
    head = make("scalarmix")
    with torch.no_grad():
        head.w.copy_(torch.tensor([0.3, -1.0, 2.0]))
    scores = head(hidden()).layer_scores
    assert torch.allclose(scores, torch.softmax(head.w, 0).expand(6, 3))


def test_per_input_masks_apply_per_row():
    head, h = make("laya"), hidden()
    keep = torch.tensor([[True, True, False]] * 3 + [[False, True, True]] * 3)
    out = head(h, keep).logits
    assert torch.allclose(out[:3], head(h, torch.tensor([True, True, False])).logits[:3])
    assert torch.allclose(out[3:], head(h, torch.tensor([False, True, True])).logits[3:])


def test_bad_inputs_raise_clear_errors():
    head = make("laya")
    with pytest.raises(ValueError, match="expects 3 hidden tensors"):
        head(hidden()[:2])
    with pytest.raises(ValueError, match="expects 3 hidden tensors"):
        head([torch.randn(6, 5), torch.randn(6, 9), torch.randn(6, 3)])
    with pytest.raises(ValueError, match="layer mask must have shape"):
        head(hidden(), torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="supports ablation modes"):
        make("concat")(hidden(), torch.ones(3, dtype=torch.bool), "renormalise")
    with pytest.raises(ValueError, match="head.dstar = 3: unknown key; expected one of name, d_star"):
        HeadConfig.from_dict({"name": "laya", "dstar": 3})
    with pytest.raises(ValueError, match="head.name = .attention.: must be one of"):
        HeadConfig.from_dict({"name": "attention"})


def test_registry_builds_each_class():
    assert isinstance(make("laya"), LayaHead)
    assert isinstance(make("scalarmix"), ScalarMixHead)
    assert isinstance(make("concat"), LinearHead) and make("concat").selected == [0, 1, 2]
    assert make("lastlayer").selected == [2]
