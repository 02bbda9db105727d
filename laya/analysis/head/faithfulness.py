"""Faithfulness of layer scores to leave-one-layer-out (LOO) effects, per input.

Every metric is first computed per input (``(N,)`` arrays, NaN where undefined), so that the report's
means, bootstrap CIs and paired tests all come from the same arrays (:mod:`laya.analysis.statistics`).

* ``spearman`` — Spearman correlation between the method's scores and the LOO drops over all L
  layers (``scipy.stats.spearmanr`` semantics: average ranks for ties); NaN where either side is
  constant. This is the paper's metric. It is decided by noise when some drops are negligible
  (CNN-LAYA's ~1e-9 drops on layers α ignores) and by exact ties when only one layer can matter.
* ``spearman_eps`` — the same, restricted to the input's *informative* layers, ``|drop_i| > ε``
  (:data:`EPSILON` = 1e-3, a tenth of a percentage point of probability).
* ``top1`` — 1 if the method's top layer is the layer with the largest LOO drop, else 0.
* ``deletion_at_1`` — the LOO drop of the method's top layer (ties: the earlier layer).
* ``deletion_at_1_norm`` — that drop divided by the oracle's, the largest LOO drop of the input:
  1 = the method picks the layer whose removal hurts most.

``spearman_eps``, ``top1`` and ``deletion_at_1_norm`` are defined only on inputs with at least
:data:`MIN_INFORMATIVE` = 2 informative layers and a largest drop above ε: with one informative
layer any ranking that puts it first (a constant scorer ``[0, …, 0, 1]`` on LastLayer) is "perfect".
A method/head with no such input has no faithfulness: :data:`NOT_APPLICABLE`, never 1.000.

Deletion@1 / oracle is a ratio whose mean a few inputs with a tiny oracle drop can dominate (values far
below 0); :data:`ROBUST_METRICS` are its robust companions over the testable inputs, reported beside the
mean: the median and the :data:`TRIM`-trimmed mean (``floor(TRIM * n)`` cut from each end).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

EPSILON = 1e-3  # |drop| above which a layer counts as informative (probability units)
MIN_INFORMATIVE = 2  # informative layers an input needs for a ranking to be tested
METRICS = ("spearman", "spearman_eps", "top1", "deletion_at_1", "deletion_at_1_norm")
METRIC_LABELS = {
    "spearman": "Spearman (all layers)",
    "spearman_eps": "Spearman (informative layers)",
    "top1": "top-1 agreement",
    "deletion_at_1": "Deletion@1",
    "deletion_at_1_norm": "Deletion@1 / oracle",
    "deletion_at_1_norm_median": "Deletion@1 / oracle (median)",
    "deletion_at_1_norm_trimmed": "Deletion@1 / oracle (5%-trimmed mean)",
}
TRIM = 0.05  # fraction cut from each end for the trimmed mean (the label above states it)
ROBUST_METRICS = ("deletion_at_1_norm_median", "deletion_at_1_norm_trimmed")  # summaries of deletion_at_1_norm
REPORTED_METRICS = METRICS + ROBUST_METRICS
HEADLINE_METRIC = "spearman_eps"
NOT_APPLICABLE = "n/a (one informative layer)"


def average_ranks(values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """1-based ranks along the last axis, ties sharing their average rank (``scipy.stats.rankdata``).

    ``rank_j = #{k: v_k < v_j} + (#{k: v_k = v_j} + 1) / 2``, by pairwise comparison: for the
    few layers of a network this is much faster than sorting row by row. With ``mask`` (same shape,
    bool) only the masked entries of a row are ranked among themselves (others: undefined).
    """
    pairs = np.ones(values.shape + values.shape[-1:], dtype=bool) if mask is None else mask[..., None, :]
    below = ((values[..., None, :] < values[..., :, None]) & pairs).sum(-1)
    equal = ((values[..., None, :] == values[..., :, None]) & pairs).sum(-1)
    return below + (equal + 1) / 2.0


def _numpy(x: Tensor | np.ndarray) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x.astype(np.float64, copy=False)
    return x.detach().cpu().double().numpy() if isinstance(x, Tensor) else np.asarray(x, dtype=np.float64)


def spearman_rows(
    scores: Tensor | np.ndarray, drops: Tensor | np.ndarray, mask: Tensor | np.ndarray | None = None
) -> np.ndarray:
    """Row-wise Spearman correlation ``(N,)``; NaN where a row of either input is constant.

    Equal to ``scipy.stats.spearmanr(scores[n], drops[n]).statistic`` for every row ``n``
    (Pearson correlation of average ranks), computed for all rows at once. With ``mask`` ``(N, L)``
    only the masked layers of each row enter (NaN for rows with fewer than 2).
    """
    a, b = _numpy(scores), _numpy(drops)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"scores and drops must both be (N, L); got {a.shape} and {b.shape}")
    m = np.ones(a.shape, dtype=bool) if mask is None else np.asarray(_numpy(mask) != 0)
    count = m.sum(axis=1, keepdims=True)
    both = np.stack([a, b])  # (2, N, L): each step below serves scores and drops at once
    ranks = average_ranks(both, m)
    with np.errstate(invalid="ignore", divide="ignore"):
        ranks = np.where(m, ranks - (ranks * m).sum(axis=2, keepdims=True) / count, 0.0)
        ra, rb = ranks
        rho = (ra * rb).sum(axis=1) / np.sqrt((ranks**2).sum(axis=2).prod(axis=0))
    big, small = np.finfo(float).max, np.finfo(float).min
    constant = (np.where(m, both, small).max(2) == np.where(m, both, big).min(2)).any(axis=0)
    rho[constant | (count[:, 0] < 2)] = np.nan
    return np.clip(rho, -1.0, 1.0)


def top_ranked(scores: Tensor) -> Tensor:
    """``(N,)`` index of each input's highest-scored layer (first one on ties)."""
    return torch.as_tensor(scores).argmax(dim=1)


