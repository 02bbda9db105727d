import pytest
import torch

from laya.analysis.depth.detection import (
    COVARIANCE,
    Mahalanobis,
    _ResampledAUROC,
    alpha_divergence,
    aupr,
    auroc,
    class_alpha_profile,
    detection_scores,
    detection_table,
    flag_threshold,
    fpr_at_tpr,
    ledoit_wolf,
    mahalanobis_trusted,
    roc_curve,
)
from laya.analysis.statistics import bootstrap_distribution

SCORES = torch.tensor([0.1, 0.4, 0.35, 0.8])
POSITIVE = torch.tensor([False, False, True, True])


def test_metrics_on_a_hand_computed_example():
    # pairs (pos, neg): (0.35 > 0.1), (0.35 < 0.4), (0.8 > 0.1), (0.8 > 0.4): 3 of 4
    assert float(auroc(SCORES, POSITIVE)) == 0.75
    # thresholds 0.8: P=1, R=.5; 0.4: P=.5, R=.5; 0.35: P=2/3, R=1 -> AP = .5*1 + .5*2/3
    assert aupr(SCORES, POSITIVE) == pytest.approx(0.5 + 1 / 3)
    # TPR reaches 95 % only at threshold 0.35, where one of two negatives (0.4) is above it
    assert fpr_at_tpr(SCORES, POSITIVE) == 0.5
    curve = roc_curve(SCORES, POSITIVE)
    assert curve["fpr"].tolist() == [0, 0, 0.5, 0.5, 1] and curve["tpr"].tolist() == [0, 0.5, 0.5, 1, 1]


def test_ties_count_half_and_auroc_is_batched():
    tied = torch.tensor([1.0, 1.0, 0.0, 2.0])
    positive = torch.tensor([True, False, False, True])
    assert float(auroc(tied, positive)) == pytest.approx((1 + 0.5 + 1 + 1) / 4)
    batch = auroc(torch.stack([SCORES, -SCORES]), torch.stack([POSITIVE, POSITIVE]))
    assert batch.tolist() == [0.75, 0.25]
    assert torch.isnan(auroc(SCORES, torch.zeros(4, dtype=torch.bool)))


def test_mahalanobis_recovers_the_nearest_class_and_standardises():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(2).repeat(200)
    h = torch.randn(400, 3, generator=g, dtype=torch.float64) + 5 * labels.unsqueeze(1)
    m = Mahalanobis.fit([h, h[:, :2]], labels, 2)
    assert torch.allclose(m.means[0][1], h[labels == 1].mean(0))
    train = m.layer_distances([h, h[:, :2]])
    assert torch.allclose(train.mean(0), torch.zeros(2, dtype=torch.float64), atol=1e-9)
    far = torch.full((1, 3), 40.0, dtype=torch.float64)
    assert float(m.score([far, far[:, :2]])) > float(train.mean(1).max())
    again = Mahalanobis.from_tensors(m.to_tensors())
    assert torch.equal(again.score([h, h[:, :2]]), m.score([h, h[:, :2]]))
    for i, x in enumerate([h[:7], h[:7, :2]]):  # the kept input-free terms give the distance's own formula
        diff = x.unsqueeze(1) - m.means[i].unsqueeze(0)  # (B, C, d)
        direct = torch.einsum("bcd,de,bce->bc", diff, m.precisions[i], diff).amin(1)
        mean, std = m.scale[i].tolist()
        assert torch.allclose(m.layer_distances([h[:7], h[:7, :2]])[:, i], (direct - mean) / std, rtol=1e-10)


def test_ledoit_wolf_matches_its_closed_form_and_is_positive_definite():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(30, 64, generator=g, dtype=torch.float64) @ torch.randn(64, 64, generator=g, dtype=torch.float64)
    x = x - x.mean(0)
    sigma, s = ledoit_wolf(x)
    S, d, n = x.T @ x / 30, 64, 30
    mu = S.trace() / d
    delta = ((S - mu * torch.eye(d, dtype=S.dtype)) ** 2).sum() / d
    beta = min(float(sum(float(r @ r) ** 2 for r in x) / n - (S**2).sum()) / (n * d), float(delta))
    assert s == pytest.approx(beta / float(delta)) and 0 < s < 1
    assert torch.allclose(sigma, (1 - s) * S + s * mu * torch.eye(d, dtype=S.dtype))
    assert float(torch.linalg.eigvalsh(sigma).min()) > 0  # 30 inputs, 64 features: S itself is singular
    sklearn = pytest.importorskip("sklearn.covariance")
    expected, shrinkage = sklearn.ledoit_wolf(x.numpy(), assume_centered=True)
    assert s == pytest.approx(shrinkage) and torch.allclose(sigma, torch.from_numpy(expected))


