"""Known answers for activation patching at the head (direct) and in the backbone (total)."""

import pytest
import torch

from laya.analysis.patching import PatchEffects, layer_modules, pair_table, patch_backbone, patch_head, patch_images
from laya.model.backbones import BackboneConfig
from laya.model.checkpoint import load_checkpoint
from tests.analysis.head.test_spatial import CNN, EFFNET, HEADS, VIT_AVG, model


def inputs(config, batch=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, config.input_size, config.input_size, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("head", HEADS)
def test_head_patching_known_answers(head):
    m = model(CNN, head)
    x, y = inputs(CNN, seed=0), inputs(CNN, seed=1)
    with torch.no_grad():
        hx, hy = m.backbone(x), m.backbone(y)
        ly = m(y).logits
    L = len(hx)
    same = patch_head(m.head, hx, hx)  # an input patched with itself: nothing changes
    assert same.prob_change().abs().max() < 1e-12 and same.logit_diff_change(0, 1).abs().max() < 1e-12
    every = patch_head(m.head, hx, hy, masks=torch.ones(1, L, dtype=torch.bool))  # all layers: the source
    assert torch.allclose(every.logits[:, 0], ly, atol=1e-10)
    sweep = patch_head(m.head, hx, hy)
    assert sweep.logits.shape == (3, L, 5)
    # layer i alone: the head on [h_x with h_y at i]
    for i in range(L):
        mixed = [hy[j] if j == i else hx[j] for j in range(L)]
        assert torch.allclose(sweep.logits[:, i], m.head(mixed).logits, atol=1e-10)
    if head == "lastlayer":  # only the last layer matters
        assert sweep.prob_change()[:, :-1].abs().max() < 1e-12
    if head == "laya":
        assert sweep.alpha_change().shape == (3, L, L)
        assert torch.allclose(sweep.alpha_change().sum(-1), torch.zeros(3, L, dtype=torch.float64), atol=1e-12)
    else:
        assert head == "scalarmix" or sweep.alpha_change() is None


def test_effect_helpers_by_hand():
    m = model(CNN, "concat")
    x, y = inputs(CNN, seed=0), inputs(CNN, seed=1)
    with torch.no_grad():
        hx, hy = m.backbone(x), m.backbone(y)
    e = patch_head(m.head, hx, hy)
    p, pb = torch.softmax(e.logits, -1), torch.softmax(e.base_logits, -1)
    c = e.prediction
    assert torch.allclose(e.prob_change()[:, 1], p[torch.arange(3), 1, c] - pb[torch.arange(3), c])
    expected = (e.logits[:, :, 2] - e.logits[:, :, 4]) - (e.base_logits[:, 2] - e.base_logits[:, 4]).unsqueeze(1)
    assert torch.allclose(e.logit_diff_change(2, 4), expected)


@pytest.mark.parametrize("config", [CNN, VIT_AVG, EFFNET], ids=["cnn", "vit", "efficientnet"])
def test_backbone_patching_known_answers(config):
    m = model(config, "laya")
    x, y = inputs(config, batch=2, seed=0), inputs(config, batch=2, seed=1)
    same = patch_backbone(m, x, x)
    assert same.prob_change().abs().max() < 1e-10 and same.alpha_change().abs().max() < 1e-10
    with torch.no_grad():
        hx, hy = m.backbone(x), m.backbone(y)
    effects = patch_backbone(m, x, y)
    patched = [i for i, mod in enumerate(layer_modules(m.backbone)) if mod is not None]
    assert torch.allclose(effects.base_logits, m(x).logits, atol=1e-10)
    # the last block of a CNN feeds nothing deeper: its total effect equals its direct effect
    if config is CNN:
        direct = patch_head(m.head, hx, hy)
        assert torch.allclose(effects.logits[:, -1], direct.logits[:, -1], atol=1e-10)
        # the first block's total effect recomputes every deeper layer: all hidden states are the source's
        assert torch.allclose(effects.logits[:, 0], m(y).logits, atol=1e-10)
        assert not torch.allclose(effects.logits[:, 0], direct.logits[:, 0], atol=1e-6)
    assert effects.logits.shape == (2, len(patched), 5)


def test_efficientnet_layer_modules_are_found_and_prelogits_is_not_patchable():
    m = model(EFFNET, "laya")
    modules = layer_modules(m.backbone)
    assert len(modules) == 9 and modules[-1] is None and all(mod is not None for mod in modules[:-1])
    with pytest.raises(ValueError, match="cannot be patched"):
        patch_backbone(m, inputs(EFFNET, 1), inputs(EFFNET, 1, seed=2), layers=[8])


def test_bad_pairs_are_refused():
    m = model(CNN, "laya")
    with torch.no_grad():
        hx = m.backbone(inputs(CNN))
    with pytest.raises(ValueError, match="differ in shape"):
        patch_head(m.head, hx, [h[:2] for h in hx])
    with pytest.raises(ValueError, match="masks must be"):
        patch_head(m.head, hx, hx, masks=torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="differ in shape"):
        patch_backbone(m, inputs(CNN), inputs(CNN, batch=2))
    mlp = model(BackboneConfig(name="mlp", in_channels=3, input_size=4, widths=(6, 5)), "laya")
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64)
    assert patch_backbone(mlp, x, x).logits.shape == (2, 2, 5)


