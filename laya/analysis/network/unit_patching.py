"""Activation patching by the network's own units: the target input with one unit's branch taken from a source.

For a target ``x``, a source ``s`` and each unit ``u`` (:mod:`laya.analysis.network.units`), the target runs with
what :func:`~laya.analysis.network.interventions.intervene` replaces taken from the source: a residual unit's branch
``f_u = h_u - σ_u`` (its stream ``σ_u`` kept, so the rest of the network still computes from ``x``), a transformer
block's attention or MLP branch module alone (``branch``), and the whole output of a unit without a shortcut. Every
unit's row in ONE pass (``intervene(..., "resample", s, paired=True)``: each unit's row joins the batch where it
parts from ``x``); the head in float64. Patching a whole stage instead (:func:`laya.analysis.patching.patch_backbone`)
hands everything after it to the source, so every stage of a network read at its last layer gives one row.

A row is **equal by construction** where the unit replaces its whole output (no shortcut) and the head reads no
layer before it (the own classifier reads pre-logits alone): after it the network computes from the source alone,
so its logits are the source's own, whatever the pair. :attr:`UnitPatch.constructed` marks those rows; the page
does not draw them and says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from laya.analysis.head.ablation import float64_head
from laya.analysis.network.explain import profile_units
from laya.analysis.network.interventions import BRANCHES, Branch, branched, intervene
from laya.analysis.network.units import Unit
from laya.analysis.overflow import check_output
from laya.analysis.patching import PatchEffects
from laya.codec import Encoded
from laya.data.images import load_image_tensor
from laya.model.checkpoint import Checkpoint
from laya.model.classifier import LayerwiseClassifier
from laya.model.heads import LinearHead

COLUMNS = ("unit", "stage", "keeps input", "intervention", "prob_change", "logit_diff_change", "prediction",
           "probability", "constructed")  # fmt: skip


@dataclass
class UnitPatch(Encoded):
    """One pair patched unit by unit: ``effects`` (:class:`~laya.analysis.patching.PatchEffects`, its masks one row
    per unit: ``logits (1, U, C)`` the target with unit ``u``'s part from the source, ``base_logits`` the target's,
    ``source_logits`` the source's); per unit its ``units`` name, ``stages``, ``methods`` (what was taken:
    ``resample``, ``resample of attention``), ``residual`` (it keeps the input) and ``constructed`` (its row is the
    source's output by construction); ``branch`` what of each block was patched, ``branched`` whether a unit has an
    attention and an MLP branch to choose."""

    effects: PatchEffects
    units: tuple[str, ...]
    stages: tuple[str, ...]
    methods: tuple[str, ...]
    residual: tuple[bool, ...]
    constructed: tuple[bool, ...]
    branch: str = "block"
    branched: bool = False


@torch.inference_mode()
def patch_units(
    model: LayerwiseClassifier, target: Tensor, source: Tensor, units: Sequence[Unit], branch: Branch = "block"
) -> UnitPatch:
    """Every unit of ``units`` patched from ``source`` into ``target`` (``(B, C, H, W)`` each, preprocessed, paired
    by row) on ``branch`` (module docstring). Raises ``ValueError`` for an unknown branch or inputs of other
    shapes, :class:`~laya.analysis.overflow.OutputOverflow` where an input's logits are not finite."""
    if branch not in BRANCHES or target.shape != source.shape:
        raise ValueError(f"branch must be one of {sorted(BRANCHES)} and target and source of one shape; got "
                         f"{branch!r}, {tuple(target.shape)} and {tuple(source.shape)}")  # fmt: skip
    profile = intervene(model, target, units, "resample", source, branch=branch, paired=True)
    source_logits = float64_head(model.head)([h.double() for h in model.backbone(source)]).logits
    check_output(model, profile.base_logits, source_logits)
    head = model.head
    reads = head.selected if isinstance(head, LinearHead) else range(head.num_layers)  # the layers the head reads
    constructed = tuple(not r and min(reads) >= u.layer for r, u in zip(profile.residual, units))
    masks = torch.eye(len(units), dtype=torch.bool, device=target.device)
    effects = PatchEffects(profile.base_logits, profile.logits, None, None, masks, source_logits)
    return UnitPatch(effects, profile.units, profile.stages, profile.methods, profile.residual, constructed, branch,
                     branched(units))  # fmt: skip


def patch_units_bytes(checkpoint: Checkpoint, target: bytes, source: bytes, branch: Branch = "block") -> UnitPatch:
    """Decode two uploaded files (see :mod:`laya.data.images`) and :func:`patch_units` every unit of the
    checkpoint's network (its stages where it repeats no block) from the source into the target."""
    spec = checkpoint.meta.input
    images = [load_image_tensor(data, spec.channels, spec.source_size) for data in (target, source)]
    device = next(checkpoint.model.parameters()).device
    x = checkpoint.preprocess(torch.stack(images).to(device))
    return patch_units(checkpoint.model, x[:1], x[1:], profile_units(checkpoint, "unit"), branch)


def unit_patch_table(patch: UnitPatch, classes: list[str], a: int, b: int) -> pd.DataFrame:
    """One row per unit (:data:`COLUMNS`): ``unit``, ``stage``, ``keeps input``, ``intervention`` (what was taken
    from the source), ``prob_change`` of the target's predicted class, ``logit_diff_change`` of ``logit_a -
    logit_b``, the ``prediction`` after the patch and its ``probability``, and ``constructed`` (the row is the
    source's own output by construction)."""
    if not (0 <= a < len(classes) and 0 <= b < len(classes)):
        raise ValueError(f"classes {a}, {b} out of range for {len(classes)} classes")
    effects = patch.effects
    after = torch.softmax(effects.logits[0], -1)
    return pd.DataFrame({
        "unit": list(patch.units), "stage": list(patch.stages), "keeps input": list(patch.residual),
        "intervention": list(patch.methods), "prob_change": effects.prob_change()[0].tolist(),
        "logit_diff_change": effects.logit_diff_change(a, b)[0].tolist(),
        "prediction": [classes[int(c)] for c in after.argmax(-1)], "probability": after.amax(-1).tolist(),
        "constructed": list(patch.constructed),
    }, columns=list(COLUMNS))  # fmt: skip


__all__ = ["COLUMNS", "UnitPatch", "patch_units", "patch_units_bytes", "unit_patch_table"]
