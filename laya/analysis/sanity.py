"""Sanity check of a map method: the cascading model-parameter randomisation test (Adebayo et al., 2018, "Sanity
Checks for Saliency Maps", https://arxiv.org/abs/1810.03292).

The network's parameter groups are re-initialised one after another from the top (the classifier) down, the
earlier ones staying random (:func:`cascading_randomization`); after each step every method's map of the same
inputs and the same class is compared with its map on the trained network by Spearman's rank correlation over the
map's pixels (:func:`spearman`, one value per input). A method whose maps stay nearly the same when every weight is
random explains the image, not the model (:func:`barely_changes`).

Equations, per input ``b`` with maps ``m, m'`` of ``P`` pixels (``rank``: average ranks, ties shared)::

    rho_b = corr(rank(m_b), rank(m'_b))                Spearman, in [-1, 1]
    flag  = upper 95 % bootstrap bound of mean_b rho_b >= threshold   (after the last step)

A map that is constant over its pixels has no ranking: ``rho_b`` is 1 where both maps are constant (nothing
changed) and 0 where only one is.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from laya.analysis.statistics import Interval, bootstrap_ci

#: the similarity after full randomisation at or above which a method "barely changes" (its CI reaches it)
THRESHOLD = 0.9


def reinitialize(module: nn.Module, seed: int = 0) -> None:
    """Re-draw every parameter of ``module`` in place, seeded: each submodule's own ``reset_parameters`` (its
    initialisation scheme; BatchNorm's also resets its running statistics), and a parameter no such method
    re-drew from ``N(0, s^2)``, ``s`` its trained standard deviation (0.02 where that is 0 or undefined)."""
    before = {id(p): p.detach().clone() for p in module.parameters()}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with torch.no_grad():
            for m in module.modules():
                if hasattr(m, "reset_parameters") and callable(m.reset_parameters):
                    m.reset_parameters()
            for p in module.parameters():
                if torch.equal(p, before[id(p)]):
                    std = float(p.std()) if p.numel() > 1 else 0.0
                    p.normal_(0.0, std if std > 0 and np.isfinite(std) else 0.02)


def cascading_randomization(
    model: nn.Module, groups: Sequence[tuple[str, Sequence[str]]], seed: int = 0
) -> Iterator[tuple[str, nn.Module]]:
    """Yield ``(label, network)`` after each step of the cascade: ``groups`` are ``(label, module names)`` in
    ``model`` from the top down; step ``k`` re-initialises group ``k`` (:func:`reinitialize`, seed ``seed + k``)
    in a copy in which groups ``0 .. k-1`` are already random. ``model`` itself is never changed; the copy is the
    same object at every step (compute its maps before asking for the next).

    Raises:
        ValueError: no groups, or a module name that ``model`` does not have (named with the ones it has).
    """
    if not groups:
        raise ValueError("cascading_randomization needs at least one group of modules, got none")
    names = dict(model.named_modules())
    missing = [n for _, group in groups for n in group if n not in names]
    if missing:
        raise ValueError(f"unknown modules {missing}; the model has e.g. {list(names)[1:12]}")
    net = copy.deepcopy(model)
    for k, (label, group) in enumerate(groups):
        for name in group:
            reinitialize(net.get_submodule(name), seed + k)
        yield label, net


def spearman(a: Tensor, b: Tensor) -> Tensor:
    """``(B,)`` Spearman rank correlation of the maps ``a`` and ``b`` ``(B, ...)`` over their pixels (average ranks
    for ties); 1 where both maps are constant, 0 where only one is."""
    from scipy.stats import rankdata  # lazily: scipy.stats costs about a CPU-second to import

    if a.shape != b.shape or a.ndim < 2:
        raise ValueError(f"maps must be equally shaped (B, ...), got {tuple(a.shape)} and {tuple(b.shape)}")
    ra = rankdata(a.detach().flatten(1).double().cpu().numpy(), axis=1)
    rb = rankdata(b.detach().flatten(1).double().cpu().numpy(), axis=1)
    ra, rb = ra - ra.mean(1, keepdims=True), rb - rb.mean(1, keepdims=True)
    na, nb = np.sqrt((ra**2).sum(1)), np.sqrt((rb**2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (ra * rb).sum(1) / (na * nb)
    flat_a, flat_b = na == 0, nb == 0
    rho = np.where(flat_a & flat_b, 1.0, np.where(flat_a | flat_b, 0.0, rho))
    return torch.from_numpy(np.clip(rho, -1.0, 1.0))


def barely_changes(rho: Tensor, threshold: float = THRESHOLD, resamples: int = 1000) -> tuple[Interval, bool]:
    """The mean Spearman ``rho`` ``(B,)`` with its 95 % bootstrap CI over inputs, and whether the method barely
    changes: the CI's upper bound reaches ``threshold`` (its maps cannot be shown to differ from the trained
    network's by more than that)."""
    ci = bootstrap_ci(rho.double(), resamples=resamples)
    return ci, bool(ci.high >= threshold)


__all__ = ["THRESHOLD", "barely_changes", "cascading_randomization", "reinitialize", "spearman"]
