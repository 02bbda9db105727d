"""Grad-CAM at every unit equals pytorch-grad-cam's GradCAM on each unit alone (to 1e-5)."""

import threading

import pytest
import timm
import torch
import torchvision
from pytorch_grad_cam import GradCAM
from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget

from laya.analysis.network.gradcam import unit_gradcam
from laya.analysis.network.recording import run_units, spatial
from laya.model.backbones import BackboneConfig, TorchvisionBackbone

RESNET_UNITS = [f"layer{s}.{b}" for s in range(1, 5) for b in range(2)]
VIT_UNITS = [f"blocks.{i}" for i in range(6)]


def resnet() -> torch.nn.Module:
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10).eval()


def vit() -> torch.nn.Module:
    torch.manual_seed(0)
    return timm.create_model("test_vit", num_classes=10, img_size=32).eval()


def package_cams(network, x, units, classes, reshape=None) -> torch.Tensor:
    """``(B, U, H, W)``: GradCAM of the package, one unit at a time."""
    targets = [ClassifierOutputTarget(int(c)) for c in classes]
    maps = []
    for unit in units:
        cam = GradCAM(network, [network.get_submodule(unit)], reshape_transform=reshape)
        maps.append(torch.from_numpy(cam(x, targets)))
        cam.activations_and_grads.release()
    return torch.stack(maps, 1)


def test_resnet_units_equal_the_package():
    network, x = resnet(), torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    result = unit_gradcam(network, x, RESNET_UNITS)
    assert result.maps.shape == (3, 8, 32, 32)
    assert torch.equal(result.classes, network(x).argmax(-1))
    assert all(p.grad is None for p in network.parameters())  # nothing accumulates on the shared model
    expected = package_cams(network, x, RESNET_UNITS, result.classes)
    assert (result.maps - expected).abs().max() < 1e-5
    assert result.maps[:, :6].amax() > 0.99  # maps with more than one position are scaled to [0, 1]


def test_vit_tokens_equal_the_package_with_a_chosen_class():
    network, x = vit(), torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    classes = torch.tensor([3, 7])
    result = unit_gradcam(network, x, VIT_UNITS, classes)
    expected = package_cams(network, x, VIT_UNITS, classes, lambda t: spatial(t, 1))
    assert result.maps.shape == (2, 6, 32, 32)
    assert (result.maps - expected).abs().max() < 1e-5
    assert result.maps.amax() > 0.99


def test_a_unit_overwritten_in_place_is_read_as_the_network_goes_on_with_it():
    """timm ResNet's stem unit ``bn1`` is overwritten by ``act1 = ReLU(inplace=True)``: its map is Grad-CAM of that
    tensor (values and gradient alike), the package's on ``act1``."""
    torch.manual_seed(0)
    network = timm.create_model("resnet18", num_classes=10, channels=[8, 16, 32, 64], stem_width=8).eval()
    x = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(4))
    result = unit_gradcam(network, x, ["bn1", "layer1.0"])
    assert network.act1.inplace
    expected = torch.cat([package_cams(network, x, ["act1"], result.classes),
                          package_cams(network, x, ["layer1.0"], result.classes)], 1)  # fmt: skip
    assert (result.maps - expected).abs().max() < 1e-5


def test_attached_torchvision_backbone_reads_the_same_network():
    """The traced backbone's network, rebuilt around its own tensors, gives the network's maps."""
    network = resnet()
    backbone = TorchvisionBackbone(
        BackboneConfig("torchvision", 3, 32, model="resnet18", model_kwargs={"num_classes": 10}, pre_logits=True,
                       freeze=True)  # fmt: skip
    )
    backbone.load_state_dict({f"model.{k}": v for k, v in network.state_dict().items()}, strict=False)
    backbone.eval()
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    ours, theirs = unit_gradcam(backbone, x, RESNET_UNITS), unit_gradcam(network, x, RESNET_UNITS)
    assert torch.allclose(ours.logits, theirs.logits, atol=1e-5)
    assert (ours.maps - theirs.maps).abs().max() < 1e-5


def test_hooks_act_only_for_the_calling_thread():
    """Another session's forward, run while this call's hooks are on the shared network, leaves them unseen."""
    network, x = resnet(), torch.randn(1, 3, 32, 32)
    others = []

    def other_session(*args) -> None:
        if threading.current_thread() is threading.main_thread() and not others:
            thread = threading.Thread(target=lambda: others.append(network(torch.randn(2, 3, 32, 32))))
            thread.start()
            thread.join()

    hook = network.layer2.register_forward_hook(other_session)
    try:
        run = run_units(network, x, ["layer1.0", "layer3.1"])
    finally:
        hook.remove()
    assert others[0].shape == (2, 10)  # it ran, through the hooked units, in the middle of this forward
    assert [tuple(o.shape) for o in run.outputs] == [(1, 64, 8, 8), (1, 256, 2, 2)] and run.features.shape == (1, 512)


def test_unknown_unit_and_wrong_classes_are_refused():
    network, x = resnet(), torch.randn(2, 3, 32, 32)
    with pytest.raises(ValueError, match="no unit"):
        unit_gradcam(network, x, ["layer9"])
    with pytest.raises(ValueError, match=r"classes must be \(B,\)"):
        unit_gradcam(network, x, RESNET_UNITS, torch.tensor([1, 2, 3]))
