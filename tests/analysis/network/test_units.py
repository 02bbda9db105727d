"""The network's own units by family: names as the network gives them, stages, residual-ness and branches."""

from pathlib import Path

import pytest
import torch
from torch import nn

from laya.analysis.network import network_stages, network_units
from laya.model.backbones import BackboneConfig, build_backbone, wrap
from laya.model.backbones.units import unit_names
from tests.model.test_own_head import TINY_VIT, networks

EXPECTED = {  # family -> [(unit, stage, residual, branches)]
    "timm resnet10t": [("bn1", "bn1", False, 0), ("layer1.0", "layer1", True, 0), ("layer2.0", "layer2", False, 0),
                       ("layer3.0", "layer3", False, 0), ("layer4.0", "layer4", False, 0)],
    "timm test_vit": [(f"blocks.{i}", f"blocks.{i}", True, 2) for i in range(6)],
    "torchvision resnet18": [(f"layer{s}.{u}", f"layer{s}", u == 1 or s == 1, 0) for s in (1, 2, 3, 4) for u in (0, 1)],
}  # fmt: skip


@pytest.mark.parametrize("family", ["timm resnet10t", "timm test_vit", "torchvision resnet18", "transformers vit"])
def test_units_by_family(tmp_path: Path, family: str) -> None:
    """Every unit the network runs, by its own module name, in its stage; residual measured; a ViT block's two
    branches named (attention, MLP), each a module of the network."""
    _, network, config = next(n for n in networks(tmp_path) if n[0] == family)
    backbone = build_backbone(config)
    units = network_units(backbone)
    got = [(u.name, u.stage, u.residual, len(u.branches)) for u in units]
    if family == "transformers vit":  # the module path of the installed transformers version
        prefix = next(n for n, m in network.named_modules() if isinstance(m, nn.ModuleList))
        assert got == [(f"{prefix}.{i}", f"{prefix}.{i}", True, 2) for i in range(TINY_VIT["num_hidden_layers"])]
    else:
        assert got == EXPECTED[family]
    names = dict(network.named_modules())
    for unit in units:
        assert unit.name in names and all(b in names for b in unit.branches), unit
    if family == "timm test_vit":
        assert units[3].branches == ("blocks.3.attn", "blocks.3.mlp")
    stages = network_stages(backbone)
    assert [s.name for s in stages][-1] == "pre-logits" and stages[-1].block is None
    assert {u.stage for u in units} <= {s.name for s in stages}


def test_torchvision_vit_units_are_its_encoder_layers() -> None:
    backbone = build_backbone(BackboneConfig(name="torchvision", model="vit_b_32", in_channels=3, input_size=32,
                                             model_kwargs={"num_classes": 3}))  # fmt: skip
    units = network_units(backbone)
    layers = [u for u in units if "encoder_layer" in u.name]
    assert [u.name for u in layers] == [f"encoder.layers.encoder_layer_{i}" for i in range(12)]
    assert all(u.residual for u in layers)
    assert layers[0].branches == ("encoder.layers.encoder_layer_0.self_attention", "encoder.layers.encoder_layer_0.mlp")


def test_structure_of_timm_and_transformers_stages() -> None:
    """The generic rule (no table per model) on ConvNeXt, EfficientNet and a transformers ResNet."""
    import timm
    from transformers import ResNetConfig, ResNetModel

    convnext = unit_names(timm.create_model("convnext_atto"), [f"stages.{i}" for i in range(4)])
    assert convnext[:4] == [(0, "stages.0.blocks.0"), (0, "stages.0.blocks.1"), (1, "stages.1.downsample"),
                            (1, "stages.1.blocks.0")]  # fmt: skip
    assert len(convnext) == 2 + 2 + 6 + 2 + 3
    efficientnet = unit_names(timm.create_model("efficientnet_b0"), ["blocks.1", "blocks.3"])
    assert efficientnet == [(0, "blocks.0.0"), (0, "blocks.1.0"), (0, "blocks.1.1"), (1, "blocks.2.0"),
                            (1, "blocks.2.1"), (1, "blocks.3.0"), (1, "blocks.3.1"), (1, "blocks.3.2")]  # fmt: skip
    hf = ResNetModel(ResNetConfig(depths=[1, 2], hidden_sizes=[8, 16], embedding_size=8))
    assert unit_names(hf, ["encoder.stages.0", "encoder.stages.1"]) == [
        (0, "encoder.stages.0.layers.0"), (1, "encoder.stages.1.layers.0"), (1, "encoder.stages.1.layers.1")]
    with pytest.raises(ValueError, match="no module"):
        unit_names(hf, ["encoder.stage.9"])


def test_wrapped_module_units_are_the_children_of_its_layers() -> None:
    import torchvision

    torch.manual_seed(0)
    network = torchvision.models.resnet18(num_classes=3).eval()
    backbone = wrap(network, ["layer2", "layer4"], input_size=32, pre_logits=True)
    units = network_units(backbone)
    assert [(u.name, u.stage, u.residual) for u in units] == [
        ("layer2.0", "layer2", False), ("layer2.1", "layer2", True), ("layer4.0", "layer4", False),
        ("layer4.1", "layer4", True)]  # fmt: skip
