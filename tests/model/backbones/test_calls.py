"""One model shared by concurrent sessions: every explain / patch / ablate call equals its single-session result.

Each family's backbone (timm, torchvision, transformers, a wrapped module) with ``pre_logits`` and the network's
own head; twelve calls run at once in threads on one model object, as dashboard sessions do
(:mod:`laya.model.backbones.calls`: what a forward computes lives in its call, never on the module).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from torch import Tensor

from laya.analysis.block_ablation import block_ablation
from laya.analysis.head.explain import explain
from laya.analysis.patching import patch_backbone
from laya.data.datasets import InputSpec, Preprocess
from laya.model.backbones import Backbone, BackboneConfig, build_backbone, wrap
from laya.model.checkpoint import Checkpoint, CheckpointMeta
from laya.model.classifier import LayerwiseClassifier
from laya.model.heads import HeadConfig
from laya.model.own_head import own_head
from tests.model.backbones.test_backbone_families import Tiny
from tests.model.test_own_head import TINY_VIT

SIZE, CLASSES = 32, ("a", "b", "c")
COMMON = {"in_channels": 3, "input_size": SIZE, "pre_logits": True, "freeze": True}
CONFIGS = {
    "timm": BackboneConfig(name="timm", model="resnet10t", model_kwargs={"num_classes": 3}, **COMMON),
    "torchvision": BackboneConfig(name="torchvision", model="resnet18", model_kwargs={"num_classes": 3}, **COMMON),
    "transformers": BackboneConfig(name="transformers", model="vit", model_kwargs={**TINY_VIT, "num_labels": 3},
                                   **COMMON),  # fmt: skip
}
FAMILIES = [*CONFIGS, "wrapped"]


def build(family: str) -> Backbone:
    """The family's tiny 3-class network with ``pre_logits`` (random weights)."""
    if family == "wrapped":
        return wrap(Tiny(3), ["stem", "stage", "mix"], input_size=SIZE, pre_logits=True)
    return build_backbone(CONFIGS[family])


def own_checkpoint(family: str) -> Checkpoint:
    """The family's tiny network with its own classifier as the head, in memory."""
    torch.manual_seed(0)
    backbone = build(family).eval()
    spec = InputSpec(3, SIZE, SIZE, (0.5,) * 3, (0.25,) * 3)
    meta = CheckpointMeta(backbone=backbone.config, head=HeadConfig(name="lastlayer"), classes=CLASSES,
                          dataset="toy", input=spec)  # fmt: skip
    model = LayerwiseClassifier(backbone, own_head(backbone)).eval()
    return Checkpoint(model, meta, Preprocess(spec), Path("own"))


def calls(checkpoint: Checkpoint, images: Tensor) -> list[Callable[[], list[Tensor]]]:
    """Twelve calls: explain, patch (in the backbone) and block-ablate, each on four different inputs."""
    x = checkpoint.preprocess(images)
    model = checkpoint.model

    def explained(k: int) -> list[Tensor]:
        e = explain(checkpoint, images[k])
        maps = [m for m in e.spatial.maps if m is not None] if e.spatial is not None else []
        return [e.probs, e.loo.drops, *e.scores.values(), *maps]

    def patched(k: int) -> list[Tensor]:
        effects = patch_backbone(model, x[k : k + 1], x[(k + 1) % 4 : (k + 1) % 4 + 1])
        return [effects.base_logits, effects.logits, effects.source_logits]

    def ablated(k: int) -> list[Tensor]:
        result = block_ablation(model, x[k : k + 1], x[4:])
        return [result.drops, result.ablated_predictions]

    return [lambda f=f, k=k: f(k) for k in range(4) for f in (explained, patched, ablated)]


@pytest.mark.parametrize("family", FAMILIES)
def test_twelve_concurrent_calls_equal_the_single_session_results(family: str) -> None:
    checkpoint = own_checkpoint(family)
    torch.manual_seed(1)
    images = torch.randint(0, 256, (6, 3, SIZE, SIZE), dtype=torch.uint8)
    work = calls(checkpoint, images)
    alone = [call() for call in work]
    for _ in range(3):  # a race shows up in some rounds only
        with ThreadPoolExecutor(max_workers=len(work)) as pool:
            together = [f.result() for f in [pool.submit(call) for call in work]]
        for k, (single, shared) in enumerate(zip(alone, together)):
            assert len(single) == len(shared) and all(torch.equal(a, b) for a, b in zip(single, shared)), (family, k)