def test_effect_table_means_and_cis():
    from laya.analysis.patching import effect_table

    m = model(CNN, "laya")
    with torch.no_grad():
        hx, hy = m.backbone(inputs(CNN, batch=6)), m.backbone(inputs(CNN, batch=6, seed=1))
    e = patch_head(m.head, hx, hy)
    table = effect_table(e, ["a", "b", "c"], 0, 1, resamples=100)
    assert list(table["layer"]) == ["a", "b", "c"] and (table["n"] == 6).all()
    assert table["prob_change"].tolist() == pytest.approx(e.prob_change().mean(0).tolist())
    assert table["alpha_change"].tolist() == pytest.approx(torch.diagonal(e.alpha_change().mean(0)).tolist())
    assert (table["logit_diff_change_low"] <= table["logit_diff_change"]).all()
    both = patch_head(m.head, hx, hy, masks=torch.tensor([[True, True, False]]))
    row = effect_table(both, ["a", "b", "c"], 0, 1, resamples=100).iloc[0]
    assert row["layer"] == "a + b" and row["alpha_change"] != row["alpha_change"]  # NaN for a layer set


def test_wrapped_module_is_patched_through_its_named_submodules():
    from torch import nn

    from laya.model.backbones import wrap
    from laya.model.classifier import LayerwiseClassifier
    from laya.model.heads import HeadConfig, build_head

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ReLU())
    wrapped = wrap(net, ["1", "3"], input_size=16)
    m = LayerwiseClassifier(wrapped, build_head(HeadConfig(name="laya", d_star=8), wrapped.layer_dims, 5))
    m = m.double().eval()
    x, y = inputs(CNN, batch=2), inputs(CNN, batch=2, seed=1)
    assert patch_backbone(m, x, x).prob_change().abs().max() < 1e-10
    effects = patch_backbone(m, x, y)
    assert torch.allclose(effects.logits[:, 0], m(y).logits, atol=1e-10)  # layer 1 feeds everything after it


@pytest.mark.parametrize("head", ["laya", "concat"])
def test_patch_images_sweeps_and_pair_table(tiny_models, head):
    """The dashboard's sweep of one image pair: known answers at the head and in the backbone, and the table's
    numbers are the effects' own."""
    checkpoint = load_checkpoint(tiny_models / "colours-mlp" / head)
    images = checkpoint.load_data("test").images
    target, source = images[0], images[5]
    with torch.no_grad():
        own = checkpoint.model(checkpoint.preprocess(torch.stack([target, source]))).logits.double()
    at_head = patch_images(checkpoint, target, source, "head")
    L = len(checkpoint.layer_names)
    assert at_head.masks.shape == (L + 1, L) and at_head.masks[-1].all()
    assert torch.allclose(at_head.base_logits[0], own[0], atol=1e-5)
    assert torch.allclose(at_head.logits[0, -1], own[1], atol=1e-5)  # every layer from the source: its logits
    assert torch.allclose(at_head.source_logits[0], own[1], atol=1e-5)
    itself = patch_images(checkpoint, target, target, "head")
    assert itself.prob_change().abs().max() < 1e-12
    inside = patch_images(checkpoint, target, source, "backbone")
    assert inside.masks.shape == (L, L) and torch.allclose(inside.source_logits[0], own[1], atol=1e-5)
    # sequential MLP: the first block's output from the source makes every deeper layer the source's
    assert torch.allclose(inside.logits[0, 0], own[1], atol=1e-5)
    assert torch.allclose(inside.logits[0, -1], at_head.logits[0, L - 1], atol=1e-5)  # last layer: nothing deeper

    classes = list(checkpoint.meta.classes)
    a, b = int(at_head.prediction[0]), int(own[1].argmax())
    table = pair_table(at_head, checkpoint.layer_names, classes, a, b)
    assert list(table["layer"]) == [*checkpoint.layer_names, "all layers"] and table["patched"].all()
    assert list(table["prob_change"]) == pytest.approx(at_head.prob_change()[0].tolist())
    assert list(table["logit_diff_change"]) == pytest.approx(at_head.logit_diff_change(a, b)[0].tolist())
    after = torch.softmax(at_head.logits[0], -1)
    assert list(table["prediction"]) == [classes[int(c)] for c in after.argmax(-1)]
    if head == "laya":
        alpha = at_head.alpha_change()[0]
        assert list(table["alpha_change"][:L]) == pytest.approx([float(alpha[i, i]) for i in range(L)])
    assert table["alpha_change"].iloc[-1] != table["alpha_change"].iloc[-1]  # NaN: no single patched layer
    if head == "concat":
        assert table["alpha_change"].isna().all()
    with pytest.raises(ValueError, match="out of range"):
        pair_table(at_head, checkpoint.layer_names, classes, len(classes), 0)
    with pytest.raises(ValueError, match="where must be"):
        patch_images(checkpoint, target, source, "middle")

    again = PatchEffects.from_tensors(*at_head.to_tensors())  # how a worker hands it over
    assert all(torch.equal(getattr(again, k), getattr(at_head, k)) for k in ("base_logits", "logits", "masks"))
    assert (again.alpha is None) == (head == "concat") and again.masks.dtype == torch.bool


