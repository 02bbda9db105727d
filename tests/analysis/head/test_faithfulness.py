import math

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from laya.analysis.head.faithfulness import deletion_at_1, input_metrics, per_input_metrics, spearman_rows, top_ranked


def test_hand_computed_rank_correlations():
    scores = torch.tensor([[0.1, 0.2, 0.7], [0.1, 0.2, 0.7], [0.5, 0.3, 0.2], [0.3, 0.3, 0.4]])
    drops = torch.tensor([[0.0, 0.1, 0.5], [0.5, 0.1, 0.0], [0.1, 0.2, 0.3], [0.1, 0.2, 0.3]])
    rho = spearman_rows(scores, drops)
    assert rho[0] == pytest.approx(1.0)  # same order
    assert rho[1] == pytest.approx(-1.0)  # reversed
    assert rho[2] == pytest.approx(-1.0)
    # ties: score ranks (1.5, 1.5, 3) vs (1, 2, 3): r = 1.5 / sqrt(1.5 * 2)
    assert rho[3] == pytest.approx(1.5 / math.sqrt(3.0))


def test_matches_scipy_spearmanr_row_by_row_including_ties():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(300, 5)).astype(float)  # many ties
    drops = rng.normal(size=(300, 5)).round(1)
    rho = spearman_rows(scores, drops)
    for i in range(300):
        expected = spearmanr(scores[i], drops[i]).statistic
        if np.isnan(expected):
            assert np.isnan(rho[i])
        else:
            assert rho[i] == pytest.approx(expected, abs=1e-12)


def test_constant_rows_are_excluded_and_counted():
    scores = torch.tensor([[0.2, 0.2, 0.2], [0.1, 0.5, 0.9], [0.1, 0.5, 0.9]])
    drops = torch.tensor([[0.1, 0.2, 0.3], [0.0, 0.0, 0.0], [0.0, 0.1, 0.2]])
    rho = spearman_rows(scores, drops)
    assert np.isnan(rho[0]) and np.isnan(rho[1]) and rho[2] == pytest.approx(1.0)
    metrics = per_input_metrics(scores, drops)
    assert int(torch.isnan(metrics["spearman"]).sum()) == 2


def test_deletion_at_1_takes_the_top_ranked_layer_first_on_ties():
    scores = torch.tensor([[0.1, 0.8, 0.1], [0.4, 0.4, 0.2]])
    drops = torch.tensor([[0.05, 0.6, 0.0], [0.3, 0.9, 0.1]], dtype=torch.float64)
    assert top_ranked(scores).tolist() == [1, 0]
    assert deletion_at_1(scores, drops).tolist() == [0.6, 0.3]
    metrics = per_input_metrics(scores, drops)
    assert metrics["deletion_at_1_norm"].tolist() == pytest.approx([1.0, 0.3 / 0.9])
    assert metrics["top1"].tolist() == [1.0, 0.0]


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="must both be"):
        spearman_rows(torch.zeros(2, 3), torch.zeros(2, 4))


def test_average_ranks_match_scipy_rankdata():
    from scipy.stats import rankdata

    from laya.analysis.head.faithfulness import average_ranks

    values = np.random.default_rng(1).integers(0, 3, size=(50, 6)).astype(float)
    assert np.array_equal(average_ranks(values), rankdata(values, axis=1))


def test_masked_spearman_matches_scipy_on_the_masked_layers():
    rng = np.random.default_rng(2)
    scores, drops = rng.normal(size=(200, 6)), rng.normal(size=(200, 6))
    mask = rng.random((200, 6)) > 0.4
    rho = spearman_rows(scores, drops, mask)
    for i in range(200):
        if mask[i].sum() < 2:
            assert np.isnan(rho[i])
            continue
        expected = spearmanr(scores[i][mask[i]], drops[i][mask[i]]).statistic
        assert (np.isnan(rho[i]) and np.isnan(expected)) or rho[i] == pytest.approx(expected, abs=1e-12)


def test_negligible_drops_do_not_decide_the_restricted_spearman():
    # layers 0-1: drops ~1e-9 whose order is noise; layers 2-3 carry the effect and agree with the scores
    drops = torch.tensor([[2e-9, 1e-9, 0.2, 0.5], [1e-9, 2e-9, 0.2, 0.5]], dtype=torch.float64)
    scores = torch.tensor([[0.0, 0.1, 0.3, 0.6], [0.0, 0.1, 0.3, 0.6]], dtype=torch.float64)
    metrics = per_input_metrics(scores, drops)
    assert metrics["spearman"][0] != metrics["spearman"][1]  # the all-layer Spearman moves with the noise
    assert metrics["spearman_eps"].tolist() == [1.0, 1.0]


def test_one_inputs_metrics_in_plain_python_equal_the_batched_ones():
    """``input_metrics`` (Inspect's one input) against ``per_input_metrics`` row by row: ties, constant rows,
    drops around epsilon, one informative layer, non-finite values; equal within 1e-12, NaN in the same places."""
    rng = np.random.default_rng(7)
    rows = [([0.2, 0.2, 0.6], [0.0, 0.0, 0.5]), ([1.0, 1.0], [0.3, 0.1]), ([0.1, 0.5, 0.4], [2e-3, 5e-4, -2e-3]),
            ([0.3, np.nan, 0.2], [0.1, 0.2, 0.3]), ([0.5], [0.2])]  # fmt: skip
    for _ in range(300):
        L = int(rng.integers(2, 13))
        a = rng.normal(size=L).round(int(rng.integers(0, 3)))  # rounding makes ties
        b = rng.normal(size=L) * 10 ** rng.uniform(-4, 0)
        b[rng.random(L) < 0.3] = 0.0
        rows.append((a.tolist(), b.tolist()))
    for a, b in rows:
        batched = per_input_metrics(torch.tensor([a], dtype=torch.float64), torch.tensor([b], dtype=torch.float64))
        one = input_metrics(a, b)
        for metric, values in batched.items():
            expected = float(values[0])
            assert (math.isnan(one[metric]) and math.isnan(expected)) or abs(one[metric] - expected) <= 1e-12, (
                metric, a, b,
            )  # fmt: skip
    with pytest.raises(ValueError, match="both be"):
        input_metrics([0.1, 0.2], [0.1])
