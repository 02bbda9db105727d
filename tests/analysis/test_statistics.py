"""Bootstrap CIs and paired tests: coverage of known answers, reproducibility, ties."""

import numpy as np
import pytest
import torch
from scipy import stats

from laya.analysis.statistics import (
    bootstrap_ci,
    paired_bootstrap,
    paired_over_seeds,
    seed_interval,
    verdict,
)


def test_bootstrap_mean_ci_matches_the_normal_approximation_and_is_seeded():
    x = torch.randn(4000, generator=torch.Generator().manual_seed(1), dtype=torch.float64) + 2.0
    ci = bootstrap_ci(x, resamples=2000, seed=3)
    half = 1.96 * x.std().item() / np.sqrt(len(x))
    assert ci.estimate == pytest.approx(x.mean().item())
    assert ci.low == pytest.approx(ci.estimate - half, abs=0.2 * half)
    assert ci.high == pytest.approx(ci.estimate + half, abs=0.2 * half)
    assert bootstrap_ci(x, resamples=2000, seed=3) == ci
    assert bootstrap_ci(x, resamples=2000, seed=4) != ci


def test_bootstrap_of_a_custom_statistic_and_nan_rows():
    x = torch.tensor([1.0, float("nan"), 3.0, 5.0])
    ci = bootstrap_ci(x, resamples=500)
    assert ci.estimate == pytest.approx(3.0)
    assert 1.0 <= ci.low <= ci.high <= 5.0
    med = bootstrap_ci(torch.arange(101.0), statistic=lambda r: r.median(dim=1).values, resamples=300)
    assert med.estimate == 50.0


def test_paired_bootstrap_detects_a_shift_and_calls_a_tie_a_tie():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(2000, generator=g, dtype=torch.float64)
    shifted = base + 0.1 + 0.01 * torch.randn(2000, generator=g, dtype=torch.float64)
    clear = paired_bootstrap(shifted, base)
    assert clear.difference.estimate == pytest.approx(0.1, abs=0.002)
    assert not clear.tie and clear.p_value < 0.01
    assert verdict(clear, "A", "B").startswith("A > B (paired bootstrap")
    noise = paired_bootstrap(base + 0.001 * torch.randn(2000, generator=g, dtype=torch.float64), base)
    same = paired_bootstrap(base.flip(0), base)  # same values, unpaired order: difference of means exactly 0
    assert same.tie and same.difference.estimate == pytest.approx(0.0, abs=1e-12)
    assert noise.tie or abs(noise.difference.estimate) < 1e-3
    with pytest.raises(ValueError, match="same inputs"):
        paired_bootstrap(base, base[:10])


def test_paired_over_seeds_is_scipys_paired_t_test():
    a, b = [0.81, 0.83, 0.80, 0.82, 0.84], [0.80, 0.80, 0.79, 0.80, 0.81]
    result = paired_over_seeds(a, b)
    expected = stats.ttest_rel(a, b)
    assert result.p_value == pytest.approx(expected.pvalue)
    assert result.difference.estimate == pytest.approx(np.mean(np.subtract(a, b)))
    assert result.difference.low > 0 and not result.tie
    one = paired_over_seeds([0.8], [0.7])
    assert np.isnan(one.p_value) and np.isnan(one.difference.low)
    assert "tie" in verdict(one, "A", "B")


def test_seed_interval_is_the_t_interval():
    v = [1.0, 2.0, 3.0]
    ci = seed_interval(v)
    half = stats.t.ppf(0.975, 2) * np.std(v, ddof=1) / np.sqrt(3)
    assert (ci.low, ci.high) == pytest.approx((2.0 - half, 2.0 + half))


def test_vectorised_mean_intervals_equal_the_gathered_bootstrap():
    from laya.analysis.statistics import mean_intervals, paired_mean_differences

    g = torch.Generator().manual_seed(5)
    x = torch.randn(300, 3, generator=g, dtype=torch.float64)
    x[::7, 1] = float("nan")  # undefined on some inputs: left out of that column's means
    intervals = mean_intervals(x, resamples=400, seed=2)
    for k in range(3):
        ci = bootstrap_ci(x[:, k], resamples=400, seed=2)
        assert (intervals[k].estimate, intervals[k].low, intervals[k].high) == pytest.approx(
            (ci.estimate, ci.low, ci.high), abs=1e-12
        )
    [diff] = paired_mean_differences(x, [(0, 2)], resamples=400, seed=2)
    reference = paired_bootstrap(x[:, 0], x[:, 2], resamples=400, seed=2)
    assert diff.difference.low == pytest.approx(reference.difference.low, abs=1e-12)
    assert diff.p_value == pytest.approx(reference.p_value)


def test_robust_intervals_equal_the_resampled_median_and_trimmed_mean():
    from scipy.stats import trim_mean

    from laya.analysis.statistics import bootstrap_cis, median_and_trimmed_mean, resample_counts, robust_intervals

    g = torch.Generator().manual_seed(0)
    values = torch.cat([torch.ones(40), torch.randn(57, generator=g, dtype=torch.float64), torch.tensor([-239.0])])
    values = values.double()
    median, trimmed = robust_intervals(values, 0.05, resample_counts(len(values), 300, seed=7))
    ref_median, ref_trimmed = bootstrap_cis(values, median_and_trimmed_mean(0.05), 300, seed=7)
    assert median.estimate == pytest.approx(float(values.median().item() if len(values) % 2 else np.median(values)))
    assert trimmed.estimate == pytest.approx(trim_mean(values.numpy(), 0.05))
    assert (median.low, median.high) == pytest.approx((ref_median.low, ref_median.high), abs=1e-12)
    assert (trimmed.low, trimmed.high) == pytest.approx((ref_trimmed.low, ref_trimmed.high), abs=1e-12)
    with pytest.raises(ValueError, match="trim"):
        median_and_trimmed_mean(0.5)


def test_paired_verdict_is_a_tie_exactly_when_the_ci_covers_zero():
    from laya.analysis.statistics import paired_verdict

    assert paired_verdict(0.001, 0.02) == "higher" and paired_verdict(-0.02, -0.001) == "lower"
    assert paired_verdict(-0.001, 0.02) == paired_verdict(0.0, 0.02) == paired_verdict(-0.02, 0.0) == "tie"
    assert paired_verdict(float("nan"), 0.02) == "tie"


def test_holm_matches_the_step_down_by_hand():
    from laya.analysis.statistics import holm, holm_verdict

    # sorted 0.01, 0.02, 0.04, 0.5 (m = 4): 4 * 0.01, max(0.04, 3 * 0.02), max(0.06, 2 * 0.04), max(0.08, 0.5)
    adjusted = holm([0.04, 0.01, 0.5, 0.02, float("nan")])
    assert adjusted[:4] == pytest.approx([0.08, 0.04, 0.5, 0.06]) and np.isnan(adjusted[4])
    assert holm([0.6, 0.7]).tolist() == [1.0, 1.0]  # capped at 1
    assert holm_verdict(0.01, 0.03, 0.04) == "higher" and holm_verdict(0.01, 0.03, 0.06) == "tie"
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])


def test_saving_counts_only_beyond_its_noise():
    from laya.analysis.statistics import format_diff, saving_verdict

    assert saving_verdict(0.23, 0.22) == "saves" and saving_verdict(0.21, 0.22) == "within the noise"
    assert saving_verdict(-0.3, 0.22) == "costs" and saving_verdict(0.3, float("nan")) == "within the noise"
    assert format_diff(0.031, -0.0004, 0.038) == "+0.031 [-0.000, +0.038]"
