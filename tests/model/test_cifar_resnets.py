"""He et al.'s CIFAR ResNets and their plain twins, as timm models a checkpoint can name."""

import pytest
import torch

from laya.analysis.network.units import network_units
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.backbones.timm import timm_models
from laya.model.cifar_resnets import DEPTHS, CifarResNet, ShortcutA

# He et al. (2016), Table 6: 0.27M, 0.46M, 0.66M, 0.85M, 1.7M parameters (10 classes)
PARAMETERS = {20: 269_722, 32: 464_154, 44: 658_586, 56: 853_018, 110: 1_727_962}


def test_every_depth_is_registered_with_timm_at_he_et_als_size() -> None:
    timm = timm_models()
    for depth in DEPTHS:
        for kind in ("resnet", "plain"):
            name = f"cifar_{kind}{depth}"
            assert name in timm.list_models()
            cfg = timm.get_pretrained_cfg(name)
            assert cfg.classifier == "fc" and cfg.input_size == (3, 32, 32)
            with torch.device("meta"):
                model = timm.create_model(name, num_classes=10)
            assert sum(p.numel() for p in model.parameters()) == PARAMETERS[depth], name


def test_timms_interface_gives_the_stem_and_three_stages_and_the_same_logits() -> None:
    torch.manual_seed(0)
    model = timm_models().create_model("cifar_resnet20", num_classes=10).eval()
    x = torch.randn(2, 3, 32, 32)
    final, maps = model.forward_intermediates(x)
    assert [tuple(m.shape[1:]) for m in maps] == [(16, 32, 32), (16, 32, 32), (32, 16, 16), (64, 8, 8)]
    assert torch.equal(final, maps[-1]) and torch.allclose(model.forward_head(final), model(x))
    (second,) = model.forward_intermediates(x, indices=[2], stop_early=True, intermediates_only=True)
    assert torch.equal(second, maps[2])
    assert model.forward_head(final, pre_logits=True).shape == (2, 64) and model.get_classifier().out_features == 10
    with pytest.raises(ValueError, match="6n \\+ 2"):
        CifarResNet(depth=21)


def test_option_a_subsamples_and_pads_with_zeros() -> None:
    x = torch.arange(2 * 4 * 4, dtype=torch.float32).view(1, 2, 4, 4)
    y = ShortcutA(2, 5, 2)(x)
    assert y.shape == (1, 5, 2, 2) and torch.equal(y[:, :2], x[:, :, ::2, ::2]) and not y[:, 2:].any()


@pytest.mark.parametrize("kind", ["resnet", "plain"])
def test_laya_reads_their_units_every_block_keeps_the_input_only_with_a_shortcut(kind: str) -> None:
    """Read by laya's timm family: the stem and nine blocks of depth 20. A ResNet's every block keeps its input
    (option A's shortcut where it subsamples, found by tracing), none of the plain network's does."""
    config = BackboneConfig(name="timm", model=f"cifar_{kind}20", in_channels=3, input_size=32, pre_logits=True,
                            model_kwargs={"num_classes": 10})  # fmt: skip
    units = network_units(build_backbone(config))
    blocks = [f"layer{s}.{b}" for s in (1, 2, 3) for b in range(3)]
    assert [u.name for u in units] == ["stem", *blocks] and not units[0].residual
    assert [u.residual for u in units[1:]] == [kind == "resnet"] * 9
    shortcuts = {u.name: u.shortcut for u in units if u.shortcut}
    assert shortcuts == ({"layer2.0": "layer2.0.shortcut", "layer3.0": "layer3.0.shortcut"} if kind == "resnet" else {})
