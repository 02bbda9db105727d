"""Known answers for the exact per-layer spatial maps: positions sum to the layer's logit term."""

import pytest
import torch
from torch import nn

from laya.analysis.head.logit_attribution import logit_attribution
from laya.analysis.head.spatial import keep_maps, spatial_attribution
from laya.model.backbones import BackboneConfig, build_backbone, wrap
from laya.model.classifier import LayerwiseClassifier
from laya.model.heads import HeadConfig, build_head
from laya.model.own_head import own_head
from tests.model.backbones.test_calls import own_checkpoint

HEADS = ["laya", "scalarmix", "concat", "lastlayer"]


def model(backbone: BackboneConfig, head: str, seed: int = 0) -> LayerwiseClassifier:
    torch.manual_seed(seed)
    b = build_backbone(backbone)
    h = build_head(HeadConfig(name=head, d_star=8, scorer_hidden=9), b.layer_dims, 5)
    if head == "scalarmix":
        h.w.data = torch.tensor([0.3, -1.0, 2.0, 0.5][: len(b.layer_dims)] + [0.1] * (len(b.layer_dims) - 4))
        h.gamma.data.fill_(1.7)
    return LayerwiseClassifier(b, h).double().eval()


CNN = BackboneConfig(name="cnn", in_channels=3, input_size=16, widths=(4, 6, 8))
VIT_AVG = BackboneConfig(
    name="timm", in_channels=3, input_size=16, model="vit_tiny_patch16_224", pool="avg",
    model_kwargs={"img_size": 16, "patch_size": 4, "embed_dim": 16, "depth": 2, "num_heads": 2},
)  # fmt: skip
EFFNET = BackboneConfig(
    name="timm", in_channels=3, input_size=32, model="efficientnet_lite0", pre_logits=True,
    intermediates_kwargs={"extra_blocks": True},
)  # fmt: skip


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("backbone", [CNN, VIT_AVG], ids=["cnn", "vit-avg"])
def test_map_sums_plus_offsets_equal_the_layer_logit_terms(backbone, head):
    m = model(backbone, head)
    x = torch.randn(4, 3, backbone.input_size, backbone.input_size, dtype=torch.float64)
    out, spatial = spatial_attribution(m, x, top_k=3)
    assert spatial.classes.shape == (4, 3) and all(spatial.exact)
    # the terms are the head's own decomposition, and they rebuild the model's logits
    terms = logit_attribution(m.head, out.hidden)
    assert torch.allclose(terms.logits, out.logits, atol=1e-10)
    assert (spatial.layer_sums() - spatial.terms).abs().max() < 1e-10  # issue: within 1e-5
    every = torch.arange(5).expand(4, 5)  # all classes: maps + offsets + bias = the logits
    _, full = spatial_attribution(m, x, classes=every)
    assert torch.allclose(full.layer_sums().sum(1) + m.head.output_layer.bias.double(), out.logits, atol=1e-10)
    if head == "lastlayer":  # CAM: only the last layer has a non-zero map
        assert all(full.maps[i].abs().max() == 0 for i in range(len(full.maps) - 1))
        assert full.offsets.abs().max() == 0
    if head == "concat":
        assert full.offsets.abs().max() == 0


def test_cnn_map_is_cam_by_hand_and_shapes_follow_the_blocks():
    m = model(CNN, "lastlayer")
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    _, spatial = spatial_attribution(m, x, classes=torch.tensor([[1], [3]]))
    assert [tuple(s.shape) for s in spatial.maps] == [(2, 1, 8, 8), (2, 1, 4, 4), (2, 1, 2, 2)]
    f = m.backbone.blocks[2](m.backbone.blocks[1](m.backbone.blocks[0](x)))  # (2, 8, 2, 2)
    W = m.head.linear.weight.double()
    cam = torch.einsum("bchw,bc->bhw", f, W[[1, 3]]) / 4
    assert torch.allclose(spatial.maps[2][:, 0], cam, atol=1e-12)


def test_float32_model_is_exact_within_1e5():
    m = model(CNN, "laya").float()
    x = torch.randn(3, 3, 16, 16)
    _, spatial = spatial_attribution(m, x)
    assert (spatial.layer_sums() - spatial.terms).abs().max() < 1e-5


