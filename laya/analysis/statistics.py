"""Uncertainty for every published number: bootstrap CIs over inputs, paired tests over inputs and seeds.

* :func:`bootstrap_ci` — percentile bootstrap of any statistic of per-input rows, vectorised: the
  statistic is evaluated on all resamples at once (``(R, n, ...)`` gathered rows), in chunks so memory
  stays bounded. Seeded, so a report is reproducible to the last digit.
* :func:`paired_bootstrap` — difference of a statistic between two methods evaluated on the *same*
  resampled inputs; two-sided p-value from the bootstrap distribution (``2 min(P(d<=0), P(d>=0))``).
* :func:`mean_intervals` / :func:`paired_mean_differences` — the same bootstrap for the mean of many
  per-input columns at once ``(n, K)``: the resamples become a count matrix ``W`` ``(R, n)`` (the same
  indices :func:`bootstrap_distribution` draws for the same seed) and every resampled mean is one
  matrix product, ``(W @ x) / (W @ 1)`` with NaN entries left out: a report's hundreds of figures
  cost one ``(R, n) @ (n, K)`` product.
* :func:`paired_over_seeds` — paired t-test (``scipy.stats.ttest_rel``) over seeds, with the mean
  difference and its t-interval.

A difference whose CI covers 0 is a tie (:func:`paired_verdict`; :func:`verdict` words it). A family of
comparisons stated together is Holm-corrected (:func:`holm`); a saving counts only beyond its own timing noise
(:func:`saving_verdict`). :func:`format_diff` writes a signed difference with its CI, the form every page and
generated sentence uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

Statistic = Callable[[Tensor], Tensor]  # (R, n, ...) resampled rows -> (R,) or (R, K)


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval (``level``, e.g. 0.95)."""

    estimate: float
    low: float
    high: float
    level: float = 0.95

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def __format__(self, spec: str) -> str:
        spec = spec or ".3f"
        return f"{self.estimate:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"


def mean_statistic(rows: Tensor) -> Tensor:
    """The default statistic: the mean over inputs (dim 1 of ``(R, n, ...)``), NaN rows ignored."""
    return rows.nanmean(dim=1)