def deletion_at_1(scores: Tensor, drops: Tensor) -> Tensor:
    """``(N,)`` LOO drop of each input's top-ranked layer."""
    drops = torch.as_tensor(drops)
    return drops.gather(1, top_ranked(scores).to(drops.device).unsqueeze(1)).squeeze(1)


def _informative(drops: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    layers = np.abs(drops) > epsilon
    return layers, (layers.sum(1) >= MIN_INFORMATIVE) & (drops.max(1) > epsilon)


def informative(drops: Tensor, epsilon: float = EPSILON) -> tuple[Tensor, Tensor]:
    """``(N, L)`` layers with ``|drop| > epsilon`` and ``(N,)`` inputs whose ranking can be tested:
    at least :data:`MIN_INFORMATIVE` informative layers and a largest drop above ``epsilon``."""
    layers, testable = _informative(_numpy(drops), epsilon)
    return torch.from_numpy(layers), torch.from_numpy(testable)


def per_input_metrics(scores: Tensor, drops: Tensor, epsilon: float = EPSILON) -> dict[str, Tensor]:
    """Every metric of :data:`METRICS` per input: ``{metric: (N,) float64}``, NaN where undefined.

    In numpy (float64), which costs a few µs per operation where torch costs several: one input's metrics
    are a fixed cost of the dashboard's Inspect page."""
    a, b = _numpy(scores), _numpy(drops)
    layers, testable = _informative(b, epsilon)
    top = a.argmax(1)  # first of ties, as top_ranked
    d1 = b[np.arange(len(b)), top]
    N = len(a)
    # One call for both Spearman variants: rows 0..N-1 over all layers, N..2N-1 over the informative ones.
    rho = spearman_rows(np.concatenate([a, a]), np.concatenate([b, b]), np.concatenate([np.ones_like(layers), layers]))
    with np.errstate(divide="ignore", invalid="ignore"):
        values = {
            "spearman": rho[:N],
            "spearman_eps": np.where(testable, rho[N:], np.nan),
            "top1": np.where(testable, (top == b.argmax(1)).astype(np.float64), np.nan),
            "deletion_at_1": d1,
            "deletion_at_1_norm": np.where(testable, d1 / b.max(1), np.nan),
        }
    return {metric: torch.from_numpy(v) for metric, v in values.items()}


def _spearman(a: list[float], b: list[float]) -> float:
    """One row of :func:`spearman_rows` in plain Python (NaN where either side is constant or has < 2 values)."""
    if len(a) < 2 or min(a) == max(a) or min(b) == max(b):
        return math.nan

    def centred_ranks(v: list[float]) -> list[float]:  # average ranks, as average_ranks, minus their mean
        ranks = [sum(w < x for w in v) + (sum(w == x for w in v) + 1) / 2.0 for x in v]
        mean = sum(ranks) / len(ranks)
        return [r - mean for r in ranks]

    ra, rb = centred_ranks(a), centred_ranks(b)
    rho = sum(x * y for x, y in zip(ra, rb)) / math.sqrt(sum(x * x for x in ra) * sum(y * y for y in rb))
    return min(max(rho, -1.0), 1.0)


def input_metrics(scores: Sequence[float], drops: Sequence[float], epsilon: float = EPSILON) -> dict[str, float]:
    """:func:`per_input_metrics` of ONE input (``(L,)`` scores and LOO drops): ``{metric: float}``, NaN where
    undefined. In plain Python: for the few layers of one input, numpy's fixed cost per call (tens of µs once
    its code is out of the CPU's caches, as on a page between model calls) exceeds the arithmetic; the values
    equal :func:`per_input_metrics`' to float rounding (tested). Non-finite inputs go to :func:`per_input_metrics`."""
    a, b = [float(v) for v in scores], [float(v) for v in drops]
    if len(a) != len(b) or not a:
        raise ValueError(f"scores and drops must both be (L,) with L >= 1; got {len(a)} and {len(b)} values")
    if not all(map(math.isfinite, a + b)):
        rows = torch.tensor([a], dtype=torch.float64), torch.tensor([b], dtype=torch.float64)
        return {k: float(v[0]) for k, v in per_input_metrics(*rows, epsilon).items()}
    informative = [i for i, d in enumerate(b) if abs(d) > epsilon]
    testable = len(informative) >= MIN_INFORMATIVE and max(b) > epsilon
    top = max(range(len(a)), key=a.__getitem__)  # first of ties, as top_ranked
    nan = math.nan
    return {
        "spearman": _spearman(a, b),
        "spearman_eps": _spearman([a[i] for i in informative], [b[i] for i in informative]) if testable else nan,
        "top1": float(top == max(range(len(b)), key=b.__getitem__)) if testable else nan,
        "deletion_at_1": b[top],
        "deletion_at_1_norm": b[top] / max(b) if testable else nan,
    }


__all__ = [
    "EPSILON",
    "HEADLINE_METRIC",
    "METRICS",
    "METRIC_LABELS",
    "MIN_INFORMATIVE",
    "NOT_APPLICABLE",
    "REPORTED_METRICS",
    "ROBUST_METRICS",
    "TRIM",
    "average_ranks",
    "deletion_at_1",
    "informative",
    "input_metrics",
    "per_input_metrics",
    "spearman_rows",
    "top_ranked",
]