def test_efficientnet_with_pre_logits_layer_is_exact():
    m = model(EFFNET, "laya")
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    out, spatial = spatial_attribution(m, x, top_k=2)
    assert len(spatial.maps) == len(out.hidden) == 9 and all(spatial.exact)
    assert (spatial.layer_sums() - spatial.terms).abs().max() < 1e-8
    # the hooks are gone afterwards: the backbone runs as before
    assert "_pool" not in vars(m.backbone) and "forward_head" not in vars(m.backbone.model)


def test_cls_pooled_and_mlp_layers_have_no_exact_map():
    vit = model(BackboneConfig(**{**VIT_AVG.to_dict(), "pool": "cls"}), "laya")
    _, spatial = spatial_attribution(vit, torch.randn(2, 3, 16, 16, dtype=torch.float64))
    assert spatial.exact == [False, False] and torch.isnan(spatial.layer_sums()).all()
    with pytest.raises(ValueError, match="no exact spatial map"):
        spatial.upsampled(0, (16, 16))
    mlp = model(BackboneConfig(name="mlp", in_channels=1, input_size=4, widths=(6, 5)), "concat")
    _, spatial = spatial_attribution(mlp, torch.randn(3, 1, 4, 4, dtype=torch.float64))
    assert spatial.maps == [None, None]


def test_upsampled_density_keeps_the_sum_and_one_forward_only():
    m = model(CNN, "concat")
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    calls = []
    handle = m.backbone.register_forward_hook(lambda *a: calls.append(1))
    _, spatial = spatial_attribution(m, x)
    handle.remove()
    assert len(calls) == 1
    up = spatial.upsampled(1, (16, 16), mode="nearest")
    assert up.shape == (2, 3, 16, 16)
    assert torch.allclose(up.sum((-2, -1)), spatial.maps[1].sum((-2, -1)), atol=1e-12)
    bilinear = spatial.upsampled(1, (16, 16))
    assert torch.allclose(bilinear.sum((-2, -1)), spatial.maps[1].sum((-2, -1)), rtol=0.2, atol=1e-3)


def test_keep_maps_collects_the_tensors_the_backbone_pools():
    m = model(CNN, "laya")
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    with keep_maps(m.backbone) as maps, torch.no_grad():
        hidden = m.backbone(x)
    assert all(torch.equal(f.mean((2, 3)), h) for f, h in zip(maps, hidden))


def test_bad_classes_are_refused():
    m = model(CNN, "laya")
    with pytest.raises(ValueError, match="classes must be"):
        spatial_attribution(m, torch.randn(2, 3, 16, 16, dtype=torch.float64), classes=torch.tensor([1, 2]))


def test_wrapped_module_and_torchvision_resnet_are_exact():
    from torch import nn

    from laya.model.backbones import wrap

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ReLU())
    wrapped = wrap(net, ["1", "3"], input_size=16)
    head = build_head(HeadConfig(name="laya", d_star=8, scorer_hidden=9), wrapped.layer_dims, 5)
    m = LayerwiseClassifier(wrapped, head).double().eval()
    _, spatial = spatial_attribution(m, torch.randn(2, 3, 16, 16, dtype=torch.float64))
    assert [tuple(s.shape[-2:]) for s in spatial.maps] == [(16, 16), (8, 8)]
    assert (spatial.layer_sums() - spatial.terms).abs().max() < 1e-10
    resnet = model(BackboneConfig(name="torchvision", in_channels=3, input_size=32, model="resnet18",
                                  layers=["layer1", "layer4"]), "concat")  # fmt: skip
    _, spatial = spatial_attribution(resnet, torch.randn(2, 3, 32, 32, dtype=torch.float64))
    assert all(spatial.exact) and (spatial.layer_sums() - spatial.terms).abs().max() < 1e-8


