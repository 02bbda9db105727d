"""Error and out-of-distribution detection from depth signals, and the metrics that judge them.

Scores (higher = more likely an error / out of distribution), per input:

* ``msp``: ``-max_c p(c | x)`` (the baseline; Hendrycks & Gimpel 2017)
* ``energy``: ``-logsumexp_c f_c(x)`` (Liu et al. 2020)
* ``alpha_divergence``: ``|| alpha(x) - mean alpha of the predicted class ||_1`` (heads with per-input
  layer weights: LAYA; class profiles from the training split)
* ``readout_disagreement``: share of layers whose readout differs from the final prediction
* ``prediction_depth``: :func:`laya.analysis.depth.readouts.prediction_depth`
* ``mahalanobis``: per layer, ``min_c (h - mu_c)^T Sigma^-1 (h - mu_c)`` with class means and one shared
  covariance from the training split (Lee et al. 2018), standardised by its training mean and std and
  averaged over layers. ``Sigma`` is the Ledoit–Wolf shrinkage of the pooled within-class covariance
  (:func:`ledoit_wolf`): positive definite for any number of training inputs, however wide the layer.

Metrics (no sklearn): :func:`auroc` (Mann-Whitney, ties count 1/2; batched for the bootstrap),
:func:`aupr` (average precision, sklearn's step rule) and :func:`fpr_at_tpr` (FPR at 95 % TPR).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from laya.analysis.depth.readouts import Readouts
from laya.analysis.statistics import bootstrap_ci, paired_bootstrap, verdict
from laya.codec import decode, encode, stored

SCORE_LABELS = {
    "msp": "max softmax (baseline)",
    "energy": "energy",
    "alpha_divergence": "α divergence",
    "readout_disagreement": "readout disagreement",
    "prediction_depth": "prediction depth",
    "mahalanobis": "multi-layer Mahalanobis",
}
COVARIANCE = "ledoit-wolf"  # how Mahalanobis.fit estimates Sigma; fits and reports record it (older ones: a 1e-6 ridge)


def ledoit_wolf(centred: Tensor) -> tuple[Tensor, float]:
    """Ledoit–Wolf (2004) shrinkage of the covariance of ``centred (n, d)`` rows (already mean-free):
    ``Sigma = (1 - s) S + s mu I`` with ``S = X^T X / n``, ``mu = tr(S) / d``, and ``s = min(b^2, d^2) / d^2``,
    ``d^2 = ||S - mu I||_F^2 / d``, ``b^2 = (sum_k ||x_k||^4 / n - ||S||_F^2) / (n d)`` (sklearn's
    ``ledoit_wolf(assume_centered=True)``). Returns ``(Sigma (d, d), s)``; ``Sigma`` is positive definite
    whenever ``s > 0`` and the data are not all zero."""
    n, d = centred.shape
    S = centred.T @ centred / n
    mu = S.diagonal().mean()
    delta = ((S - mu * torch.eye(d, dtype=S.dtype, device=S.device)) ** 2).sum() / d
    beta = ((centred**2).sum(1).pow(2).sum() / n - (S**2).sum()) / (n * d)
    s = 0.0 if float(delta) <= 0 else float(torch.clamp(beta, max=delta) / delta)
    sigma = (1 - s) * S
    sigma.diagonal().add_(s * mu)
    return sigma, s


def mahalanobis_trusted(covariance: str | None, n_train: int, widths: Sequence[int]) -> bool:
    """Whether a Mahalanobis fit gives meaningful distances: a Ledoit–Wolf one always; an older fit
    (``covariance`` None, a near-zero ridge) only on at least as many training inputs as its widest layer has
    features (else its covariance is singular)."""
    return covariance == COVARIANCE or n_train >= max(widths, default=0)


def auroc(scores: Tensor, positive: Tensor) -> Tensor:
    """Area under the ROC curve of ``scores (..., n)`` for ``positive (..., n)`` (bool); NaN without both classes.

    ``P(s_pos > s_neg) + P(s_pos = s_neg) / 2`` from mid-ranks: batched over leading dims.
    """
    s = scores.double().contiguous()
    pos = positive.bool()
    ordered = s.sort(dim=-1).values
    below = torch.searchsorted(ordered, s, side="left").double()
    upto = torch.searchsorted(ordered, s, side="right").double()
    ranks = (below + upto + 1) / 2  # mid-ranks, 1-based
    n_pos = pos.sum(-1).double()
    n_neg = pos.shape[-1] - n_pos
    u = (ranks * pos).sum(-1) - n_pos * (n_pos + 1) / 2
    return u / (n_pos * n_neg)  # 0/0 -> NaN when one class is missing


def _roc_steps(scores: np.ndarray, positive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative true and false positives at each distinct threshold, highest first."""
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], positive[order].astype(float)
    last = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]  # the last index of each tie group
    tp = np.cumsum(y)[last]
    return tp, (last + 1) - tp


