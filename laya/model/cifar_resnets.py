"""He et al.'s CIFAR ResNets and their plain twins, registered as timm models.

He, Zhang, Ren and Sun (CVPR 2016, "Deep Residual Learning for Image Recognition", §4.2) study on CIFAR-10 a family
of networks of depth ``6n + 2``: a 3x3 convolution with 16 filters, then three stages of ``n`` basic blocks (two
3x3 convolutions each) with 16, 32 and 64 filters on maps of 32, 16 and 8 pixels (the first block of the second
and third stage subsamples by a stride of 2), global average pooling and a linear classifier. A residual block adds
its input to its branch, ``h = relu(f(x) + s(x))``; where a block subsamples, ``s`` is their option A, the input
subsampled and zero-padded to the new width (no parameters). The plain twin is the same network without any
shortcut, ``h = relu(f(x))``. Veit, Wilber and Belongie (NeurIPS 2016, §4) delete blocks of such networks at test
time; ``laya``'s lesion study does the same (:mod:`laya.analysis.network.lesion`).

Registered with timm's model registry (``timm.create_model("cifar_resnet20")``, ``cifar_plain20``; depths 20, 32,
44, 56, 110), with timm's interface (``forward_intermediates`` over the stem and the three stages,
``forward_head``, ``get_classifier``, ``feature_info``), so that they are timm models for ``laya attach --family
timm`` and for the dashboard: a checkpoint names the model, never code. Importing this module registers them;
:mod:`laya.model.backbones.timm` does before it asks timm for a model.
"""

from __future__ import annotations

from collections import OrderedDict

import torch.nn.functional as F
from timm.layers import SelectAdaptivePool2d
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models._features import feature_take_indices
from torch import Tensor, nn

DEPTHS = (20, 32, 44, 56, 110)  # 6n + 2, as He et al. train them
WIDTHS = (16, 32, 64)


class ShortcutA(nn.Module):
    """He et al.'s option A: the input subsampled by ``stride`` and zero-padded from ``in_chs`` to ``out_chs``
    channels (no parameters). ``(B, in_chs, H, W) -> (B, out_chs, H / stride, W / stride)``."""

    def __init__(self, in_chs: int, out_chs: int, stride: int) -> None:
        super().__init__()
        self.stride, self.pad = stride, out_chs - in_chs

    def forward(self, x: Tensor) -> Tensor:
        return F.pad(x[:, :, :: self.stride, :: self.stride], (0, 0, 0, 0, 0, self.pad))


class BasicBlock(nn.Module):
    """``relu(bn2(conv2(relu(bn1(conv1(x))))) + s(x))``; ``s`` the identity, :class:`ShortcutA` where the shape
    changes, none at all in a plain network (``residual=False``)."""

    def __init__(self, in_chs: int, out_chs: int, stride: int, residual: bool) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_chs, out_chs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_chs)
        self.act1 = nn.ReLU()
        self.conv2 = nn.Conv2d(out_chs, out_chs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_chs)
        self.act2 = nn.ReLU()
        self.residual = residual
        changes = stride != 1 or in_chs != out_chs
        self.shortcut = ShortcutA(in_chs, out_chs, stride) if residual and changes else None

    def forward(self, x: Tensor) -> Tensor:
        out = self.bn2(self.conv2(self.act1(self.bn1(self.conv1(x)))))
        if self.residual:
            out = out + (x if self.shortcut is None else self.shortcut(x))
        return self.act2(out)