def test_mahalanobis_stays_meaningful_with_fewer_inputs_than_features():
    """40 training inputs of 200 features (the tutorial's case, 240 inputs of layers up to 1280 wide): held-out
    in-distribution inputs stay near the training scale and far inputs stand out (a 1e-6 ridge gave ~1e14)."""
    g = torch.Generator().manual_seed(0)
    mix = torch.randn(200, 200, generator=g, dtype=torch.float64) / 200**0.5

    def draw(y: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        noise = torch.randn(len(y), 200, generator=g, dtype=torch.float64) @ mix
        return scale * noise + 3 * torch.nn.functional.one_hot(y, 200).double()

    labels = torch.arange(4).repeat(10)
    m = Mahalanobis.fit([draw(labels)], labels, 4)
    held_out = m.score([draw(torch.arange(4).repeat(25))])
    far = m.score([draw(torch.zeros(5, dtype=torch.long), scale=10.0)])
    assert float(held_out.abs().max()) < 100 and float(far.min()) > 10 * float(held_out.max())
    assert mahalanobis_trusted(COVARIANCE, 40, [200]) and not mahalanobis_trusted(None, 40, [200])
    assert mahalanobis_trusted(None, 3000, [200, 64])


def test_alpha_profiles_and_divergence():
    alpha = torch.tensor([[0.5, 0.5], [0.7, 0.3], [0.2, 0.8]])
    pred = torch.tensor([0, 0, 1])
    profile = class_alpha_profile(alpha, pred, 3)
    assert torch.allclose(profile, torch.tensor([[0.6, 0.4], [0.2, 0.8], [0.5, 0.5]], dtype=torch.float64))
    assert alpha_divergence(alpha, pred, profile).tolist() == pytest.approx([0.2, 0.2, 0.0])


def test_scores_and_table():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(60, 3, generator=g)
    readout = torch.softmax(torch.randn(60, 2, 3, generator=g), -1).double()
    h = [torch.randn(60, 4, generator=g)]
    m = Mahalanobis.fit(h, torch.arange(3).repeat(20), 3)
    scores = detection_scores(logits, readout, h, m, torch.softmax(torch.randn(60, 2, generator=g), -1),
                              torch.full((3, 2), 0.5))  # fmt: skip
    assert list(scores) == [
        "msp",
        "energy",
        "alpha_divergence",
        "readout_disagreement",
        "prediction_depth",
        "mahalanobis",
    ]
    assert torch.allclose(scores["msp"], -torch.softmax(logits.double(), -1).amax(-1))
    positive = scores["msp"] > scores["msp"].median()  # msp separates these perfectly
    table = detection_table(scores, positive, "test", resamples=100).set_index("score")
    assert table.loc["msp", "auroc"] == 1.0 and table.loc["msp", "fpr95"] == 0.0
    assert table.loc["energy", "auroc_low"] <= table.loc["energy", "auroc"] <= table.loc["energy", "auroc_high"]
    assert table.loc["mahalanobis", "vs_msp"] < 0 and "<" in table.loc["mahalanobis", "verdict"]
    assert flag_threshold(torch.arange(11.0), 0.1) == pytest.approx(9.0)
    assert list(detection_scores(logits)) == ["msp", "energy"]


def test_resampled_auroc_equals_sorting_each_resample():
    g = torch.Generator().manual_seed(3)
    scores = torch.randint(0, 6, (50,), generator=g).double()  # many ties
    positive = torch.rand(50, generator=g) > 0.6
    fast = bootstrap_distribution(torch.arange(50), _ResampledAUROC([scores], positive), resamples=64, seed=5)
    rows = torch.stack([scores, positive.double()], 1)
    slow = bootstrap_distribution(rows, lambda r: auroc(r[..., 0], r[..., 1] > 0.5), resamples=64, seed=5)
    assert torch.allclose(fast, slow, atol=1e-12)