def median_and_trimmed_mean(trim: float) -> Statistic:
    """Statistic ``(R, n) -> (R, 2)``: the median and the ``trim``-trimmed mean over inputs (no NaN).

    Median: the average of the two middle values for even ``n`` (``np.median``); trimmed mean: the mean
    after cutting ``floor(trim * n)`` values from each end (``scipy.stats.trim_mean``). Robust companions of
    a mean driven by a few outliers.
    """
    if not 0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), got {trim}")

    def statistic(rows: Tensor) -> Tensor:
        n = rows.shape[1]
        ordered = rows.sort(dim=1).values
        k = int(trim * n)
        median = (ordered[:, (n - 1) // 2] + ordered[:, n // 2]) / 2
        return torch.stack([median, ordered[:, k : n - k].mean(dim=1)], dim=1)

    return statistic


def robust_intervals(
    values: Tensor | np.ndarray, trim: float, counts: Tensor, level: float = 0.95
) -> tuple[Interval, Interval]:
    """Percentile bootstrap CIs of the median and the ``trim``-trimmed mean of ``values`` ``(m,)`` (no NaN),
    from resample ``counts`` ``(R, m)`` (:func:`resample_counts`: the resamples of :func:`bootstrap_distribution`
    with the same seed, so equal to ``bootstrap_cis(values, median_and_trimmed_mean(trim), R, seed)``).

    Without materialising the ``(R, m)`` resamples: with ``v`` sorted once and ``W`` the counts in that order,
    the ``q``-th smallest value of resample ``r`` is ``v[#{j: cumsum(W_r)_j <= q}]`` and the sum of its ``q``
    smallest values follows from ``cumsum(W_r v)``; one ``(R, m)`` cumulative sum each, shareable ``counts``.
    """
    values = torch.as_tensor(values).double().cpu()
    estimate = median_and_trimmed_mean(trim)(values.unsqueeze(0))[0]
    ordered, order = values.sort()
    weights = counts[:, order]
    cumulative = weights.cumsum(1)  # (R, m) how many resampled values are <= ordered[j]
    sums = (weights * ordered).cumsum(1)
    total = cumulative[:, -1:]  # (R, 1) = m

    def kth(q: Tensor) -> Tensor:  # (R, 1) 0-based positions -> values
        return ordered[torch.searchsorted(cumulative, q, right=True).clamp(max=len(values) - 1)]

    def smallest_sum(q: Tensor) -> Tensor:  # (R, 1) sum of the q smallest resampled values
        full = torch.searchsorted(cumulative, q, right=True)  # groups entirely below position q
        before = torch.where(full > 0, sums.gather(1, (full - 1).clamp(min=0)), 0.0)
        counted = torch.where(full > 0, cumulative.gather(1, (full - 1).clamp(min=0)), 0.0)
        return before + (q - counted) * ordered[full.clamp(max=len(values) - 1)]

    median = (kth(torch.div(total - 1, 2, rounding_mode="floor")) + kth(torch.div(total, 2, rounding_mode="floor"))) / 2
    cut = torch.floor(trim * total)
    trimmed = (smallest_sum(total - cut) - smallest_sum(cut)) / (total - 2 * cut)
    return (
        _percentile_interval(float(estimate[0]), median[:, 0], level),
        _percentile_interval(float(estimate[1]), trimmed[:, 0], level),
    )


def bootstrap_distribution(
    values: Tensor | np.ndarray,
    statistic: Statistic = mean_statistic,
    resamples: int = 1000,
    seed: int = 0,
    chunk: int = 100,
) -> Tensor:
    """``(R, ...)`` statistic on ``resamples`` bootstrap resamples of the rows of ``values`` ``(n, ...)``.

    Resample indices come from a ``torch.Generator`` seeded with ``seed`` (on the CPU, so the same
    seed gives the same CI on every device); rows are gathered on ``values``' device.
    """
    values = torch.as_tensor(values)
    n = values.shape[0]
    return torch.cat([statistic(values[idx.to(values.device)]) for idx in _resample_indices(n, resamples, seed, chunk)])


def _resample_indices(n: int, resamples: int, seed: int, chunk: int = 100):
    """Yield ``(r, n)`` row indices, ``resamples`` rows in all, from a CPU generator seeded with ``seed``."""
    if n == 0:
        raise ValueError("cannot bootstrap an empty sample")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    generator = torch.Generator().manual_seed(seed)
    for start in range(0, resamples, chunk):
        yield torch.randint(n, (min(chunk, resamples - start), n), generator=generator)


def resample_counts(n: int, resamples: int = 1000, seed: int = 0) -> Tensor:
    """``(R, n)`` float64: how often each row is drawn in each resample (the indices of
    :func:`bootstrap_distribution` with the same ``seed``)."""
    counts = torch.zeros(resamples, n, dtype=torch.float64)
    row = 0
    for idx in _resample_indices(n, resamples, seed):
        counts[row : row + len(idx)].scatter_add_(1, idx, torch.ones(idx.shape, dtype=torch.float64))
        row += len(idx)
    return counts


def _weighted_nanmeans(values: Tensor, weights: Tensor) -> Tensor:
    """``(R, K)`` NaN-ignoring means of the columns of ``values`` ``(n, K)`` under row weights ``(R, n)``."""
    present = ~torch.isnan(values)
    totals = weights @ torch.where(present, values, 0.0)
    counted = weights @ present.double()
    return totals / counted  # NaN where a resample drew no non-NaN row


def bootstrap_means(values: Tensor | np.ndarray, resamples: int = 1000, seed: int = 0) -> Tensor:
    """``(R, K)`` bootstrap distribution of the NaN-ignoring mean of each column of ``values`` ``(n, K)``."""
    values = torch.as_tensor(values).double().cpu()
    if values.ndim != 2:
        raise ValueError(f"values must be (n, K); got shape {tuple(values.shape)}")
    return _weighted_nanmeans(values, resample_counts(values.shape[0], resamples, seed))


def mean_intervals(
    values: Tensor | np.ndarray, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> list[Interval]:
    """Percentile bootstrap CI of the (NaN-ignoring) mean of every column of ``values`` ``(n, K)``."""
    values = torch.as_tensor(values).double().cpu()
    dist = bootstrap_means(values, resamples, seed)
    estimates = values.nanmean(dim=0)
    return [_percentile_interval(float(estimates[k]), dist[:, k], level) for k in range(values.shape[1])]


def paired_mean_differences(
    values: Tensor | np.ndarray,
    pairs: Sequence[tuple[int, int]],
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> list[PairedComparison]:
    """Paired bootstrap over inputs of ``mean(column a) - mean(column b)`` for each ``(a, b)`` in ``pairs``,
    all on the same resamples (equal to :func:`paired_bootstrap` of the two columns, same seed)."""
    values = torch.as_tensor(values).double().cpu()
    dist = bootstrap_means(values, resamples, seed)
    estimates = values.nanmean(dim=0)
    return [
        _paired_result(float(estimates[a] - estimates[b]), dist[:, a] - dist[:, b], level, values.shape[0])
        for a, b in pairs
    ]


def _percentile_interval(estimate: float, dist: Tensor, level: float) -> Interval:
    dist = dist.double().cpu().numpy()
    dist = dist[~np.isnan(dist)]
    if len(dist) == 0:
        return Interval(estimate, float("nan"), float("nan"), level)
    low, high = np.quantile(dist, [(1 - level) / 2, (1 + level) / 2])
    return Interval(estimate, float(low), float(high), level)


def bootstrap_ci(
    values: Tensor | np.ndarray,
    statistic: Statistic = mean_statistic,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """Percentile bootstrap CI of ``statistic`` over the rows (inputs) of ``values``.

    ``statistic`` maps ``(R, n, ...)`` to ``(R,)``; the estimate is the statistic on the sample itself.
    """
    return bootstrap_cis(values, lambda rows: statistic(rows).unsqueeze(1), resamples, seed, level)[0]


def bootstrap_cis(
    values: Tensor | np.ndarray,
    statistic: Statistic = mean_statistic,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> list[Interval]:
    """:func:`bootstrap_ci` for a vector statistic (``(R, n, ...) -> (R, K)``): one interval per component,
    all from the same resamples."""
    values = torch.as_tensor(values)
    estimates = statistic(values.unsqueeze(0))[0]
    dist = bootstrap_distribution(values, statistic, resamples, seed)  # (R, K)
    return [_percentile_interval(float(e), dist[:, k], level) for k, e in enumerate(estimates.tolist())]


@dataclass(frozen=True)
class PairedComparison:
    """``a - b`` on the same inputs (or seeds): the difference, its CI, the p-value and the test used."""

    difference: Interval
    p_value: float
    test: str
    n: int

    @property
    def tie(self) -> bool:
        """The CI covers 0: no difference can be claimed (:func:`paired_verdict`)."""
        return paired_verdict(self.difference.low, self.difference.high) == "tie"

    def to_dict(self) -> dict[str, object]:
        return {"difference": self.difference.to_dict(), "p_value": self.p_value, "test": self.test, "n": self.n,
                "tie": self.tie}  # fmt: skip


def paired_bootstrap(
    a: Tensor | np.ndarray,
    b: Tensor | np.ndarray,
    statistic: Statistic = mean_statistic,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> PairedComparison:
    """Paired bootstrap over inputs: ``statistic(a) - statistic(b)`` on the same resampled rows."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"paired samples need the same inputs; got {a.shape[0]} and {b.shape[0]} rows")
    both = torch.stack([a.double(), b.double()], dim=1)  # (n, 2, ...)

    def diff(rows: Tensor) -> Tensor:  # (R, n, 2, ...) -> (R,)
        return statistic(rows[:, :, 0]) - statistic(rows[:, :, 1])

    estimate = float(diff(both.unsqueeze(0))[0])
    return _paired_result(estimate, bootstrap_distribution(both, diff, resamples, seed), level, a.shape[0])


def _paired_result(estimate: float, dist: Tensor, level: float, n: int) -> PairedComparison:
    """CI and two-sided p-value (``2 min(P(d <= 0), P(d >= 0))``) from a bootstrap distribution of a difference."""
    finite = dist[~torch.isnan(dist)]
    p = float(2 * min((finite <= 0).double().mean(), (finite >= 0).double().mean())) if len(finite) else float("nan")
    return PairedComparison(_percentile_interval(estimate, dist, level), min(p, 1.0), "paired bootstrap", n)


def paired_over_seeds(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> PairedComparison:
    """Paired t-test over seeds (``scipy.stats.ttest_rel``): mean of ``a - b`` with its t-interval."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need one value per seed for both, paired; got shapes {a.shape} and {b.shape}")
    d = a - b
    n = len(d)
    if n < 2:
        return PairedComparison(Interval(float(d.mean()) if n else float("nan"), float("nan"), float("nan"), level),
                                float("nan"), "paired t-test over seeds", n)  # fmt: skip
    from scipy import stats  # lazily: scipy.stats costs ≈ 1 CPU-s to import (docs/speed.md)

    result = stats.ttest_rel(a, b)
    if np.all(d == d[0]):  # zero variance: the t-test is undefined; the difference is exact
        return PairedComparison(Interval(float(d[0]), float(d[0]), float(d[0]), level),
                                0.0 if d[0] != 0 else 1.0, "paired t-test over seeds", n)  # fmt: skip
    ci = result.confidence_interval(confidence_level=level)
    return PairedComparison(Interval(float(d.mean()), float(ci.low), float(ci.high), level), float(result.pvalue),
                            "paired t-test over seeds", n)  # fmt: skip


def seed_interval(values: Sequence[float], level: float = 0.95) -> Interval:
    """Mean over seeds with a t-interval (``mean ± t_{n-1} s / sqrt(n)``); NaN bounds for one seed."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return Interval(float(v.mean()) if len(v) else float("nan"), float("nan"), float("nan"), level)
    from scipy import stats

    half = stats.t.ppf((1 + level) / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return Interval(float(v.mean()), float(v.mean() - half), float(v.mean() + half), level)


Direction = Literal["higher", "lower", "tie"]
Saving = Literal["saves", "costs", "within the noise"]


def paired_verdict(low: float, high: float) -> Direction:
    """The direction of a paired difference ``a - b`` from its CI ``[low, high]``: ``"tie"`` where the CI covers 0
    (``low <= 0 <= high``) or is undefined (NaN), else ``"higher"`` (``low > 0``) or ``"lower"`` (``high < 0``)."""
    if np.isnan(low) or np.isnan(high) or low <= 0.0 <= high:
        return "tie"
    return "higher" if low > 0 else "lower"


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values of a family of ``m`` tests (same order as given).

    With the p-values sorted, ``p_(1) <= ... <= p_(m)``: ``adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``.
    Rejecting where ``adj <= alpha`` controls the family-wise error rate at ``alpha``; NaN stays NaN and is not
    counted in ``m``.
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p_values must be one value per test; got shape {p.shape}")
    if np.any((p < 0) | (p > 1)):
        raise ValueError(f"p-values must lie in [0, 1]; got {p[(p < 0) | (p > 1)].tolist()}")
    out = np.full_like(p, np.nan)
    present = np.flatnonzero(~np.isnan(p))
    order = present[np.argsort(p[present], kind="stable")]
    m = len(order)
    out[order] = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    return out


def holm_verdict(low: float, high: float, adjusted_p: float, alpha: float = 0.05) -> Direction:
    """:func:`paired_verdict` within a Holm-corrected family: a tie also where the adjusted p exceeds ``alpha``."""
    return "tie" if not adjusted_p <= alpha else paired_verdict(low, high)


#: the reading of a difference whose unadjusted CI excludes 0 but whose Holm-adjusted p exceeds the level
BEFORE_CORRECTION = "significant before correction, not after"


def holm_reading(low: float, high: float, adjusted_p: float, alpha: float = 0.05) -> Direction | str:
    """:func:`holm_verdict` in words that never contradict the unadjusted CI ``[low, high]`` printed beside it:
    ``"higher"`` / ``"lower"`` (the CI excludes 0 and the adjusted p <= ``alpha``), ``"tie"`` (the CI covers 0),
    or :data:`BEFORE_CORRECTION` (the CI excludes 0, the adjusted p exceeds ``alpha``)."""
    direction = paired_verdict(low, high)
    if direction != "tie" and holm_verdict(low, high, adjusted_p, alpha) == "tie":
        return BEFORE_CORRECTION
    return direction


def saving_verdict(saving: float, noise: float) -> Saving:
    """A measured saving (a fraction: ``+0.23`` is 23 % less time; a speed-up minus 1 likewise) against its own
    timing noise (``measured.timing_spread``: the half-range of repeated timings of the same work over their
    median): ``"saves"`` only where ``saving > noise``, ``"costs"`` where ``saving < -noise``, otherwise
    ``"within the noise"`` (also where either is NaN)."""
    if np.isnan(saving) or np.isnan(noise) or abs(saving) <= noise:
        return "within the noise"
    return "saves" if saving > 0 else "costs"


def format_diff(estimate: float, low: float, high: float, digits: int = 3) -> str:
    """A signed difference with its CI: ``+0.031 [+0.023, +0.038]`` (``digits`` decimals, every sign written)."""
    return f"{estimate:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def format_p(p: float) -> str:
    """``p=0.003``; ``p<1/R: no resample crossed 0`` for a bootstrap p of 0."""
    return "p<1/R: no resample crossed 0" if p == 0 else f"p={p:.2g}"


def verdict(comparison: PairedComparison, a: str, b: str) -> str:
    """``"A > B (paired bootstrap, p=0.003)"``, or ``"tie"`` where the CI of the difference covers 0."""
    d, p = comparison.difference, format_p(comparison.p_value)
    direction = paired_verdict(d.low, d.high)
    if direction == "tie":
        return f"{a} ≈ {b}: tie ({comparison.test}, Δ {format_diff(d.estimate, d.low, d.high)}, {p})"
    sign = ">" if direction == "higher" else "<"
    return f"{a} {sign} {b} ({comparison.test}, Δ {format_diff(d.estimate, d.low, d.high)}, {p})"


__all__ = [
    "Interval",
    "PairedComparison",
    "bootstrap_ci",
    "bootstrap_cis",
    "bootstrap_distribution",
    "bootstrap_means",
    "format_diff",
    "format_p",
    "holm",
    "holm_reading",
    "holm_verdict",
    "BEFORE_CORRECTION",
    "mean_intervals",
    "mean_statistic",
    "median_and_trimmed_mean",
    "paired_bootstrap",
    "paired_mean_differences",
    "paired_over_seeds",
    "paired_verdict",
    "resample_counts",
    "robust_intervals",
    "saving_verdict",
    "seed_interval",
    "verdict",
]