def test_cls_layers_get_a_gradient_x_activation_approximation():
    from laya.analysis.head.spatial import token_gradient_maps

    vit = model(BackboneConfig(**{**VIT_AVG.to_dict(), "pool": "cls"}), "laya")
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    classes = torch.tensor([[0, 1], [2, 3]])
    maps = token_gradient_maps(vit, x, classes)
    assert [tuple(m.shape) for m in maps] == [(2, 2, 4, 4), (2, 2, 4, 4)]
    # by hand for the first layer, class 0 of input 0: d term / d tokens the attention reads (norm1's output)
    tokens = []
    h = vit.backbone.model.blocks[0].norm1.register_forward_hook(lambda m, a, out: tokens.append(out))
    with torch.enable_grad():
        hidden = vit.backbone(x)
        h.remove()
        term = vit.head.logit_terms(vit.head.encode(hidden))[0][0, 0, 0]
        (grad,) = torch.autograd.grad(term, tokens[0])
    expected = (grad * tokens[0])[0, 1:].sum(-1).reshape(4, 4)
    assert torch.allclose(maps[0][0, 0], expected, atol=1e-10)
    assert all(m.abs().max() > 1e-4 for m in maps)  # not the degenerate map of the block's (pre-norm) input
    block_input = []
    h = vit.backbone.model.blocks[0].register_forward_pre_hook(lambda m, a: block_input.append(a[0]))
    with torch.enable_grad():
        hidden = vit.backbone(x)
        h.remove()
        term = vit.head.logit_terms(vit.head.encode(hidden))[0][0, 0, 0]
        (grad,) = torch.autograd.grad(term, block_input[0])
    assert (grad * block_input[0])[0, 1:].sum(-1).abs().max() < 1e-6 * maps[0].abs().max() + 1e-8  # why: LayerNorm
    with pytest.raises(ValueError, match="pool='cls'"):
        token_gradient_maps(model(CNN, "laya"), torch.randn(1, 3, 16, 16, dtype=torch.float64), classes[:1])


def test_class_mean_maps_are_the_per_class_means_of_each_inputs_own_map():
    from laya.analysis.head.spatial import class_mean_maps

    m = model(CNN, "laya")
    x = torch.randn(7, 3, 16, 16, dtype=torch.float64)
    labels = torch.tensor([0, 1, 1, 4, 0, 0, 2])
    cm = class_mean_maps(m, [(x[:4], labels[:4]), (x[4:], labels[4:])], num_classes=5)  # two batches
    out, each = spatial_attribution(m, x, classes=labels.view(-1, 1))
    correct = out.logits.argmax(-1) == labels
    assert cm.subsets == ("all", "correct", "incorrect") and cm.size == 16
    for s, keep in enumerate([torch.ones(7, dtype=torch.bool), correct, ~correct]):
        for c in range(5):
            members = keep & (labels == c)
            assert int(cm.counts[s, c]) == int(members.sum())
            if not members.any():
                assert torch.isnan(cm.terms[s, c]).all()
                continue
            for i, layer_map in enumerate(each.maps):
                assert torch.allclose(cm.maps[i][s, c], layer_map[members, 0].mean(0), atol=1e-12)
            assert torch.allclose(cm.terms[s, c], each.terms[members, :, 0].mean(0), atol=1e-12)
    sums = torch.stack([mp.sum((-2, -1)) for mp in cm.maps], -1) + cm.offsets  # exact on the means too
    assert torch.allclose(sums.nan_to_num(), cm.terms.nan_to_num(), atol=1e-10)
    with pytest.raises(ValueError, match="share one square frame"):
        class_mean_maps(m, [(x[:2], labels[:2]), (torch.randn(2, 3, 8, 8, dtype=torch.float64), labels[:2])], 5)
    with pytest.raises(ValueError, match="no inputs"):
        class_mean_maps(m, [], 5)
    with pytest.raises(ValueError, match="would take"):  # 10^6 classes x (8x8 + 4x4 + 2x2) positions: bounded
        class_mean_maps(m, [(x[:2], labels[:2])], 10**6)


def test_explain_keeps_exact_maps_of_the_top_classes_from_its_one_forward():
    from pathlib import Path

    from laya.analysis.head.explain import MAP_CLASSES, explain
    from laya.data.images import load_image_tensor
    from laya.model.checkpoint import load_checkpoint

    setting = Path(__file__).resolve().parents[3] / "models" / "cifar10-cnn"
    checkpoint = load_checkpoint(setting / "scalarmix")
    image = load_image_tensor(sorted((setting / "examples").iterdir())[0], 3, 32)
    calls = []
    handle = checkpoint.model.backbone.register_forward_hook(lambda *a: calls.append(1))
    e = explain(checkpoint, image)
    handle.remove()
    assert len(calls) == 1  # the maps come from the explanation's own backbone pass
    s = e.spatial
    assert s.classes.shape == (1, MAP_CLASSES) and int(s.classes[0, 0]) == e.prediction and all(s.exact)
    _, direct = spatial_attribution(checkpoint.model, e.model_input.unsqueeze(0), classes=s.classes)
    assert all(torch.allclose(a, b, atol=1e-9) for a, b in zip(s.maps, direct.maps))
    assert (s.layer_sums() - s.terms).abs().max() < 1e-5


