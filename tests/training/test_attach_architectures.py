"""``attach`` end to end on architectures whose classifier is not one plain ``nn.Linear`` read by a tensor output,
one per family: a timm distilled model (two heads, averaged), torchvision GoogLeNet (auxiliary classifiers as its
weights have them), a transformers MobileViT, a wrapped module that returns a dict. Each on tiny configs at 32 px:
the own head gives the network's logits within 1e-5 and the network report (the tuned lens) is written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from laya.model.backbones.pre_logits import logits_of
from laya.model.checkpoint import load_checkpoint
from laya.model.own_head import OWN
from laya.training.attach import AttachConfig, Attached, attach
from tests.model.test_own_head import _save
from tests.training.test_attach import QUICK
from tests.training.test_attach_families import Net

# the per-unit Grad-CAM test on one image a class: GoogLeNet has 31 units, each map scored against random
FAST = {"heads": ("laya",), "depth_heads": (OWN,), "max_epochs": 1, "patience": 1, "image_size": 32, **QUICK,
        "network": replace(QUICK["network"], gradcam_sample=3)}  # fmt: skip
TINY_DEIT = {"img_size": 32, "patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2}
TINY_MOBILEVIT = {"hidden_sizes": [16, 24, 32], "neck_hidden_sizes": [8, 8, 16, 16, 24, 32, 64],
                  "num_attention_heads": 2, "expand_ratio": 2.0}  # fmt: skip


class DictNet(Net):
    """A user's network whose forward returns ``{"logits": ..., "embedding": ...}``."""

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        embedding = self.stage(self.stem(x)).mean(dim=(2, 3))
        return {"logits": self.fc(embedding), "embedding": embedding}


def make_dict_net() -> DictNet:
    return DictNet()


def _perturbed(network: nn.Module) -> nn.Module:
    """``network`` with BatchNorm statistics and affine terms off their identity start (a trained network's are):
    a classifier that ends in BatchNorm + linear is then told apart from its linear layer alone."""
    generator = torch.Generator().manual_seed(0)
    for module in network.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            for tensor, low, high in ((module.running_mean, -0.5, 0.5), (module.running_var, 0.5, 2.0),
                                      (module.weight, 0.5, 1.5), (module.bias, -0.3, 0.3)):  # fmt: skip
                tensor.data.copy_(torch.rand(tensor.shape, generator=generator) * (high - low) + low)
    return network.eval()


def attached_as_is(network: nn.Module, family: str, model: str | None, tmp_path: Path, image_folder: Path,
                   **changes) -> Attached:  # fmt: skip
    """``attach`` ``network`` (its weights saved as a user would, or the module itself when wrapped), then check the
    own head gives its logits on the test images within 1e-5 and the network report was written."""
    wrapped = family == "wrapped"
    weights = None if wrapped else _save(network, tmp_path / f"{family}.safetensors")
    config = AttachConfig(family=family, model=model, weights=weights, dataset=str(image_folder),
                          out=str(tmp_path / "models"), setting=family, **FAST, **changes)  # fmt: skip
    torch.manual_seed(0)
    attached = attach(config, module=network if wrapped else None)
    checkpoint = load_checkpoint(attached.heads[OWN], module=network if wrapped else None)
    x = checkpoint.preprocess(checkpoint.load_data("test").images[:8])
    with torch.no_grad():
        got, expected = checkpoint.model(x).logits, logits_of(network.eval()(x))
    assert expected.abs().max() > 1e-3  # real logits, not all zeros
    assert (got - expected).abs().max() <= 1e-5, f"{family}: {(got - expected).abs().max():.2e}"
    assert attached.network_error is None and (attached.heads[OWN] / "network.json").is_file()
    assert list(attached.heads) == [OWN, "laya"]
    return attached


def test_a_timm_distilled_model_s_own_head_averages_its_two_heads(tmp_path: Path, image_folder: Path) -> None:
    """DeiT's head reads the class token, head_dist the distillation token: the pre-logits are both, side by side."""
    import timm

    torch.manual_seed(0)
    network = timm.create_model("deit_tiny_distilled_patch16_224", num_classes=3, **TINY_DEIT).eval()
    attached = attached_as_is(network, "timm", "deit_tiny_distilled_patch16_224", tmp_path, image_folder,
                              model_kwargs=TINY_DEIT)  # fmt: skip
    backbone = load_checkpoint(attached.heads[OWN]).model.backbone
    assert backbone.layer_dims[-1] == 2 * TINY_DEIT["embed_dim"] and backbone.pre_logits.names == ("head", "head_dist")