def aupr(scores: Tensor | np.ndarray, positive: Tensor | np.ndarray) -> float:
    """Average precision ``sum_k (R_k - R_{k-1}) P_k`` over distinct thresholds (positives = errors/OOD)."""
    s, y = np.asarray(torch.as_tensor(scores).double().cpu()), np.asarray(torch.as_tensor(positive).cpu()).astype(bool)
    if y.sum() == 0:
        return float("nan")
    tp, fp = _roc_steps(s, y)
    recall, precision = tp / y.sum(), tp / (tp + fp)
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def fpr_at_tpr(scores: Tensor | np.ndarray, positive: Tensor | np.ndarray, tpr: float = 0.95) -> float:
    """False-positive rate at the highest threshold whose true-positive rate reaches ``tpr``."""
    s, y = np.asarray(torch.as_tensor(scores).double().cpu()), np.asarray(torch.as_tensor(positive).cpu()).astype(bool)
    if y.sum() == 0 or (~y).sum() == 0:
        return float("nan")
    tp, fp = _roc_steps(s, y)
    k = int(np.argmax(tp / y.sum() >= tpr - 1e-12))
    return float(fp[k] / (~y).sum())


def roc_curve(scores: Tensor | np.ndarray, positive: Tensor | np.ndarray) -> pd.DataFrame:
    """``fpr, tpr`` at every distinct threshold (from (0, 0)), for plotting."""
    s, y = np.asarray(torch.as_tensor(scores).double().cpu()), np.asarray(torch.as_tensor(positive).cpu()).astype(bool)
    tp, fp = _roc_steps(s, y)
    return pd.DataFrame({"fpr": np.r_[0.0, fp / max((~y).sum(), 1)], "tpr": np.r_[0.0, tp / max(y.sum(), 1)]})