@pytest.mark.parametrize("setting", ["cifar10-cnn", "cifar10-vit", "fashion-mnist-mlp"])
def test_maps_are_thread_safe_on_a_shared_model(setting):
    """Dashboard sessions share one loaded model: concurrent explanations keep their own maps, and a plain
    forward of another thread while maps are kept is neither recorded nor changed."""
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from laya.analysis.head.explain import explain
    from laya.data.images import load_image_tensor
    from laya.model.checkpoint import load_checkpoint

    root = Path(__file__).resolve().parents[3] / "models" / setting
    checkpoint = load_checkpoint(root / "laya")
    spec = checkpoint.meta.input
    images = [load_image_tensor(p, spec.channels, spec.source_size) for p in sorted((root / "examples").iterdir())[:4]]
    serial = [explain(checkpoint, image).spatial for image in images]
    plain = checkpoint.preprocess(images[0].unsqueeze(0))
    with torch.no_grad():
        reference = checkpoint.model.backbone(plain)

    def run(k: int):
        if k % 3 == 2:  # a forward without maps, beside the others
            with torch.no_grad():
                return checkpoint.model.backbone(plain)
        return explain(checkpoint, images[k % 4]).spatial

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run, range(12)))
    for k, result in enumerate(results):
        if k % 3 == 2:
            assert all(torch.equal(a, b) for a, b in zip(result, reference))
            continue
        expected = serial[k % 4]
        if setting == "fashion-mnist-mlp":  # no layer has positions: no maps, whichever thread
            assert expected is None and result is None
            continue
        assert torch.equal(result.classes, expected.classes) and result.kinds == expected.kinds
        assert all((a is None and b is None) or torch.allclose(a, b, atol=1e-9, equal_nan=True)
                   for a, b in zip(result.maps, expected.maps))  # fmt: skip


def naive_decomposition(head, hidden, features, classes):
    """The maps as decompose computed them before its readouts were kept per head: every product afresh."""
    head64 = head.double()
    (z,) = head64.encode([h.double() for h in hidden])
    s = head64.scores(z)
    terms = logit_attribution(head, hidden).terms
    maps = []
    for i, feature in enumerate(features):
        coef = head64.scale() * torch.softmax(s, dim=-1)[:, i]
        M = head64.classifier.weight @ head64.adapters[i].weight
        f = feature.double().flatten(2).transpose(1, 2)
        maps.append(torch.einsum("bpd,bkd->bkp", f, M[classes]) * (coef / f.shape[1]).view(-1, 1, 1))
    return terms.gather(2, classes.unsqueeze(1).expand(-1, len(hidden), -1)), maps


@pytest.mark.parametrize("head", ["laya", "scalarmix"])
def test_kept_readouts_give_the_maps_of_every_product_afresh_and_follow_weight_changes(head):
    import copy

    from laya.analysis.head.spatial import decompose

    m = model(CNN, head)
    x = torch.randn(3, 3, 16, 16, dtype=torch.float64)
    classes = torch.tensor([[0, 2], [1, 4], [3, 0]])
    for step in range(2):  # the second time after an in-place change of the weights: nothing stale is kept
        with torch.no_grad(), keep_maps(m.backbone) as features:
            hidden = m.backbone(x)
        spatial = decompose(m.head, hidden, features, classes)
        terms, maps = naive_decomposition(copy.deepcopy(m.head), hidden, features, classes)
        assert (spatial.terms - terms).abs().max() < 1e-12
        for a, b in zip(spatial.maps, maps):
            assert (a.flatten(2) - b).abs().max() < 1e-12
        with torch.no_grad():
            m.head.classifier.weight.mul_(1.5)
            m.head.adapters[0].weight.add_(0.25)
    assert not torch.allclose(spatial.maps[0], decompose(m.head, hidden, features, classes).maps[0])