def test_googlenet_attaches_without_its_auxiliary_classifiers(tmp_path: Path, image_folder: Path) -> None:
    """Trained from scratch, GoogLeNet has auxiliary classifiers (aux_logits=True); they run in training only:
    attach leaves them out and skips their tensors (one fine-tuned from torchvision's weights has none:
    :func:`test_more_architectures_pass_the_checks_with_the_network_s_logits`)."""
    import torchvision

    torch.manual_seed(0)
    network = torchvision.models.googlenet(num_classes=3, aux_logits=True, init_weights=False).eval()
    attached = attached_as_is(network, "torchvision", "googlenet", tmp_path, image_folder)
    own = load_checkpoint(attached.heads[OWN])
    assert own.meta.backbone.model_kwargs == {"num_classes": 3}
    assert not any("aux" in name for name in own.model.backbone.state_dict())


def test_a_transformers_mobilevit_attaches(tmp_path: Path, image_folder: Path) -> None:
    from transformers import MobileViTConfig, MobileViTForImageClassification

    torch.manual_seed(0)
    network = MobileViTForImageClassification(MobileViTConfig(**TINY_MOBILEVIT, image_size=32, num_labels=3))
    _perturbed(network)  # its BatchNorm scales start at ~0.02: every activation would vanish on the way
    attached = attached_as_is(network, "transformers", "mobilevit", tmp_path, image_folder,
                              model_kwargs=TINY_MOBILEVIT)  # fmt: skip
    assert load_checkpoint(attached.heads[OWN]).model.backbone.layer_names[-1] == "pre-logits"


def test_a_wrapped_module_returning_a_dict_is_read_by_its_logits_entry(tmp_path: Path, image_folder: Path) -> None:
    torch.manual_seed(0)
    attached_as_is(make_dict_net(), "wrapped", None, tmp_path, image_folder, layers=["stem", "stage"],
                   import_path=f"{__name__}:make_dict_net")  # fmt: skip


@pytest.mark.parametrize(
    "family, model, kwargs, size",
    [
        ("timm", "levit_128s", {"img_size": 32}, 32),  # two BatchNorm + linear heads, averaged
        ("timm", "efficientvit_m0", {"img_size": 32}, 32),  # get_classifier() is the linear after a BatchNorm
        ("timm", "poolformer_s12", {}, 32),
        ("timm", "efficientvit_b0", {}, 32),
        ("torchvision", "googlenet", {"aux_logits": False, "init_weights": False}, 32),  # fine-tuned: no aux
        ("torchvision", "inception_v3", {"aux_logits": True, "init_weights": False}, 80),
        ("torchvision", "mnasnet0_5", {}, 32),  # its state dict needs a version: safetensors keeps none
    ],
)  # fmt: skip
def test_more_architectures_pass_the_checks_with_the_network_s_logits(
    family: str, model: str, kwargs: dict, size: int, tmp_path: Path, image_folder: Path
) -> None:
    """Preflight builds each with its weights; the own head gives the network's logits within 1e-5."""
    import timm
    import torchvision

    from laya.model.classifier import LayerwiseClassifier
    from laya.model.own_head import own_head
    from laya.training.preflight import preflight

    torch.manual_seed(0)
    create = timm.create_model if family == "timm" else torchvision.models.get_model
    network = _perturbed(create(model, num_classes=3, **kwargs))
    settable = {k: v for k, v in kwargs.items() if k != "init_weights"}
    config = AttachConfig(family=family, model=model, weights=_save(network, tmp_path / "w.safetensors"),
                          dataset=str(image_folder), image_size=size, model_kwargs=settable)  # fmt: skip
    backbone = preflight(config, echo=False).backbone
    x = torch.randn(4, 3, size, size)
    with torch.no_grad():
        got, expected = LayerwiseClassifier(backbone, own_head(backbone)).eval()(x).logits, network(x)
    assert expected.abs().max() > 1e-2 and (got - expected).abs().max() <= 1e-5, (got - expected).abs().max()