def test_pair_table_marks_layers_the_backbone_cannot_patch():
    effects = PatchEffects(torch.zeros(1, 3), torch.zeros(1, 1, 3), None, None, torch.tensor([[True, False]]))
    table = pair_table(effects, ["a", "b"], ["x", "y", "z"], 0, 1)
    assert table["patched"].tolist() == [True, False] and table.loc[1, "prob_change"] != table.loc[1, "prob_change"]


def test_patching_an_own_head_checkpoint(tmp_path, image_folder):
    """The network's own classifier (``laya attach``): at the head and in the backbone for every family (the
    pre-logits layer has no module: patched at the head only)."""
    from laya.training.attach import own_checkpoint
    from tests.model.test_own_head import _save, networks
    from tests.training.test_attach import _config, _retarget

    for name, network, config in networks(tmp_path):
        stem = name.replace(" ", "-")
        config.weights = _save(_retarget(network, 3).eval(), tmp_path / f"{stem}.safetensors")
        checkpoint = load_checkpoint(own_checkpoint(_config(config, image_folder, tmp_path), tmp_path / stem))
        images = checkpoint.load_data("test").images
        L = len(checkpoint.layer_names)
        head = patch_images(checkpoint, images[0], images[-1], where="head")
        assert torch.isfinite(head.prob_change()).all(), name
        assert torch.allclose(head.logits[0, -1], head.source_logits[0], atol=1e-6), name  # all layers: the source
        assert head.prob_change()[0, :-2].abs().max() < 1e-12, name  # a LastLayer head reads pre-logits alone
        inside = patch_images(checkpoint, images[0], images[-1], where="backbone")
        assert inside.masks.shape == (L - 1, L) and not inside.masks[:, -1].any(), name  # pre-logits: no module
        assert torch.isfinite(inside.prob_change()).all() and inside.prob_change().abs().max() > 0, name


def test_a_layer_is_the_module_that_returns_it_not_a_later_identity():
    """BEiT (mean pooling) hands its last layer's output through an ``nn.Identity`` (its layernorm): the layer's module
    is the encoder layer that returned it, so that block can be skipped and its hidden state is the one replaced."""
    from laya.model.backbones import build_backbone
    from tests.model.test_own_head import TINY_VIT

    torch.manual_seed(0)
    backbone = build_backbone(BackboneConfig(name="transformers", model="beit", in_channels=3, input_size=32,
                                             model_kwargs=TINY_VIT, freeze=True))  # fmt: skip
    assert [type(m).__name__ for m in layer_modules(backbone)] == ["BeitLayer", "BeitLayer"]


def test_hooks_reach_only_the_thread_that_set_them():
    """The server's models are shared by every session: a patch set up in one session's thread must not change a
    forward that another session runs meanwhile (it did before hooks acted in their own thread only: the other
    thread's logits were patched)."""
    import threading

    from laya.model.hooks import replacing_output

    m = model(CNN, "laya")
    x = inputs(CNN, batch=2, seed=0)
    with torch.no_grad():
        clean = m(x).logits
        module = layer_modules(m.backbone)[0]
        with replacing_output(module, torch.zeros_like(m.backbone.blocks[0](x))):
            patched = m(x).logits
            other: list[torch.Tensor] = []
            thread = threading.Thread(target=lambda: other.append(m(x).logits))
            thread.start()
            thread.join()
    assert not torch.allclose(patched, clean, atol=1e-6)  # the patch acts in its own thread
    assert torch.equal(other[0], clean)  # and nowhere else


def test_a_block_whose_input_is_no_tensor_is_left_alone() -> None:
    """A DenseNet layer is called with the list of the features before it: its input is neither read nor replaced
    (the call is not made), and the forward is the plain one (issue 47's breadth run: timm densenet121)."""
    from torch import nn

    from laya.analysis.patching import Block, on_input
    from laya.model.hooks import Hooks

    class Dense(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 2, 1)

        def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
            return self.conv(torch.cat(features, 1))

    layer = Dense()
    features = [torch.randn(1, 2, 3, 3), torch.randn(1, 2, 3, 3)]
    seen: list[torch.Tensor] = []
    with Hooks() as hooks:
        on_input(hooks, Block(layer, layer), lambda x: seen.append(x) or torch.zeros_like(x))
        out = layer(features)
    assert seen == [] and torch.equal(out, layer(features))
