"""Known answers for block ablation inside the backbone (mean-ablation, one pass per block)."""

from pathlib import Path

import pytest
import torch
from tests.analysis.head.test_spatial import CNN, model

from laya.analysis.block_ablation import ablate_bytes, block_ablation
from laya.analysis.head.ablation import float64_head
from laya.data.images import load_image_tensor
from laya.model.backbones import BackboneConfig
from laya.model.checkpoint import load_checkpoint
from tests.model.test_own_head import _save, logits_of, networks
from tests.training.test_attach import _config, _retarget

MLP = BackboneConfig(name="mlp", in_channels=3, input_size=4, widths=(6, 5, 4))


def _inputs(config, batch, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, config.input_size, config.input_size, generator=g, dtype=torch.float64)


def test_last_block_is_the_head_on_the_mean_last_state() -> None:
    m = model(MLP, "lastlayer")
    x, reference = _inputs(MLP, 3, 0), _inputs(MLP, 7, 1)
    result = block_ablation(m, x, reference)
    assert result.drops.shape == result.ablated_predictions.shape == (3, 3) and result.methods == ("mean-ablation",) * 3
    with torch.no_grad():
        hidden = m.backbone(x)
        p = torch.softmax(m.head(hidden).logits, -1)
        mean = m.backbone(reference)[-1].mean(0, keepdim=True).expand(3, -1)
        ablated = torch.softmax(m.head(hidden[:-1] + [mean]).logits, -1)
    y = p.argmax(-1)
    expected = p[torch.arange(3), y] - ablated[torch.arange(3), y]
    assert torch.allclose(result.drops[:, -1], expected, atol=1e-6, rtol=0)
    assert expected.abs().max() > 1e-3  # the check can fail
    assert torch.equal(result.ablated_predictions[:, -1], ablated.argmax(-1))


def test_a_block_with_a_constant_output_drops_nothing() -> None:
    m = model(MLP, "laya")
    with torch.no_grad():
        m.backbone.blocks[1][0].weight.zero_()  # block 2's output no longer depends on its input
    result = block_ablation(m, _inputs(MLP, 4, 0), _inputs(MLP, 5, 1))
    assert result.drops[:, 1:].abs().max() < 1e-12  # block 2 and (fed by it) block 3: constant
    assert result.drops[:, 0].abs().max() > 1e-4  # block 1 still feeds LAYA directly


def test_reference_equal_to_the_input_drops_nothing() -> None:
    m = model(CNN, "laya")
    x = _inputs(CNN, 1, 0)
    result = block_ablation(m, x, x.expand(4, -1, -1, -1))
    assert result.drops.abs().max() < 1e-10 and not result.flips.any()


def test_bad_reference_is_refused() -> None:
    m = model(CNN, "laya")
    with pytest.raises(ValueError, match=r"reference must be \(R >= 1, 3, 16, 16\), got \(2, 3, 8, 8\)"):
        block_ablation(m, _inputs(CNN, 1, 0), torch.zeros(2, 3, 8, 8, dtype=torch.float64))


def test_own_head_checkpoint_ablates_its_blocks_and_pre_logits(tmp_path: Path, image_folder: Path) -> None:
    _, network, config = next(networks(tmp_path))  # timm resnet10t
    config.weights = _save(_retarget(network, 3).eval(), Path(config.weights))
    from laya.training.attach import own_checkpoint

    checkpoint = load_checkpoint(own_checkpoint(_config(config, image_folder, tmp_path), tmp_path / "own"))
    files = sorted((image_folder / "test").rglob("*.png"))
    result = ablate_bytes(checkpoint, files[0].read_bytes(), [f.read_bytes() for f in files[1:9]])
    L = len(checkpoint.layer_names)
    assert result.drops.shape == (1, L) and torch.isfinite(result.drops).all() and result.references == 8
    assert (result.drops <= result.probability.unsqueeze(1)).all()
    spec = checkpoint.meta.input
    images = torch.stack([load_image_tensor(f.read_bytes(), spec.channels, spec.source_size) for f in files[:9]])
    with torch.no_grad():  # the pre-logits layer (no module): the own head on the mean features
        hidden = [h.double() for h in checkpoint.model.backbone(checkpoint.preprocess(images))]
        head = float64_head(checkpoint.model.head)
        p = torch.softmax(head([h[:1] for h in hidden]).logits, -1)[0]
        ablated = torch.softmax(head([h[:1] for h in hidden[:-1]] + [hidden[-1][1:].mean(0, keepdim=True)]).logits, -1)
    y = int(result.prediction[0])
    assert abs(float(result.drops[0, -1]) - float(p[y] - ablated[0, y])) < 1e-6
    with pytest.raises(ValueError, match="at least one reference image"):
        ablate_bytes(checkpoint, files[0].read_bytes(), [])


