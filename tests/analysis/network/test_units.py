"""The network's own units by family: names as the network gives them, stages, residual-ness and branches."""

from pathlib import Path

import pytest
import torch
from torch import nn

from laya.analysis.network import network_stages, network_units
from laya.model.backbones import BackboneConfig, build_backbone, wrap
from laya.model.backbones.units import unit_names
from tests.model.test_own_head import TINY_VIT, networks

EXPECTED = {  # family -> [(unit, stage, residual, branches, shortcut)]: every unit but the stem keeps its input
    "timm resnet10t": [("bn1", "bn1", False, 0, None), ("layer1.0", "layer1", True, 0, None)]
    + [(f"layer{s}.0", f"layer{s}", True, 0, f"layer{s}.0.downsample") for s in (2, 3, 4)],
    "timm test_vit": [(f"blocks.{i}", f"blocks.{i}", True, 2, None) for i in range(6)],
    "torchvision resnet18": [(f"layer{s}.{u}", f"layer{s}", True, 0,
                              None if u == 1 or s == 1 else f"layer{s}.0.downsample")
                             for s in (1, 2, 3, 4) for u in (0, 1)],
}  # fmt: skip


@pytest.mark.parametrize("family", ["timm resnet10t", "timm test_vit", "torchvision resnet18", "transformers vit"])
def test_units_by_family(tmp_path: Path, family: str) -> None:
    """Every unit the network runs, by its own module name, in its stage; residual measured; a ViT block's two
    branches named (attention, MLP), each a module of the network."""
    _, network, config = next(n for n in networks(tmp_path) if n[0] == family)
    backbone = build_backbone(config)
    units = network_units(backbone)
    got = [(u.name, u.stage, u.residual, len(u.branches), u.shortcut) for u in units]
    if family == "transformers vit":  # the module path of the installed transformers version
        prefix = next(n for n, m in network.named_modules() if isinstance(m, nn.ModuleList))
        assert got == [(f"{prefix}.{i}", f"{prefix}.{i}", True, 2, None)
                       for i in range(TINY_VIT["num_hidden_layers"])]  # fmt: skip
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


def test_a_module_list_that_is_never_called_gives_its_children_as_units() -> None:
    """A transformers ConvNeXt stage downsamples through a ``ModuleList`` (a norm, then a convolution) that it loops
    over: the list never runs itself, so its children are the units, and every unit runs once (issue 47's breadth
    run: the network report refused the list)."""
    from transformers import ConvNextConfig, ConvNextForImageClassification

    from laya.analysis.network.recording import run_units

    network = ConvNextForImageClassification(ConvNextConfig(num_stages=2, depths=[1, 2], hidden_sizes=[8, 16],
                                                            num_labels=3)).eval()  # fmt: skip
    found = unit_names(network, ["convnext.encoder.stages.0", "convnext.encoder.stages.1"])
    stage = "convnext.encoder.stages.1"
    assert found == [(0, "convnext.encoder.stages.0.layers.0"), (1, f"{stage}.downsampling_layer.0"),
                     (1, f"{stage}.downsampling_layer.1"), (1, f"{stage}.layers.0"), (1, f"{stage}.layers.1")]  # fmt: skip
    with torch.no_grad():
        run = run_units(network, torch.randn(2, 3, 32, 32), [name for _, name in found])
    assert [tuple(h.shape) for h in run.outputs][:3] == [(2, 8, 8, 8), (2, 8, 8, 8), (2, 16, 4, 4)]


def test_wrapped_module_units_are_the_children_of_its_layers() -> None:
    import torchvision

    torch.manual_seed(0)
    network = torchvision.models.resnet18(num_classes=3).eval()
    backbone = wrap(network, ["layer2", "layer4"], input_size=32, pre_logits=True)
    units = network_units(backbone)
    assert [(u.name, u.stage, u.residual, u.shortcut, u.rectified) for u in units] == [
        ("layer2.0", "layer2", True, "layer2.0.downsample", True), ("layer2.1", "layer2", True, None, False),
        ("layer4.0", "layer4", True, "layer4.0.downsample", True),
        ("layer4.1", "layer4", True, None, False)]  # fmt: skip


def test_a_shortcut_is_found_by_tracing_in_unknown_networks() -> None:
    """The shortcut is the shallower addend of ``s(x) + f(x)``, whatever the modules are called: transformers'
    ``shortcut``, RegNet's ``proj``, and a network of our own whose projection is named ``side``. A unit with no
    addition (a stem) and one whose two addends are as deep keep nothing."""
    import torchvision
    from transformers import ResNetConfig, ResNetModel

    torch.manual_seed(0)
    hf = ResNetModel(ResNetConfig(depths=[1, 2], hidden_sizes=[8, 16], embedding_size=8)).eval()
    units = network_units(wrap(hf, ["encoder.stages.0", "encoder.stages.1"], input_size=32))
    assert [(u.residual, u.shortcut) for u in units] == [
        (True, None), (True, "encoder.stages.1.layers.0.shortcut"), (True, None)]  # fmt: skip
    regnet = torchvision.models.regnet_y_400mf().eval()
    units = network_units(wrap(regnet, ["trunk_output.block1"], input_size=32))
    assert [(u.name, u.shortcut, u.rectified) for u in units] == [
        ("trunk_output.block1.block1-0", "trunk_output.block1.block1-0.proj", True)]  # fmt: skip

    class Unit(nn.Module):
        def __init__(self, side: bool, twin: bool = False) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.Tanh(), nn.Conv2d(4, 4, 3, padding=1))
            self.side = nn.Sequential(nn.Conv2d(4, 4, 1), nn.Tanh(), nn.Conv2d(4, 4, 3, padding=1)) if twin \
                else nn.Conv2d(4, 4, 1) if side else None  # fmt: skip

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.body(x) if self.side is None else self.side(x) + self.body(x)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 4, 3, padding=1)
            self.layer = nn.Sequential(Unit(False), Unit(True), Unit(True, twin=True))
            self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.pool(self.layer(self.stem(x))).flatten(1))

    units = network_units(wrap(Net().eval(), ["layer"], input_size=8), torch.randn(1, 3, 8, 8))
    assert [(u.name, u.residual, u.shortcut, u.rectified) for u in units] == [
        ("layer.0", False, None, False), ("layer.1", True, "layer.1.side", False), ("layer.2", False, None, False)]


def test_an_addition_inside_a_unit_that_first_downsamples_names_no_shortcut_module() -> None:
    """timm EfficientViT-B0's later stages are its units: a downsampling block, then blocks that add to their own
    input. That input is no module's output on the unit's input: no shortcut module is named (it would be run on
    the unit's input, with its other width), and the per-unit scores read the whole output (the breadth run's
    failure)."""
    from laya.analysis.network.scores import baselines

    torch.manual_seed(0)
    backbone = build_backbone(BackboneConfig(name="timm", model="efficientvit_b0", in_channels=3, input_size=64,
                                             model_kwargs={"num_classes": 3}, pre_logits=True, freeze=True))  # fmt: skip
    units = network_units(backbone)
    assert [(u.name, u.shortcut) for u in units if u.residual][-2:] == [("stages.2", ""), ("stages.3", "")]
    reference = torch.randn(2, 3, 64, 64)
    assert len(baselines(backbone, reference, units)) == len(units)
