"""The lesion study of a network by its own units (Veit, Wilber and Belongie, NeurIPS 2016, §4), over test inputs.

* **One unit at a time**: test accuracy with each unit skipped (``h_u <- σ_u``, its branch removed, the stream kept:
  :mod:`~laya.analysis.network.interventions`) and, separately, resampled (its branch from ``K`` reference inputs,
  the class of the ``K``-averaged probabilities), each with a percentile bootstrap CI over the inputs and its paired
  difference to the intact network (paired bootstrap over the same inputs: ``drop = acc(intact) - acc(lesioned)``);
  the same per true class (``by_class``: each class's accuracy with its CI and its paired drop, over that class's
  inputs alone; ``classes``: the accuracies as a class x unit table). A block without a shortcut whose output has its
  input's shape (a repeated block of a plain network, :func:`skippable`) is skipped by passing its input on, ``h_u <- x_u``: the unit deleted from
  the chain, as Veit et al. delete a plain network's layers (its ``method`` says so, :data:`PASSED_ON`). A stem, or a
  block that changes the shape without a shortcut (a downsampling transition), cannot be skipped: its skip entry is the
  resample fallback, and ``method`` says so.
* **k units at once**: ``k = 0 .. U'`` of the ``U'`` units that can be skipped (:func:`skippable`) skipped together,
  ``draws`` seeded random sets per ``k`` (``k = 0`` the intact network, ``k = U'`` every such unit): accuracy per
  draw, its mean, standard deviation and range over the draws. Every draw of one batch runs in ONE pass: the batch
  is repeated per draw, and each skipped unit's rows of its output are replaced by its stream, measured in that pass
  (:class:`~laya.analysis.network.units.Streams`: the input, or the projection shortcut's output), or by its input.

:func:`lesion_batch` gives one batch's predictions for all of it, reusing the unit profiles a caller has already
computed on that batch; :func:`lesion_study` turns the predictions of every batch into the study.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from laya.analysis.depth.readouts import class_groups
from laya.analysis.head.ablation import float64_head
from laya.analysis.network.interventions import Branch, References, UnitProfile, intervene
from laya.analysis.network.units import Streams, Unit
from laya.analysis.patching import on_input
from laya.analysis.statistics import bootstrap_ci, mean_intervals, paired_bootstrap, paired_mean_differences
from laya.analysis.strict_json import split_table
from laya.model.classifier import LayerwiseClassifier
from laya.model.hooks import Hooks, layer_tensor, pass_rows, with_layer_tensor

DRAWS = 5  # random sets per k
ROWS = 512  # rows (inputs x settings) per pass of the k-curve, at most (fewer where they would not fit: pass_rows)
SINGLE_COLUMNS = ("intervention", "unit", "method", "accuracy", "low", "high", "drop", "drop_low", "drop_high",
                  "p_value")  # fmt: skip
CURVE_COLUMNS = ("k", "draws", "mean", "sd", "min", "max")
CLASS_COLUMNS = ("intervention", "class", "unit", "n", "accuracy", "low", "high", "drop", "drop_low", "drop_high",
                 "p_value")  # fmt: skip
INTACT = "intact"
PASSED_ON = "skip: its input passed on"  # the method of a unit without a shortcut deleted from the chain


def lesion_masks(skips: Sequence[bool], draws: int = DRAWS, seed: int = 0) -> tuple[Tensor, Tensor]:
    """The sets of units the k-curve skips: ``masks (M, U)`` bool and ``ks (M,)``: one row for ``k = 0``, then for
    ``k = 1 .. U'`` (``U'`` the units that can be skipped, ``skips``: :func:`skippable`) ``draws`` sets of ``k`` of
    them drawn with ``seed``."""
    if draws < 1:
        raise ValueError(f"the draws per k must be at least 1, got {draws}")
    kept = torch.tensor([u for u, r in enumerate(skips) if r], dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    masks, ks = [torch.zeros(len(skips), dtype=torch.bool)], [0]
    for k in range(1, len(kept) + 1):
        for _ in range(draws):
            mask = torch.zeros(len(skips), dtype=torch.bool)
            mask[kept[torch.randperm(len(kept), generator=generator)[:k]]] = True
            masks.append(mask)
            ks.append(k)
    return torch.stack(masks), torch.tensor(ks)


@torch.inference_mode()
def skippable(model: LayerwiseClassifier, x: Tensor, units: Sequence[Unit]) -> list[bool]:
    """Per unit, whether it can be skipped: it keeps its input (:attr:`Unit.residual`), or it is one of the blocks the
    network repeats inside a stage (not a stage read as its own unit: a stem, whose last module may well keep the
    shape, ``bn1``) with no shortcut and an output of its input's shape in a pass of ``x``: it can be deleted from the
    chain, its input passed on."""
    shapes: dict[int, list[torch.Size]] = {}
    with Hooks() as hooks:
        for u, unit in enumerate(units):
            if unit.residual or unit.block is None or unit.block.entry is None or unit.name == unit.stage:
                continue
            on_input(hooks, unit.block, lambda t, u=u: shapes.setdefault(u, []).append(t.shape))
            hooks.after(unit.block.module, lambda m, a, out, u=u: shapes.setdefault(u, []).append(
                layer_tensor(out).shape))  # fmt: skip
        model.backbone(x[:1])
    return [unit.residual or (len(shapes.get(u, ())) == 2 and shapes[u][0] == shapes[u][1])
            for u, unit in enumerate(units)]  # fmt: skip


def skipped_predictions(
    model: LayerwiseClassifier, x: Tensor, units: Sequence[Unit], masks: Tensor, rows: int = ROWS
) -> Tensor:
    """``(M, B)`` the class predicted for each input of ``x`` ``(B, C, H, W)`` (preprocessed) with, in setting
    ``m``, every unit ``u`` where ``masks[m, u]`` skipped at once: its output replaced by its stream, or by its input
    where it has no shortcut (module docstring); passes of about ``rows`` rows, fewer where their activations would
    not fit (:func:`~laya.model.hooks.pass_rows`), whole settings of ``B``. Raises ``ValueError`` for
    a mask of another width, or one that skips a unit that cannot be skipped in this pass."""
    if masks.ndim != 2 or masks.shape[1] != len(units):
        raise ValueError(f"masks must be (M, {len(units)}), one column per unit; got {tuple(masks.shape)}")
    rows = pass_rows(model.backbone, x, rows)
    return torch.cat([_skipped(model, x, units, m) for m in masks.split(max(1, rows // max(1, len(x))))])


@torch.inference_mode()
def _skipped(model: LayerwiseClassifier, x: Tensor, units: Sequence[Unit], masks: Tensor) -> Tensor:
    M, B = masks.shape[0], len(x)
    inputs: dict[int, Tensor] = {}
    with Streams([u.block for u in units]) as streams, Hooks() as hooks:  # its hooks first: kept is known in ours
        for u, unit in enumerate(units):
            if not bool(masks[:, u].any()):
                continue
            if unit.block is None or (not unit.residual and unit.block.entry is None):
                raise ValueError(f"unit {unit.name!r} has no module whose input to pass on: it cannot be skipped")
            on_input(hooks, unit.block, lambda t, u=u: inputs.__setitem__(u, t.clone()))
            where = masks[:, u].to(x.device).repeat_interleave(B)

            def skip(m: nn.Module, a: tuple, out: Any, u: int = u, where: Tensor = where) -> Any:
                new = layer_tensor(out).clone()
                if streams.residual[u]:
                    kept = streams.kept[u]
                    stream = inputs[u] if kept is None else kept.relu() if streams.rectified[u] else kept
                elif inputs[u].shape == new.shape:  # no shortcut: the unit deleted, its input passed on
                    stream = inputs[u]
                else:
                    raise ValueError(f"unit {units[u].name!r} changes the shape without a shortcut: it cannot be "
                                     "skipped")  # fmt: skip
                new[where] = stream[where].to(new.dtype)
                return with_layer_tensor(out, new)

            hooks.after(unit.block.module, skip)
        hidden = model.backbone(x.repeat(M, *[1] * (x.ndim - 1)))
    logits = float64_head(model.head)([h.double() for h in hidden]).logits
    return logits.argmax(-1).view(M, B)


def lesion_batch(
    model: LayerwiseClassifier, x: Tensor, units: Sequence[Unit], recorded: References, masks: Tensor,
    skips: Sequence[bool], branch: Branch = "block", profiles: dict[str, UnitProfile] | None = None,
) -> tuple[dict[str, Tensor], dict[str, tuple[str, ...]]]:
    """One batch's predictions for the lesion study, and what each unit got: ``predictions (B,)`` intact;
    ``resample``, ``skip`` ``(B, U)`` the class with each unit resampled (``recorded`` references) or skipped alone;
    ``curve`` ``(B, M)`` under each set of ``masks`` (:func:`lesion_masks`). ``skips``: :func:`skippable`. The unit
    profiles of ``profiles`` (``"resample"``, ``"skip"``, computed by the caller on ``x``) are reused, the others
    computed. Skip's rows of a unit without a shortcut come from :func:`skipped_predictions` (its input passed on);
    without a unit to skip, no skip and no curve."""
    profiles = dict(profiles or {})
    for method in ("resample", "skip") if any(skips) else ("resample",):
        if method not in profiles:
            profiles[method] = intervene(model, x, units, method, recorded, branch=branch)
    resample = profiles["resample"]
    out = {"predictions": resample.prediction, "resample": resample.ablated_predictions}
    methods = {"resample": resample.methods}
    if any(skips):
        skip, labels = profiles["skip"].ablated_predictions.clone(), list(profiles["skip"].methods)
        passed = [u for u, unit in enumerate(units) if skips[u] and not unit.residual]
        if passed:
            alone = torch.zeros(len(passed), len(units), dtype=torch.bool)
            alone[torch.arange(len(passed)), torch.tensor(passed)] = True
            skip[:, passed] = skipped_predictions(model, x, units, alone).T.to(skip.device)
            labels = [PASSED_ON if u in passed else m for u, m in enumerate(labels)]
        out |= {"skip": skip, "curve": skipped_predictions(model, x, units, masks).T}
        methods["skip"] = tuple(labels)
    return out, methods


@dataclass
class LesionStudy:
    """The lesion study over ``n`` test inputs: ``intact`` accuracy (estimate, low, high); ``single`` one row per
    intervention (``skip``, ``resample``) and unit (:data:`SINGLE_COLUMNS`); ``classes`` per intervention a class x
    (``intact``, units) accuracy table, rows ``all`` then each true class with inputs, a last column ``n``;
    ``curve`` one row per ``k`` (:data:`CURVE_COLUMNS`: the mean, sd and range of accuracy over the draws);
    ``by_class`` one row per intervention, true class and (``intact``, units) (:data:`CLASS_COLUMNS`: the class's
    ``n`` inputs, accuracy [bootstrap CI] and the paired drop from intact [CI], p; NaN drop for ``intact``), None in a
    report written before it."""

    n: int
    intact: list[float]
    single: pd.DataFrame
    classes: dict[str, pd.DataFrame]
    curve: pd.DataFrame
    by_class: pd.DataFrame | None = None

    def to_record(self) -> dict[str, Any]:
        """The ``lesion`` section of ``network.json`` (tables in pandas' ``split`` layout; ``by_class`` only where
        computed)."""
        record = {"n": self.n, "intact": self.intact, "single": self.single.to_dict(orient="records"),
                  "classes": {k: split_table(v) for k, v in self.classes.items()},
                  "curve": self.curve.to_dict(orient="records")}  # fmt: skip
        return record | ({} if self.by_class is None else {"by_class": self.by_class.to_dict(orient="records")})


def _class_table(correct: dict[str, Tensor], labels: Tensor, classes: Sequence[str]) -> pd.DataFrame:
    rows = {name: [*(float(c[chosen].double().mean()) for c in correct.values()), int(chosen.sum())]
            for name, chosen in class_groups(labels, classes)}  # fmt: skip
    return pd.DataFrame.from_dict(rows, orient="index", columns=[*correct, "n"]).rename_axis("class")


def _class_rows(name: str, correct: dict[str, Tensor], labels: Tensor, classes: Sequence[str], resamples: int,
                seed: int) -> list[list[Any]]:  # fmt: skip
    """Rows of :data:`CLASS_COLUMNS` for one intervention: per true class with inputs, over its inputs alone, each of
    ``correct`` (``intact`` first, then the units; ``(N,)`` 0/1) with its bootstrap CI and its paired drop from intact
    (the same resamples for every column of a class)."""
    rows = []
    for i, (group, chosen) in enumerate(class_groups(labels, classes)):
        if i == 0:  # every input: the single rows
            continue
        values = torch.stack([c[chosen] for c in correct.values()], 1)  # (n_c, 1 + U), intact first
        cis = mean_intervals(values, resamples, seed)
        drops = [None, *paired_mean_differences(values, [(0, k) for k in range(1, values.shape[1])], resamples, seed)]
        for unit, ci, d in zip(correct, cis, drops):
            paired = [math.nan] * 4 if d is None else [d.difference.estimate, d.difference.low, d.difference.high,
                                                       d.p_value]  # fmt: skip
            rows.append([name, group, unit, len(values), ci.estimate, ci.low, ci.high, *paired])
    return rows


def lesion_study(
    labels: Tensor, predictions: Tensor, lesioned: dict[str, Tensor], methods: dict[str, Sequence[str]],
    curve: Tensor | None, ks: Tensor | None, units: Sequence[str], classes: Sequence[str], resamples: int = 1000,
    seed: int = 0,
) -> LesionStudy:  # fmt: skip
    """The lesion study from predictions on the same ``N`` inputs: ``labels``, intact ``predictions`` ``(N,)``;
    ``lesioned`` per intervention ``(N, U)`` the class with each unit intervened on alone and ``methods`` what each
    unit got (:attr:`~laya.analysis.network.interventions.UnitProfile.methods`); ``curve`` ``(M, N)`` the classes
    under the k-curve's sets of ``ks`` ``(M,)`` (:func:`lesion_masks`; None where no unit keeps its input)."""
    base = (predictions == labels).double()
    intact = bootstrap_ci(base, resamples=resamples, seed=seed)
    rows, tables, by_class = [], {}, []
    for name, lesion in lesioned.items():
        correct = {INTACT: base}
        for u, unit in enumerate(units):
            hit = (lesion[:, u] == labels).double()
            correct[unit] = hit
            acc = bootstrap_ci(hit, resamples=resamples, seed=seed)
            drop = paired_bootstrap(base, hit, resamples=resamples, seed=seed)
            rows.append([name, unit, methods[name][u], acc.estimate, acc.low, acc.high, drop.difference.estimate,
                         drop.difference.low, drop.difference.high, drop.p_value])  # fmt: skip
        tables[name] = _class_table(correct, labels, classes)
        by_class += _class_rows(name, correct, labels, classes, resamples, seed)
    points = []
    if curve is not None and ks is not None:
        accuracy = (curve == labels).double().mean(1)  # (M,)
        for k in ks.unique().tolist():
            a = accuracy[ks == k]
            points.append([k, len(a), float(a.mean()), float(a.std(unbiased=False)), float(a.min()), float(a.max())])
    return LesionStudy(len(labels), [intact.estimate, intact.low, intact.high],
                       pd.DataFrame(rows, columns=list(SINGLE_COLUMNS)), tables,
                       pd.DataFrame(points, columns=list(CURVE_COLUMNS)),
                       pd.DataFrame(by_class, columns=list(CLASS_COLUMNS)))  # fmt: skip


__all__ = ["CLASS_COLUMNS", "CURVE_COLUMNS", "DRAWS", "INTACT", "PASSED_ON", "ROWS", "SINGLE_COLUMNS", "LesionStudy",
           "lesion_batch", "lesion_masks", "lesion_study", "skippable", "skipped_predictions"]  # fmt: skip