def test_wrapped_module_with_its_own_classifier() -> None:
    """A wrapped module's blocks are hooked; its pre-logits layer (no module) is ablated at the head."""
    from torch import nn

    from laya.model.backbones import wrap
    from laya.model.classifier import LayerwiseClassifier
    from laya.model.own_head import own_head

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))  # fmt: skip
    backbone = wrap(net, ["1", "3"], input_size=8, pre_logits=True)
    m = LayerwiseClassifier(backbone, own_head(backbone)).double().eval()
    x, reference = _inputs(CNN, 2, 0)[..., :8, :8], _inputs(CNN, 6, 1)[..., :8, :8]
    result = block_ablation(m, x, reference)
    assert result.drops.shape == (2, 3) and torch.isfinite(result.drops).all()
    with torch.no_grad():  # block "3" feeds the pre-logits through an average pool: the same mean either way
        assert torch.allclose(result.drops[:, 1], result.drops[:, 2], atol=1e-10)
        p = torch.softmax(net(x), -1)
        y = p.argmax(-1)
        mean = net[:6](reference).mean(0, keepdim=True).expand(2, -1)
        expected = p[torch.arange(2), y] - torch.softmax(net[6](mean), -1)[torch.arange(2), y]
    assert torch.allclose(result.drops[:, 2], expected, atol=1e-6) and expected.abs().max() > 1e-4


def _own_model(config):
    """The network's own classifier as a LastLayer head on its backbone, in float64 (as :func:`own_checkpoint`)."""
    from laya.model.backbones import build_backbone
    from laya.model.classifier import LayerwiseClassifier
    from laya.model.own_head import own_head

    backbone = build_backbone(config)
    return LayerwiseClassifier(backbone, own_head(backbone)).double().eval()


def _by_hand(network, x, module, output) -> torch.Tensor:
    """``(B, C)`` the network's probabilities with ``module``'s output replaced by ``output(input, its output)``."""
    handle = module.register_forward_hook(lambda m, args, out: output(args[0], out))
    try:
        with torch.no_grad():
            return torch.softmax(logits_of(network, x), -1)
    finally:
        handle.remove()


