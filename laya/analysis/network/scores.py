"""Cheap per-unit scores of the network's own decision, and how well each agrees with an intervention.

For an input ``x`` with predicted class ``c`` (logit ``y_c``) and units ``u = 1..U``
(:mod:`laya.analysis.network.units`), each score is ``(B, U)``, higher meaning "the unit matters more for ``c``".
A unit's *contribution* ``a_u`` is what an intervention replaces: its branch ``h_u - σ_u`` where the unit is
residual (``h_u = σ_u + f_u``, ``σ_u`` its input or its shortcut's output through the ReLU after the addition:
:mod:`laya.analysis.network.interventions`), its whole output ``h_u`` where not (and where the shortcut is no
module of the network's, so that ``σ_u`` cannot be recomputed).

* ``grad_x_act``, gradient x activation: ``sum_i (dy_c/dh_u)_i (a_u)_i``, every unit from ONE forward and ONE
  backward. The first-order Taylor estimate of removing the contribution (``a_u <- 0``, a skip).
* ``integrated_gradients``, per-unit layer integrated gradients (Sundararajan et al., 2017,
  https://arxiv.org/abs/1703.01365):
  ``sum_i (a_u - b_u)_i · 1/S sum_s (dy_c/dh_u)_i |_{a_u <- b_u + α_s (a_u - b_u)}`` with ``α_s = (s + 1/2)/S``
  (midpoint rule, ``S = steps``). Implemented here, not with Captum: Captum's
  ``LayerIntegratedGradients`` over several layers that feed each other interpolates them all at once. Here unit
  ``u``'s contribution alone is interpolated while every other unit runs on from it, all ``B·U·S`` rows in
  batched passes (row ``(b, u, s)``: input ``b``, unit ``u`` at step ``s``; hooks per call only, the calling
  thread only). Completeness: a unit's sum is ``y_c(x) - y_c(x | a_u <- b_u)`` up to the Riemann error.
  Baseline ``b_u``: ``"mean"`` the contribution's mean over reference inputs (the ``mean`` intervention), or
  ``"zero"`` (a skip where the unit is residual).
* ``lens_kl_drop``, from the tuned (or logit) lens ``q_u``: ``KL(p || q_{u-1}) - KL(p || q_u)``, how much unit ``u``
  brings the lens's reading towards the network's final distribution ``p``; before the first unit ``q_0`` is
  uniform (``KL(p || uniform) = log K - H(p)``).
* ``gradcam_mass``: ``sum_{i,j} ReLU(sum_k w_k A_k)[i, j]``, the unit's Grad-CAM map on its own grid before any
  scaling (:func:`~laya.analysis.network.gradcam.raw_cams`), from the same forward and backward as
  ``grad_x_act``.

:func:`score_agreement`: per input, the Spearman correlation over units (``scipy.stats.spearmanr`` semantics,
:func:`~laya.analysis.head.faithfulness.spearman_rows`) between a score and an intervention's drops, its mean over
inputs with a percentile bootstrap CI over inputs (:func:`~laya.analysis.statistics.mean_intervals`; all scores on
the same resamples). :func:`trusted_agreement`: the same over the units that keep the input, beside two baselines
that know nothing of the input (:func:`baseline_scores`: the per-unit mean drop over the references, a constant
per unit, and a seeded random score); a cheap score is *trusted* only where it beats the better baseline on the
same inputs (paired bootstrap over inputs of the per-input Spearman difference, its CI above 0).
:func:`apart_agreement`: the units left out (they do not keep the input), each on its own numbers: its mean drop
and each score's Spearman correlation over the inputs with that unit's drop, with bootstrap CIs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from laya.analysis.depth.layer_lens import Lens
from laya.analysis.head.faithfulness import spearman_rows
from laya.analysis.network.gradcam import raw_cams
from laya.analysis.network.recording import as_network, run_units, unit_modules
from laya.analysis.network.units import Unit
from laya.analysis.statistics import bootstrap_cis, mean_intervals, paired_bootstrap
from laya.model.hooks import Hooks, layer_tensor, with_layer_tensor

Baseline = Literal["mean", "zero"]
SCORES = ("grad_x_act", "integrated_gradients", "lens_kl_drop", "gradcam_mass")
SCORE_LABELS = {
    "grad_x_act": "gradient x activation",
    "integrated_gradients": "integrated gradients",
    "lens_kl_drop": "tuned-lens KL drop",
    "gradcam_mass": "Grad-CAM mass",
    "unit_mean": "baseline: per-unit mean drop",
    "random": "baseline: random",
}
BASELINES = ("unit_mean", "random")  # scores that know nothing of the input
AGREEMENT_COLUMNS = ("score", "intervention", "spearman_mean", "ci_low", "ci_high", "n")
TRUST_COLUMNS = ("kind", "units", "vs_baseline", "vs_low", "vs_high", "trusted")
IG_STEPS = 8
MAX_ROWS = 512  # rows of one integrated-gradients pass, at most
GRAD_BYTES = 2**30  # what autograd may keep for one integrated-gradients pass (a ViT at 224 px keeps ~50 MB a row)


def _chosen(logits: Tensor, classes: Tensor | None) -> Tensor:
    chosen = logits.argmax(-1) if classes is None else torch.as_tensor(classes, device=logits.device).long()
    if chosen.shape != (logits.shape[0],):
        raise ValueError(f"classes must be (B,) = ({logits.shape[0]},), got {tuple(chosen.shape)}")
    return chosen


def _contribution(network: nn.Module, unit: Unit, out: Tensor, given: Tensor | None) -> Tensor:
    """``a_u``: the branch ``h_u - σ_u`` of a residual unit (``σ_u`` its input ``given``, or its shortcut module of
    ``network`` run on it, through the ReLU after the addition), else its output."""
    if not unit.residual or given is None or unit.shortcut == "":
        return out
    stream = given if unit.shortcut is None else network.get_submodule(unit.shortcut)(given)
    stream = stream.relu() if unit.rectified else stream
    return out - stream if stream.shape == out.shape else out


def gradient_scores(
    model: nn.Module, x: Tensor, units: Sequence[Unit], classes: Tensor | None = None
) -> dict[str, Tensor]:
    """``grad_x_act`` and ``gradcam_mass`` ``(B, U)`` of ``classes`` (``(B,)``; None: the predicted class) on
    ``x: (B, C, H, W)`` from one forward and one backward of the network (``model``: the network or an attached
    backbone, :func:`~laya.analysis.network.recording.as_network`); also ``logits (B, K)``."""
    network = as_network(model)
    x = x.detach().requires_grad_(True)  # a frozen network's units then carry a graph
    with torch.enable_grad():
        run = run_units(network, x, [u.name for u in units])
        chosen = _chosen(run.logits, classes)
        grads = torch.autograd.grad(run.logits.gather(1, chosen.view(-1, 1)).sum(), run.outputs, allow_unused=True)
    gxa = []
    for unit, out, given, grad in zip(units, run.outputs, run.inputs, grads):
        a = _contribution(network, unit, out.detach(), None if given is None else given.detach())
        gxa.append(torch.zeros(len(x), device=x.device) if grad is None else (grad * a).flatten(1).sum(1))
    mass = [cam.sum(dim=(1, 2, 3)) for cam in raw_cams(network, run.outputs, grads)]
    return {"grad_x_act": torch.stack(gxa, 1).detach(), "gradcam_mass": torch.stack(mass, 1).detach(),
            "logits": run.logits.detach()}  # fmt: skip


@torch.no_grad()
def baselines(
    model: nn.Module, reference: Tensor | None, units: Sequence[Unit], kind: Baseline = "mean"
) -> list[Tensor]:
    """Per unit the baseline ``b_u`` ``(1, ...)`` of its contribution: its mean over ``reference (R, C, H, W)``
    (``"mean"``) or 0 (``"zero"``, which needs one reference or input only for the shape)."""
    if kind not in ("mean", "zero"):
        raise ValueError(f"baseline must be 'mean' or 'zero'; got {kind!r}")
    if reference is None or len(reference) == 0:
        raise ValueError("integrated gradients need reference inputs (R >= 1) for the baseline")
    network = as_network(model)
    run = run_units(network, reference, [u.name for u in units])
    values = [_contribution(network, u, out, given).mean(0, keepdim=True)
              for u, out, given in zip(units, run.outputs, run.inputs)]  # fmt: skip
    return values if kind == "mean" else [torch.zeros_like(v) for v in values]


def integrated_gradients(
    model: nn.Module, x: Tensor, units: Sequence[Unit], baseline: Sequence[Tensor], steps: int = IG_STEPS,
    classes: Tensor | None = None, max_rows: int = MAX_ROWS,
) -> Tensor:  # fmt: skip
    """``(B, U)`` per-unit integrated gradients of ``classes`` (None: predicted) on ``x: (B, C, H, W)`` (module
    docstring), ``baseline`` per unit ``(1, ...)`` (:func:`baselines`). Rows ``(b, u, s)`` go in passes of at most
    ``max_rows`` and of at most :data:`GRAD_BYTES` of what autograd keeps (measured on one input first, so memory stays
    bounded at any input size): inputs in chunks, and within a chunk the units in groups; each pass is one clean
    forward and one forward + backward of its rows.

    Raises:
        ValueError: ``steps < 1``, a baseline of another shape than its unit's contribution.
    """
    if steps < 1:
        raise ValueError(f"integrated gradients need steps >= 1, got {steps}")
    network = as_network(model)
    names = [u.name for u in units]
    max_rows = max(1, min(max_rows, GRAD_BYTES // max(1, _row_bytes(network, x[:1], names))))
    chunk = max(1, max_rows // (len(units) * steps))  # inputs per pass
    group = max(1, max_rows // (chunk * steps))  # units per pass
    parts = []
    for i in range(0, len(x), chunk):
        chosen = None if classes is None else classes[i : i + chunk]
        parts.append(torch.cat([_ig_chunk(network, x[i : i + chunk], units, names, baseline, steps, chosen,
                                          range(j, min(j + group, len(units))))
                                for j in range(0, len(units), group)], 1))  # fmt: skip
    return torch.cat(parts)


def _row_bytes(network: nn.Module, x: Tensor, names: list[str]) -> int:
    """Bytes autograd keeps for one input's forward when the computation must be differentiated: the cost of one
    integrated-gradients row, measured (``saved_tensors_hooks``) rather than guessed."""
    kept = 0

    def pack(tensor: Tensor) -> Tensor:
        nonlocal kept
        kept += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.enable_grad():
        run_units(network, x.detach().requires_grad_(True), names)
    return kept


def _ig_chunk(
    network: nn.Module, x: Tensor, units: Sequence[Unit], names: list[str], baseline: Sequence[Tensor], steps: int,
    classes: Tensor | None, which: Sequence[int],
) -> Tensor:  # fmt: skip
    """``(B, len(which))``: the integrated gradients of the units ``which`` (indices into ``units``) on ``x``."""
    B, U, S = len(x), len(which), steps
    with torch.no_grad():
        clean = run_units(network, x, names)
    chosen = _chosen(clean.logits, classes)
    alpha = (torch.arange(S, device=x.device, dtype=x.dtype) + 0.5) / S  # (S,)
    rows, values, spans = [], [], []
    for u, k in enumerate(which):
        unit, out, given = units[k], clean.outputs[k], clean.inputs[k]
        a = _contribution(network, unit, out, given)  # (B, ...)
        if baseline[k].shape[1:] != a.shape[1:]:
            raise ValueError(f"baseline of {unit.name} is {tuple(baseline[k].shape[1:])}, its contribution "
                             f"{tuple(a.shape[1:])}")  # fmt: skip
        stream = out - a  # σ_u where residual, else 0
        b = baseline[k].to(a.dtype)
        shape = (1, S) + (1,) * (a.ndim - 1)
        point = b.unsqueeze(1) + alpha.view(shape) * (a - b).unsqueeze(1)  # (B, S, ...)
        values.append((stream.unsqueeze(1) + point).flatten(0, 1).detach().requires_grad_(True))  # (B·S, ...)
        spans.append(a - b)
        rows.append((torch.arange(B, device=x.device).view(B, 1) * U * S + u * S + torch.arange(S, device=x.device))
                    .flatten())  # fmt: skip
    with Hooks() as hooks:
        for module, at, value in zip(unit_modules(network, [names[k] for k in which]), rows, values):

            def hook(m: Any, args: Any, out: Any, at: Tensor = at, value: Tensor = value) -> Any:
                new = layer_tensor(out).clone()
                new[at] = value.to(new.dtype)
                return with_layer_tensor(out, new)

            hooks.after(module, hook, prepend=True)
        with torch.enable_grad():
            logits = run_units(network, x.repeat_interleave(U * S, 0), names).logits  # (B·U·S, K)
            target = logits.gather(1, chosen.repeat_interleave(U * S).view(-1, 1)).sum()
            grads = torch.autograd.grad(target, values, allow_unused=True)
    scores = []
    for span, grad in zip(spans, grads):
        if grad is None:
            scores.append(torch.zeros(B, device=x.device))
            continue
        mean_grad = grad.view(B, S, *span.shape[1:]).mean(1)  # (B, ...)
        scores.append((mean_grad * span).flatten(1).sum(1))
    return torch.stack(scores, 1).detach()


def lens_kl_drop(lens: Lens) -> Tensor:
    """``(B, U)`` ``KL(p || q_{u-1}) - KL(p || q_u)`` with ``q_0`` uniform (module docstring)."""
    kl = lens.kl  # (B, U)
    p = lens.log_p.exp()
    prior = math.log(lens.log_p.shape[1]) + (p * lens.log_p).sum(-1)  # KL(p || uniform) = log K - H(p)
    return torch.cat([prior.unsqueeze(1), kl[:, :-1]], 1) - kl


def unit_scores(
    model: nn.Module, x: Tensor, units: Sequence[Unit], lens: Lens, baseline: Sequence[Tensor],
    steps: int = IG_STEPS, max_rows: int = MAX_ROWS,
) -> dict[str, Tensor]:  # fmt: skip
    """Every cheap score of :data:`SCORES`, ``(B, U)`` each, of the predicted class on ``x`` (``lens``: the lens of
    the same inputs, :func:`~laya.analysis.network.lens.unit_lens`)."""
    gradient = gradient_scores(model, x, units)
    return {
        "grad_x_act": gradient["grad_x_act"],
        "integrated_gradients": integrated_gradients(model, x, units, baseline, steps, max_rows=max_rows),
        "lens_kl_drop": lens_kl_drop(lens).to(gradient["grad_x_act"]),
        "gradcam_mass": gradient["gradcam_mass"],
    }


def score_agreement(
    scores: dict[str, Tensor], drops: Tensor, intervention: str, mask: Tensor | None = None,
    resamples: int = 1000, seed: int = 0, level: float = 0.95,
) -> pd.DataFrame:  # fmt: skip
    """One row per score: ``score``, ``intervention``, ``spearman_mean`` (mean over inputs of the per-input
    Spearman correlation over units of the score ``(N, U)`` with ``drops (N, U)``), its bootstrap ``ci_low``,
    ``ci_high`` over inputs, and ``n`` the inputs where it is defined (neither side constant over the units).
    ``mask`` ``(U,)`` or ``(N, U)``: only those units enter (e.g. the residual ones, for skip)."""
    if mask is not None:
        mask = torch.as_tensor(mask, dtype=torch.bool).cpu()
        mask = mask.expand(drops.shape) if mask.ndim == 1 else mask
    rho = np.stack([spearman_rows(s, drops, mask) for s in scores.values()], 1)  # (N, S)
    intervals = mean_intervals(torch.from_numpy(rho), resamples, seed, level)
    counted = (~np.isnan(rho)).sum(0)
    return pd.DataFrame(
        [(name, intervention, i.estimate, i.low, i.high, int(n)) for name, i, n in zip(scores, intervals, counted)],
        columns=list(AGREEMENT_COLUMNS),
    )


def baseline_scores(unit_means: Tensor, inputs: int, seed: int = 0) -> dict[str, Tensor]:
    """The :data:`BASELINES`, ``(inputs, U)`` each: ``unit_mean`` the per-unit mean drop ``unit_means`` ``(U,)``
    (of the intervention on the reference inputs) for every input, ``random`` uniform draws seeded by ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    means = unit_means.detach().double().cpu()
    return {"unit_mean": means.expand(inputs, -1).clone(),
            "random": torch.rand(inputs, len(means), generator=generator, dtype=torch.float64)}  # fmt: skip