@pytest.mark.parametrize("setting", ["cifar10-vit", "cifar10-cnn"])
def test_deferred_approximation_changes_no_number_and_is_computed_on_request(setting):
    """``explain(approximate=False)`` (Inspect before its maps are opened) gives every number of the full
    explanation; the CLS-token layers' maps are marked deferred, then computed by ``approximate=True``."""
    from pathlib import Path

    from laya.analysis.head.explain import explain
    from laya.data.images import load_image_tensor
    from laya.model.checkpoint import load_checkpoint

    root = Path(__file__).resolve().parents[3] / "models" / setting
    checkpoint = load_checkpoint(root / "laya")
    image = load_image_tensor(sorted((root / "examples").iterdir())[0], 3, 32)
    full, lazy = explain(checkpoint, image), explain(checkpoint, image, approximate=False)
    assert torch.equal(full.probs, lazy.probs) and torch.equal(full.drops, lazy.drops)
    assert all(torch.equal(full.scores[k], lazy.scores[k]) for k in full.scores)
    for name in ("classes", "offsets", "terms", "weights"):
        assert torch.equal(getattr(full.spatial, name), getattr(lazy.spatial, name))
    if setting == "cifar10-cnn":  # exact maps only: nothing to defer, the same maps
        assert not any(lazy.spatial.deferred) and lazy.spatial.kinds == full.spatial.kinds == ["exact"] * 5
        assert all(torch.equal(a, b) for a, b in zip(full.spatial.maps, lazy.spatial.maps))
        return
    assert set(full.spatial.kinds) == {"approximate"} and set(lazy.spatial.kinds) == {"deferred"}
    assert all(m is None for m in lazy.spatial.maps) and lazy.spatial.deferred == full.spatial.approximate
    assert set(lazy.to_dict()) == set(full.to_dict())
    from laya.analysis.head.explain import Explanation

    again = Explanation.from_tensors(*lazy.to_tensors())  # a sandboxed worker's reply keeps the marks
    assert again.spatial.kinds == lazy.spatial.kinds


class NormedHead(nn.Module):
    """A network whose classifier reads a LayerNorm of the pooled map: its pre-logits is no plain average."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.norm = nn.LayerNorm(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(self.norm(self.stem(x).mean(dim=(2, 3))))


# per family: which layers have an exact map; the pre-logits one wherever it is a plain average of a map
PRE_LOGITS_EXACT = {"timm": [True] * 6, "torchvision": [True] * 5, "transformers": [False] * 3,
                    "wrapped": [True] * 4, "normed": [True, False]}  # fmt: skip


@pytest.mark.parametrize("head", ["own", "laya"])
@pytest.mark.parametrize("family", list(PRE_LOGITS_EXACT))
def test_spatial_attribution_with_a_pre_logits_layer_in_every_family(family, head):
    if family == "normed":
        torch.manual_seed(0)
        backbone = wrap(NormedHead(), ["stem"], input_size=32, pre_logits=True)
        m = LayerwiseClassifier(backbone, own_head(backbone))
    else:
        m = own_checkpoint(family).model
    if head == "laya":
        torch.manual_seed(0)
        m = LayerwiseClassifier(m.backbone, build_head(HeadConfig(d_star=8, scorer_hidden=9), m.backbone.layer_dims, 3))
    m = m.double().eval()
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    out, spatial = spatial_attribution(m, x, top_k=2)
    assert m.backbone.layer_names[-1] == "pre-logits" and spatial.exact == PRE_LOGITS_EXACT[family]
    exact = torch.tensor(spatial.exact)
    assert ((spatial.layer_sums() - spatial.terms)[:, exact].abs() < 1e-10).all()
    bias = m.head.output_layer.bias.detach()[spatial.classes]
    assert torch.allclose(spatial.terms.sum(1), out.logits.gather(1, spatial.classes) - bias, atol=1e-10)
    if head == "own" and spatial.exact[-1]:  # the network's own head: CAM on the map its classifier pools
        assert spatial.maps[-1].abs().max() > 0 and all(s.abs().max() == 0 for s in spatial.maps[:-1])