@pytest.mark.parametrize("family", ["torchvision resnet18", "transformers vit"])
def test_blocks_inside_torchvision_and_transformers_match_a_hand_ablation(tmp_path: Path, family: str) -> None:
    """Mean-ablating a block (its output replaced by its mean over the reference) or skipping a residual one
    (output := its stream: its input, or a downsampling stage's projection through the final ReLU) gives the drop
    in p(ŷ) that the same hook on the original network gives."""
    name, network, config = next(n for n in networks(tmp_path) if n[0] == family)
    network = network.double().eval()
    m = _own_model(config)
    x, reference = _inputs(config, 2, 0), _inputs(config, 6, 1)
    mean_ablated = block_ablation(m, x, reference)
    skipped = block_ablation(m, x, reference, skip=True)
    if family.startswith("torchvision"):  # layer1 adds to its input; layer2..4 to their first unit's projection
        blocks, residual = [network.layer1, network.layer2, network.layer3, network.layer4], (True,) * 4
        streams = [lambda inp: inp] + [lambda inp, b=b: b[0].downsample(inp).relu() for b in blocks[1:]]
    else:  # both encoder layers: x + attn(x), then + mlp(...)
        blocks, residual = list(network.vit.layers), (True, True)
        streams = [lambda inp: inp] * 2
    assert mean_ablated.residual == (*residual, False) and mean_ablated.methods == ("mean-ablation",) * len(blocks) + (
        "mean-ablation",)  # fmt: skip
    assert skipped.methods == tuple("skip" if r else "mean-ablation" for r in residual) + ("mean-ablation",)
    with torch.no_grad():
        p = torch.softmax(logits_of(network, x), -1)
    y = p.argmax(-1)
    assert torch.equal(mean_ablated.prediction, y)
    rows = torch.arange(len(x))
    for i, block in enumerate(blocks):
        store = []
        hook = block.register_forward_hook(lambda mod, args, out: store.append(out))
        with torch.no_grad():
            logits_of(network, reference)
        hook.remove()
        mean = store[0].mean(0, keepdim=True)
        by_mean = _by_hand(network, x, block, lambda inp, out: mean.expand_as(out))
        expected = p[rows, y] - by_mean[rows, y]
        assert torch.allclose(mean_ablated.drops[:, i], expected, atol=1e-6, rtol=0), (name, i)
        assert torch.equal(mean_ablated.ablated_predictions[:, i], by_mean.argmax(-1)), (name, i)
        if residual[i]:
            by_skip = _by_hand(network, x, block, lambda inp, out, i=i: streams[i](inp))
            assert torch.allclose(skipped.drops[:, i], p[rows, y] - by_skip[rows, y], atol=1e-6, rtol=0), (name, i)
        else:
            assert torch.equal(skipped.drops[:, i], mean_ablated.drops[:, i]), (name, i)
    assert mean_ablated.drops[:, :-1].abs().max() > 1e-4 and (skipped.drops - mean_ablated.drops).abs().max() > 1e-4


def test_residual_blocks_are_measured_not_assumed() -> None:
    """``x + f(x)`` is residual; ``f(x) + g(x)`` of the same shape is not; ``relu(x + f(x))`` is where its input is
    nonnegative (post-activation ResNets), not where it is signed. Skipping = the block replaced by identity."""
    from torch import nn

    from laya.model.backbones import wrap
    from laya.model.classifier import LayerwiseClassifier
    from laya.model.own_head import own_head

    class Residual(nn.Module):
        def __init__(self, relu: bool) -> None:
            super().__init__()
            self.f, self.relu = nn.Conv2d(4, 4, 3, padding=1), relu

        def forward(self, x):
            y = x + self.f(x)
            return torch.relu(y) if self.relu else y

    class Sum(Residual):
        def forward(self, x):
            return self.f(x) + torch.tanh(x)

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), Residual(relu=True), Residual(relu=False), Sum(relu=False),
                        nn.ReLU(), Residual(relu=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3))  # fmt: skip
    backbone = wrap(net, ["1", "2", "3", "5"], input_size=8, pre_logits=True)
    m = LayerwiseClassifier(backbone, own_head(backbone)).double().eval()
    net = net.double().eval()
    x, reference = _inputs(CNN, 2, 0)[..., :8, :8], _inputs(CNN, 6, 1)[..., :8, :8]
    result = block_ablation(m, x, reference, skip=True)
    assert result.residual == (False, True, False, True, False)  # "1" reads the signed output of a convolution
    assert result.methods == ("mean-ablation", "skip", "mean-ablation", "skip", "mean-ablation")
    with torch.no_grad():
        p = torch.softmax(net(x), -1)
        y = p.argmax(-1)
        for i, index in ((1, 2), (3, 5)):
            without = nn.Sequential(*[nn.Identity() if j == index else layer for j, layer in enumerate(net)])
            expected = p[torch.arange(2), y] - torch.softmax(without(x), -1)[torch.arange(2), y]
            assert torch.allclose(result.drops[:, i], expected, atol=1e-10), i
            assert expected.abs().max() > 1e-4, i
    assert block_ablation(m, x, reference).methods == ("mean-ablation",) * 5  # skipping only when asked