def trusted_agreement(
    scores: dict[str, Tensor], baselines: dict[str, Tensor], drops: Tensor, intervention: str, mask: Tensor,
    resamples: int = 1000, seed: int = 0, level: float = 0.95,
) -> pd.DataFrame:  # fmt: skip
    """:func:`score_agreement` of ``scores`` and of ``baselines`` (:func:`baseline_scores`) over the units of
    ``mask`` ``(U,)`` (those that keep the input), with :data:`TRUST_COLUMNS`: ``kind`` ("score" or "baseline"),
    ``units`` how many units each input's correlation is over, and per score ``vs_baseline`` the mean over inputs
    of its Spearman minus the better baseline's (the baseline of the higher mean), ``vs_low``, ``vs_high`` its
    paired bootstrap CI over the inputs where both are defined, ``trusted`` whether that CI lies above 0."""
    mask = torch.as_tensor(mask, dtype=torch.bool).cpu()
    table = score_agreement(scores | baselines, drops, intervention, mask, resamples, seed, level)
    table.insert(len(table.columns), "kind", ["baseline" if k in baselines else "score" for k in table["score"]])
    table["units"] = int(mask.sum())
    m = mask.expand(drops.shape)
    rho = {name: spearman_rows(value, drops, m) for name, value in (scores | baselines).items()}
    defined = {k: rho[k][~np.isnan(rho[k])] for k in baselines}
    better = max(baselines, key=lambda k: float(defined[k].mean()) if len(defined[k]) else -math.inf)
    columns: dict[str, list[Any]] = {"vs_baseline": [], "vs_low": [], "vs_high": [], "trusted": []}
    for name in table["score"]:
        both = ~np.isnan(rho[name]) & ~np.isnan(rho[better])
        if name in baselines or both.sum() < 2:
            difference = None
        else:
            difference = paired_bootstrap(torch.from_numpy(rho[name][both]), torch.from_numpy(rho[better][both]),
                                          resamples=resamples, seed=seed, level=level).difference  # fmt: skip
        columns["vs_baseline"].append(math.nan if difference is None else difference.estimate)
        columns["vs_low"].append(math.nan if difference is None else difference.low)
        columns["vs_high"].append(math.nan if difference is None else difference.high)
        columns["trusted"].append(difference is not None and difference.low > 0)
    return table.assign(**columns)