class CifarResNet(nn.Module):
    """Depth ``6n + 2``: ``stem`` (conv, bn, act), ``layer1..3`` of ``n`` :class:`BasicBlock` each, global average pool, ``fc``."""

    def __init__(self, depth: int = 20, residual: bool = True, num_classes: int = 10, in_chans: int = 3,
                 global_pool: str = "avg", drop_rate: float = 0.0) -> None:  # fmt: skip
        super().__init__()
        if depth < 8 or (depth - 2) % 6:
            raise ValueError(f"a CIFAR ResNet's depth is 6n + 2 with n >= 1 (20, 32, 44, 56, 110), got {depth}")
        n = (depth - 2) // 6
        self.num_classes, self.drop_rate, self.residual = num_classes, drop_rate, residual
        self.stem = nn.Sequential(OrderedDict(conv=nn.Conv2d(in_chans, WIDTHS[0], 3, 1, 1, bias=False),
                                              bn=nn.BatchNorm2d(WIDTHS[0]), act=nn.ReLU()))  # fmt: skip
        self.feature_info = [{"num_chs": WIDTHS[0], "reduction": 1, "module": "stem"}]
        chs = WIDTHS[0]
        for i, width in enumerate(WIDTHS):
            stride = 1 if i == 0 else 2
            blocks = [BasicBlock(chs if b == 0 else width, width, stride if b == 0 else 1, residual) for b in range(n)]
            self.add_module(f"layer{i + 1}", nn.Sequential(*blocks))
            chs = width
            self.feature_info.append({"num_chs": width, "reduction": 2**i, "module": f"layer{i + 1}"})
        self.num_features = self.head_hidden_size = chs
        self.global_pool = SelectAdaptivePool2d(pool_type=global_pool, flatten=True)
        self.fc = nn.Linear(chs, num_classes) if num_classes > 0 else nn.Identity()
        for m in self.modules():  # He et al.'s initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def get_classifier(self) -> nn.Module:
        return self.fc

    def reset_classifier(self, num_classes: int, global_pool: str = "avg") -> None:
        self.num_classes = num_classes
        self.global_pool = SelectAdaptivePool2d(pool_type=global_pool, flatten=True)
        self.fc = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()

    def forward_intermediates(
        self, x: Tensor, indices: int | list[int] | None = None, norm: bool = False, stop_early: bool = False,
        output_fmt: str = "NCHW", intermediates_only: bool = False,
    ) -> list[Tensor] | tuple[Tensor, list[Tensor]]:  # fmt: skip
        """timm's contract: the stem's and each stage's output (``indices`` of the four), and the last map."""
        if output_fmt != "NCHW":
            raise ValueError(f"output_fmt must be 'NCHW', got {output_fmt!r}")
        take, last = feature_take_indices(4, indices)
        intermediates = []
        x = self.stem(x)
        if 0 in take:
            intermediates.append(x)
        for i in range(1, last + 1 if stop_early else 4):
            x = getattr(self, f"layer{i}")(x)
            if i in take:
                intermediates.append(x)
        return intermediates if intermediates_only else (x, intermediates)

    def forward_features(self, x: Tensor) -> Tensor:
        return self.layer3(self.layer2(self.layer1(self.stem(x))))

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        x = self.global_pool(x)
        if self.drop_rate:
            x = F.dropout(x, p=self.drop_rate, training=self.training)
        return x if pre_logits else self.fc(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(x))


def _cfg(depth: int, residual: bool) -> dict:
    kind = "residual" if residual else "plain (no shortcut)"
    return {"url": "", "num_classes": 10, "input_size": (3, 32, 32), "pool_size": (8, 8), "crop_pct": 1.0,
            "interpolation": "bilinear", "mean": (0.4914, 0.4822, 0.4465), "std": (0.2470, 0.2435, 0.2616),
            "first_conv": "stem.conv", "classifier": "fc", "license": "apache-2.0",
            "notes": (f"He et al. 2016 CIFAR family, depth {depth}, {kind}; untrained",)}  # fmt: skip


default_cfgs = generate_default_cfgs({
    **{f"cifar_resnet{d}": _cfg(d, True) for d in DEPTHS}, **{f"cifar_plain{d}": _cfg(d, False) for d in DEPTHS},
})  # fmt: skip


def _create(variant: str, pretrained: bool, depth: int, residual: bool, **kwargs) -> CifarResNet:
    if pretrained:
        raise ValueError(f"{variant} has no pretrained weights: train it (scripts/train_network.py)")
    return build_model_with_cfg(CifarResNet, variant, False, depth=depth, residual=residual,
                                feature_cfg={"flatten_sequential": True}, **kwargs)  # fmt: skip


def _register(depth: int, residual: bool) -> None:
    name = f"cifar_{'resnet' if residual else 'plain'}{depth}"

    def entry(pretrained: bool = False, **kwargs) -> CifarResNet:
        return _create(name, pretrained, depth, residual, **kwargs)

    entry.__name__ = entry.__qualname__ = name
    entry.__module__ = __name__
    entry.__doc__ = f"He et al.'s CIFAR {'ResNet' if residual else 'plain network'} of depth {depth}."
    globals()[name] = register_model(entry)


for _depth in DEPTHS:
    _register(_depth, True)
    _register(_depth, False)

__all__ = ["DEPTHS", "BasicBlock", "CifarResNet", "ShortcutA"]  # and the registered cifar_resnet*, cifar_plain*
