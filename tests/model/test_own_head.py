"""The network's own classifier as a LastLayer head: the same logits as the network, for every family."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from laya.model.backbones import BackboneConfig, build_backbone, wrap
from laya.model.backbones.pre_logits import final_linear
from laya.model.classifier import LayerwiseClassifier
from laya.model.own_head import own_head

torch.set_num_threads(1)
TINY_VIT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
            "patch_size": 8}  # fmt: skip


def _save(model: nn.Module, path: Path) -> str:
    """The weights as a user would have them: safetensors, or a torch.save state dict."""
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, path) if path.suffix == ".safetensors" else torch.save(state, path)
    return str(path)


def networks(tmp: Path):
    """(family, original network, backbone config with pre_logits) for tiny random networks of 5 classes."""
    import timm
    import torchvision
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    common = {"pre_logits": True, "freeze": True, "in_channels": 3, "input_size": 32}
    resnet = timm.create_model("resnet10t", num_classes=5)
    yield "timm resnet10t", resnet, BackboneConfig(name="timm", model="resnet10t", model_kwargs={"num_classes": 5},
                                                   weights=_save(resnet, tmp / "r.safetensors"), **common)  # fmt: skip
    vit = timm.create_model("test_vit", num_classes=5, img_size=32)
    yield "timm test_vit", vit, BackboneConfig(name="timm", model="test_vit", model_kwargs={"num_classes": 5},
                                               weights=_save(vit, tmp / "v.pth"), **common)  # fmt: skip
    tv = torchvision.models.resnet18(num_classes=5)
    yield "torchvision resnet18", tv, BackboneConfig(name="torchvision", model="resnet18", model_kwargs={
        "num_classes": 5}, weights=_save(tv, tmp / "tv.pth"), **common)  # fmt: skip
    hf = ViTForImageClassification(ViTConfig(**TINY_VIT, image_size=32, num_labels=5))
    yield "transformers vit", hf, BackboneConfig(name="transformers", model="vit", model_kwargs={
        **TINY_VIT, "num_labels": 5}, weights=_save(hf, tmp / "hf.safetensors"), **common)  # fmt: skip
    from transformers import DeiTConfig, DeiTForImageClassification  # a model_type of two classifier classes

    deit = DeiTForImageClassification(DeiTConfig(**TINY_VIT, image_size=32, num_labels=5))
    yield "transformers deit", deit, BackboneConfig(name="transformers", model="deit", model_kwargs={
        **TINY_VIT, "num_labels": 5}, weights=_save(deit, tmp / "deit.safetensors"), **common)  # fmt: skip


def logits_of(network: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = network(x)
    return out if isinstance(out, torch.Tensor) else out.logits  # transformers: an output object


def test_own_head_gives_the_network_s_logits(tmp_path: Path) -> None:
    x = torch.randn(4, 3, 32, 32)
    for name, network, config in networks(tmp_path):
        backbone = build_backbone(config)
        model = LayerwiseClassifier(backbone, own_head(backbone)).eval()
        with torch.no_grad():
            expected, got = logits_of(network.eval(), x), model(x).logits
        assert backbone.layer_names[-1] == "pre-logits", name
        assert got.shape == (4, 5) and expected.abs().max() > 1e-3, name  # real logits, not all zeros
        assert torch.allclose(got, expected, atol=1e-5, rtol=0), f"{name}: {(got - expected).abs().max():.2e}"


def test_wrapped_module_with_pre_logits() -> None:
    import torchvision

    torch.manual_seed(0)
    network = torchvision.models.resnet18(num_classes=3).eval()
    backbone = wrap(network, ["layer2", "layer4"], input_size=32, pre_logits=True)
    model = LayerwiseClassifier(backbone, own_head(backbone)).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(model(x).logits, network(x), atol=1e-5, rtol=0)
        assert torch.equal(backbone.forward_to(x, 2), backbone(x)[2])  # the pre-logits layer: the full pass
    assert backbone.layer_names == ("layer2", "layer4", "pre-logits") and backbone.layer_dims[-1] == 512


def test_final_linear_skips_auxiliary_classifiers_and_refuses_none() -> None:
    net = nn.Sequential()
    net.add_module("body", nn.Linear(4, 4))
    net.add_module("fc", nn.Linear(4, 3))
    net.add_module("aux_fc", nn.Linear(4, 3))
    assert final_linear(net) == "fc"
    with pytest.raises(ValueError, match="no nn.Linear classifier"):
        final_linear(nn.Sequential(nn.Conv2d(3, 4, 1)))
    assert final_linear(nn.Linear(4, 3)) == ""  # the network is its classifier


@pytest.mark.parametrize("name", ["resnet18", "vgg11", "inception_v3", "googlenet", "vit_b_16", "mobilenet_v3_small"])
def test_final_linear_is_the_last_linear_of_named_modules(name: str) -> None:
    """Found from the end, it names the layer a walk of every module names last (aux classifiers aside)."""
    import torchvision

    kwargs = {"aux_logits": True, "init_weights": False} if name in ("inception_v3", "googlenet") else {}
    network = torchvision.models.get_model(name, weights=None, num_classes=10, **kwargs)
    names = [n for n, m in network.named_modules() if isinstance(m, nn.Linear) and "aux" not in n.lower()]
    assert final_linear(network) == names[-1]


def test_no_classifier_without_pre_logits() -> None:
    backbone = build_backbone(BackboneConfig(name="mlp", in_channels=1, input_size=8, widths=(8, 4)))
    with pytest.raises(ValueError, match="has no classifier of its own"):
        own_head(backbone)


class Outputs(nn.Module):
    """A network whose forward returns its logits in another form than a tensor: ``kind`` says which."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor):
        features = self.body(x).mean(dim=(2, 3))
        logits = self.fc(features)
        if self.kind == "dict":
            return {"embedding": features, "logits": logits}
        if self.kind == "object":
            return SimpleNamespace(logits=logits, embedding=features)
        if self.kind == "probabilities":
            return torch.softmax(logits, -1)
        return {"probs": torch.softmax(logits, -1)}


@pytest.mark.parametrize("kind", ["dict", "object"])
def test_a_wrapped_network_s_logits_are_read_from_a_dict_or_an_output_object(kind: str) -> None:
    from laya.analysis.network.recording import run_units

    torch.manual_seed(0)
    network = Outputs(kind).eval()
    backbone = wrap(network, ["body"], input_size=16, pre_logits=True)
    model = LayerwiseClassifier(backbone, own_head(backbone)).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = network(x)["logits"] if kind == "dict" else network(x).logits
        assert torch.allclose(model(x).logits, expected, atol=1e-5, rtol=0)
        assert torch.equal(run_units(network, x, ["body"]).logits, expected)  # the network report's reading


def test_a_wrapped_network_that_returns_no_logits_is_refused_saying_what_to_return() -> None:
    with pytest.raises(ValueError, match="the network's output is not what its classifier gives .* not probabilities"):
        wrap(Outputs("probabilities"), ["body"], input_size=16, pre_logits=True)
    with pytest.raises(ValueError, match="returned dict with the keys 'probs', not its logits: .* a 'logits' entry"):
        wrap(Outputs("probs"), ["body"], input_size=16, pre_logits=True)