def _apart_statistic(rows: Tensor) -> Tensor:
    """``(R, n, 1 + S) -> (R, 1 + S)``: per resample the mean of the first column (a unit's drop) and the Spearman
    correlation over the ``n`` rows of each other column (a score) with it (ties at their average rank,
    ``scipy.stats.spearmanr``; NaN where either is constant)."""
    from scipy.stats import rankdata  # lazily: scipy.stats costs about a CPU-second to import

    values = rows.double().cpu().numpy()
    centred = rankdata(values, axis=1)
    centred -= centred.mean(1, keepdims=True)
    squares = (centred**2).sum(1)  # (R, 1 + S)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (centred[..., :1] * centred[..., 1:]).sum(1) / np.sqrt(squares[:, :1] * squares[:, 1:])
    return torch.from_numpy(np.concatenate([values[..., 0].mean(1, keepdims=True), np.clip(rho, -1.0, 1.0)], 1))


APART_COLUMNS = ("unit", "intervention", "score", "drop", "drop_low", "drop_high", "spearman", "ci_low", "ci_high",
                 "n")  # fmt: skip


def apart_agreement(
    scores: dict[str, Tensor], drops: Tensor, intervention: str, mask: Tensor, units: Sequence[str],
    resamples: int = 1000, seed: int = 0, level: float = 0.95,
) -> pd.DataFrame:  # fmt: skip
    """The units :func:`trusted_agreement` leaves out (``mask`` ``(U,)`` False: they do not keep the input), each
    on its own (:data:`APART_COLUMNS`): per unit and score, the unit's mean ``drop`` ``(N,)`` over the inputs with its
    bootstrap CI, and ``spearman``, the Spearman correlation over the ``n`` inputs of the score at that unit with
    its drop, with its bootstrap CI (NaN where either is constant over the inputs). Empty where every unit keeps
    the input."""
    rows = []
    for u in torch.nonzero(~torch.as_tensor(mask, dtype=torch.bool).cpu())[:, 0].tolist():
        columns = torch.stack([drops[:, u], *(s[:, u] for s in scores.values())], 1).double().cpu()  # (N, 1 + S)
        drop, *rho = bootstrap_cis(columns, _apart_statistic, resamples, seed, level)
        rows += [(units[u], intervention, name, drop.estimate, drop.low, drop.high, r.estimate, r.low, r.high,
                  len(columns)) for name, r in zip(scores, rho)]  # fmt: skip
    return pd.DataFrame(rows, columns=list(APART_COLUMNS))


def best_score(agreement: pd.DataFrame, intervention: str) -> pd.Series | None:
    """The row of ``agreement`` for ``intervention`` with the highest mean among the scores it trusts (that beat
    the better baseline, :func:`trusted_agreement`); in a table without baselines, among those whose CI lies above
    0. None where no score is so: none can be trusted."""
    rows = agreement[agreement["intervention"] == intervention]
    if "trusted" in rows and rows["trusted"].notna().any():
        rows = rows[(rows["kind"] == "score") & rows["trusted"].fillna(False).astype(bool)]
    else:
        rows = rows[rows["ci_low"] > 0]
    return None if rows.empty else rows.loc[rows["spearman_mean"].idxmax()]


__all__ = [
    "AGREEMENT_COLUMNS", "APART_COLUMNS", "BASELINES", "IG_STEPS", "SCORES", "SCORE_LABELS", "TRUST_COLUMNS",
    "Baseline", "apart_agreement", "baseline_scores", "baselines", "best_score", "gradient_scores",
    "integrated_gradients", "lens_kl_drop", "score_agreement", "trusted_agreement", "unit_scores",
]  # fmt: skip