class _ResampledAUROC:
    """Bootstrap statistic on resampled *row indices* ``(R, n)``: each resample's AUROC from the multiplicity
    of every input, ``O(R n)`` after one sort per score (instead of a sort per resample). Index ``k n + i``
    means input ``i`` of score set ``k``, so :func:`paired_bootstrap` can resample two scores together."""

    def __init__(self, scores: Sequence[Tensor], positive: Tensor) -> None:
        self.n, self.positive = len(positive), positive.bool().cpu()
        self.groups = [torch.unique(s.double().cpu(), return_inverse=True)[1] for s in scores]  # tie group, ascending

    def __call__(self, rows: Tensor) -> Tensor:
        rows = rows.long()
        group = self.groups[int(rows[0, 0]) // self.n]
        rows = rows % self.n
        g, pos = group[rows], self.positive[rows].float()  # (R, n)
        G = int(group.max()) + 1
        pos_count = torch.zeros(rows.shape[0], G).scatter_add_(1, g, pos)  # (R, G) resampled positives per group
        neg_count = torch.zeros(rows.shape[0], G).scatter_add_(1, g, 1 - pos)
        below = (neg_count.cumsum(1) - neg_count).double()  # negatives strictly below each group
        u = (pos_count.double() * (below + neg_count.double() / 2)).sum(1)
        n_pos = pos.sum(1).double()
        return u / (n_pos * (self.n - n_pos))


@dataclass
class Mahalanobis:
    """Per layer: class means ``means[i]`` ``(C, d_i)``, shared precision ``precisions[i]`` ``(d_i, d_i)``,
    and the training mean/std of the min-distance (``scale`` ``(L, 2)``), float64."""

    means: list[Tensor] = field(metadata=stored("maha_mean_{}", rows_of="scale"))
    precisions: list[Tensor] = field(metadata=stored("maha_precision_{}", rows_of="scale"))
    scale: Tensor = field(metadata=stored("maha_scale"))
    _terms: dict[torch.device, tuple[list[tuple[Tensor, Tensor, Tensor]], Tensor, Tensor]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.means:  # the input-free terms come with the fit (or its loading), on the fit's device
            self._layer_terms(self.means[0].device)

    @classmethod
    def fit(cls, hidden: Sequence[Tensor], labels: Tensor, num_classes: int) -> Mahalanobis:
        """Class means and the shared (pooled, Ledoit–Wolf shrunk) covariance of each layer, from training
        hidden states ``(N, d_i)``."""
        means, precisions = [], []
        for h in hidden:
            h = h.double()
            y = labels.to(h.device)
            sums = torch.zeros(num_classes, h.shape[1], dtype=h.dtype, device=h.device).index_add_(0, y, h)
            mu = sums / torch.bincount(y, minlength=num_classes).clamp(min=1).unsqueeze(1).to(h)
            cov, _ = ledoit_wolf(h - mu[y])
            means.append(mu)
            chol, info = torch.linalg.cholesky_ex(cov)  # positive definite unless the layer is constant
            inverse = torch.cholesky_inverse(chol) if int(info) == 0 else torch.linalg.pinv(cov, hermitian=True)
            precisions.append(inverse)
        raw = cls(means, precisions, torch.tensor([[0.0, 1.0]] * len(hidden), dtype=torch.float64)).layer_distances(
            hidden
        )
        return cls(means, precisions, torch.stack([raw.mean(0), raw.std(0).clamp(min=1e-12)], dim=1).cpu())

    def layer_distances(self, hidden: Sequence[Tensor]) -> Tensor:
        """``(B, L)`` min over classes of the squared Mahalanobis distance, standardised per layer:
        ``d_c = h P h^T - 2 h (P mu_c^T) + mu_c P mu_c^T``, the input-free ``P mu^T`` ``(d_i, C)`` and
        ``mu P mu^T`` ``(C,)`` computed once per device (:meth:`_layer_terms`)."""
        terms, mean, std = self._layer_terms(hidden[0].device)
        mins = []
        for h, (p, p_mu, offset) in zip(hidden, terms):
            h = h.double()
            d = torch.addmm(offset, h, p_mu, alpha=-2.0)  # mu P mu^T - 2 h P mu^T, (B, C)
            mins.append((d + torch.linalg.vecdot(h @ p, h).unsqueeze(1)).amin(1))
        return (torch.stack(mins, dim=1) - mean) / std

    def _layer_terms(self, device: torch.device) -> tuple[list[tuple[Tensor, Tensor, Tensor]], Tensor, Tensor]:
        """On ``device``, float64: per layer ``P``, ``P mu^T`` and ``mu P mu^T``; the training mean and std of each
        layer's min-distance ``(L,)`` each (cached: the fit never changes)."""
        cached = self._terms.get(device)
        if cached is None:
            terms = []
            for mu, p in zip(self.means, self.precisions):
                mu, p = mu.to(device, torch.float64), p.to(device, torch.float64)
                terms.append((p, p @ mu.T, ((mu @ p) * mu).sum(1)))
            scale = self.scale.to(device, torch.float64)
            cached = self._terms[device] = (terms, scale[:, 0], scale[:, 1])
        return cached

    def score(self, hidden: Sequence[Tensor]) -> Tensor:
        return self.layer_distances(hidden).mean(1)

    def to_tensors(self) -> dict[str, Tensor]:
        """``maha_mean_<i>``, ``maha_precision_<i>`` and ``maha_scale`` (as the depth fit stores them)."""
        return encode(self)[0]

    @classmethod
    def from_tensors(cls, tensors: dict[str, Tensor]) -> Mahalanobis:
        """Inverse of :meth:`to_tensors`. Raises ``ValueError`` naming a missing tensor."""
        return decode(cls, tensors, {})


def class_alpha_profile(layer_scores: Tensor, predictions: Tensor, num_classes: int) -> Tensor:
    """``(C, L)`` mean layer weights of the inputs predicted as each class (uniform where none)."""
    L = layer_scores.shape[1]
    sums = torch.zeros(num_classes, L, dtype=torch.float64, device=layer_scores.device)
    sums.index_add_(0, predictions, layer_scores.double())
    counts = torch.bincount(predictions, minlength=num_classes).unsqueeze(1).to(sums)
    return torch.where(counts > 0, sums / counts.clamp(min=1), torch.full_like(sums, 1.0 / L))


def alpha_divergence(layer_scores: Tensor, predictions: Tensor, profile: Tensor) -> Tensor:
    """``(B,)`` L1 distance between each input's layer weights and its predicted class's mean profile."""
    return (layer_scores.double() - profile.to(layer_scores.device)[predictions]).abs().sum(1)


def detection_scores(
    logits: Tensor,
    readout_probs: Tensor | None = None,
    hidden: Sequence[Tensor] | None = None,
    mahalanobis: Mahalanobis | None = None,
    layer_scores: Tensor | None = None,
    alpha_profile: Tensor | None = None,
) -> dict[str, Tensor]:
    """The scores of the module docstring that the given inputs allow, ``name -> (B,)`` float64
    (higher = more suspicious): readout scores need ``readout_probs``, Mahalanobis ``hidden`` and a fit,
    ``alpha_divergence`` per-input ``layer_scores`` and a class profile."""
    logits = logits.double()
    final = logits.argmax(-1)
    scores = {"msp": -torch.softmax(logits, -1).amax(-1), "energy": -torch.logsumexp(logits, -1)}
    if readout_probs is not None:
        readouts = Readouts(readout_probs, final)
        scores |= {"readout_disagreement": readouts.disagreement, "prediction_depth": readouts.depth.double()}
    if hidden is not None and mahalanobis is not None:
        scores["mahalanobis"] = mahalanobis.score(hidden).to(logits.device)
    if layer_scores is not None and alpha_profile is not None:
        scores["alpha_divergence"] = alpha_divergence(layer_scores, final, alpha_profile)
    return {k: scores[k] for k in SCORE_LABELS if k in scores}


def detection_table(
    scores: dict[str, Tensor], positive: Tensor, task: str, resamples: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Per score: AUROC (95 % bootstrap CI), AUPR, FPR@95 %TPR and the paired bootstrap of its AUROC
    against max softmax (``vs_msp``: ``difference``, ``p``, ``verdict``), for one ``task``."""
    positive = positive.bool().cpu()
    names = list(scores)
    statistic = _ResampledAUROC([scores[k] for k in names], positive)
    n = len(positive)
    table = []
    for k, name in enumerate(names):
        values = scores[name].double().cpu()
        ci = bootstrap_ci(torch.arange(n) + k * n, statistic, resamples, seed)
        row = {
            "task": task, "score": name, "label": SCORE_LABELS[name], "n": n, "positives": int(positive.sum()),
            "auroc": ci.estimate, "auroc_low": ci.low, "auroc_high": ci.high,
            "aupr": aupr(values, positive), "fpr95": fpr_at_tpr(values, positive),
        }  # fmt: skip
        if name != "msp" and "msp" in names:
            msp = torch.arange(n) + names.index("msp") * n
            paired = paired_bootstrap(torch.arange(n) + k * n, msp, statistic, resamples, seed)
            row |= {"vs_msp": paired.difference.estimate, "vs_msp_low": paired.difference.low,
                    "vs_msp_high": paired.difference.high, "vs_msp_p": paired.p_value,
                    "verdict": verdict(paired, SCORE_LABELS[name], SCORE_LABELS["msp"])}  # fmt: skip
        table.append(row)
    return pd.DataFrame(table)


def flag_threshold(in_distribution: Tensor, rate: float = 0.05) -> float:
    """The score above which only ``rate`` of in-distribution test inputs lie (the dashboard's flag)."""
    return float(torch.quantile(in_distribution.double().cpu(), 1 - rate)) if len(in_distribution) else float("nan")


__all__ = [
    "COVARIANCE",
    "SCORE_LABELS",
    "Mahalanobis",
    "alpha_divergence",
    "aupr",
    "auroc",
    "class_alpha_profile",
    "detection_scores",
    "detection_table",
    "flag_threshold",
    "fpr_at_tpr",
    "ledoit_wolf",
    "mahalanobis_trusted",
    "roc_curve",
]
