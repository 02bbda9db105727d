"""Faithfulness of layer scores to leave-one-layer-out effects.

* **Faithfulness** — per input, the Spearman correlation between a method's layer scores and
  the LOO drops (``scipy.stats.spearmanr`` semantics: average ranks for ties), averaged over
  inputs. Inputs where either side is constant have no correlation; they are excluded and counted.
* **Deletion@1** — mean drop in the predicted class's probability after removing the layer the
  method ranks first (ties: the earlier layer), i.e. the LOO drop of the top-ranked layer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks along the last axis, ties sharing their average rank (``scipy.stats.rankdata``).

    ``rank_j = #{k: v_k < v_j} + (#{k: v_k = v_j} + 1) / 2``, by pairwise comparison: for the
    few layers of a network this is much faster than sorting row by row.
    """
    below = (values[..., None, :] < values[..., :, None]).sum(-1)
    equal = (values[..., None, :] == values[..., :, None]).sum(-1)
    return below + (equal + 1) / 2.0


def spearman_rows(scores: Tensor | np.ndarray, drops: Tensor | np.ndarray) -> np.ndarray:
    """Row-wise Spearman correlation ``(N,)``; NaN where a row of either input is constant.

    Equal to ``scipy.stats.spearmanr(scores[n], drops[n]).statistic`` for every row ``n``
    (Pearson correlation of average ranks), computed for all rows at once.
    """
    a = torch.as_tensor(scores).detach().cpu().double().numpy()
    b = torch.as_tensor(drops).detach().cpu().double().numpy()
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"scores and drops must both be (N, L); got {a.shape} and {b.shape}")
    ra = average_ranks(a)
    rb = average_ranks(b)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    denom = np.sqrt((ra**2).sum(axis=1) * (rb**2).sum(axis=1))
    constant = (np.ptp(a, axis=1) == 0) | (np.ptp(b, axis=1) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (ra * rb).sum(axis=1) / denom
    rho[constant] = np.nan
    return np.clip(rho, -1.0, 1.0)


def top_ranked(scores: Tensor) -> Tensor:
    """``(N,)`` index of each input's highest-scored layer (first one on ties)."""
    return torch.as_tensor(scores).argmax(dim=1)


def deletion_at_1(scores: Tensor, drops: Tensor) -> Tensor:
    """``(N,)`` LOO drop of each input's top-ranked layer."""
    drops = torch.as_tensor(drops)
    return drops.gather(1, top_ranked(scores).to(drops.device).unsqueeze(1)).squeeze(1)


@dataclass
class FaithfulnessSummary:
    """Dataset-level faithfulness of one method under one ablation mode."""

    spearman_mean: float
    spearman_std: float
    n_valid: int
    n_excluded: int  # inputs with constant scores or constant drops
    deletion_at_1: float
    deletion_at_1_std: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def summarise(scores: Tensor, drops: Tensor) -> FaithfulnessSummary:
    """Mean/std Spearman over valid inputs, exclusion count, Deletion@1 over all inputs."""
    rho = spearman_rows(scores, drops)
    valid = rho[~np.isnan(rho)]
    d1 = deletion_at_1(scores, drops).double()
    return FaithfulnessSummary(
        spearman_mean=float(valid.mean()) if len(valid) else float("nan"),
        spearman_std=float(valid.std()) if len(valid) else float("nan"),
        n_valid=len(valid),
        n_excluded=int(len(rho) - len(valid)),
        deletion_at_1=float(d1.mean()),
        deletion_at_1_std=float(d1.std()) if len(d1) > 1 else 0.0,
    )


__all__ = ["FaithfulnessSummary", "average_ranks", "deletion_at_1", "spearman_rows", "summarise", "top_ranked"]
