"""laya.app.depth_views: one input's error and OOD status against a depth report, in words and as a table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from laya.app.depth_views import (
    best_ood_score,
    depth_metric,
    detection_view,
    exit_estimate_caption,
    mahalanobis_warning,
    ood_status,
    shown_ood_scores,
)


DEPTH = {
    "n_train": 30,
    "detection": {
        "flag_rate": 0.05,
        "flag_thresholds": {"msp": -0.62, "energy": -6.4, "mahalanobis": 2.76},
        "table": [
            {"task": "misclassification", "score": "msp", "auroc": 0.9},
            {"task": "OOD: noise", "score": "msp", "auroc": 0.7},
            {"task": "OOD: noise", "score": "mahalanobis", "auroc": 0.99},
            {"task": "OOD: other", "score": "msp", "auroc": 0.8},
            {"task": "OOD: other", "score": "mahalanobis", "auroc": 0.95},
        ],
    },
}


def test_ood_status_in_words() -> None:
    assert best_ood_score(DEPTH) == ("mahalanobis", pytest.approx(0.97), 2)
    singular = {**DEPTH, "n_train": 240}  # an older (ridge) fit on fewer inputs than features: never the default
    assert best_ood_score(singular, [1280])[0] != "mahalanobis"
    assert best_ood_score({**singular, "covariance": "ledoit-wolf"}, [1280])[0] == "mahalanobis"
    lines = ood_status({"msp": -0.79, "mahalanobis": 3.1}, DEPTH)
    assert lines[0] == "Max softmax **0.790** (flagged below 0.620): not flagged."  # the probability, not −0.79
    assert "multi-layer Mahalanobis (mean AUROC 0.970 over 2 OOD sets): **3.1**, flagged above 2.76" in lines[1]
    assert "**flagged as out of distribution**" in lines[1]
    assert "flags 5 % of in-distribution test inputs by design" in lines[2]
    table = detection_view({"msp": -0.79, "mahalanobis": 1.0}, DEPTH)
    assert table.to_dict("records")[0] == {"score": "max softmax (baseline)", "value": "0.790", "rule": "flagged below",
                                           "threshold": "0.620", "flagged": "no"}  # fmt: skip
    assert table["flagged"].tolist() == ["no", "no"]
    assert mahalanobis_warning(1.2e8, 30, [64, 32]).startswith("Mahalanobis = 1.2e+08 comes from a covariance")
    assert mahalanobis_warning(2.0, 30, [64]) is not None  # fewer inputs than features: singular
    assert mahalanobis_warning(2.0, 3000, [64]) is None
    assert mahalanobis_warning(1.2e8, 30, [64], covariance="ledoit-wolf") is None  # never singular


def test_inspect_asks_only_for_the_ood_scores_its_status_shows() -> None:
    depth = json.loads((Path(__file__).resolve().parents[2] / "models" / "cifar10-vit" / "laya" / "depth.json").read_text())
    best = best_ood_score(depth)
    assert shown_ood_scores(depth) == ("msp", best[0]) and best[0] != "msp"
    assert shown_ood_scores({}) == ("msp",)  # no detection table: max softmax alone


def test_a_prediction_depth_is_named_for_its_readout() -> None:
    assert depth_metric(8, 9, "tuned lens") == ("Prediction depth (tuned lens)", "8 of 9")
    assert depth_metric(10, 9, "tuned lens") == ("Prediction depth (tuned lens)", "never (even the last disagrees)")
    assert depth_metric(4, 6, "probes") == ("Prediction depth (probes)", "4 of 6")
    assert depth_metric(None, 0, "tuned lens") == ("Prediction depth (tuned lens)", "–")  # no lens beside the head


def test_the_lens_leaves_out_a_row_fixed_by_construction() -> None:
    """An attached network's readouts end at its own classifier: that row is the final distribution itself."""
    import pandas as pd

    from laya.app.depth_views import lens_rows

    table = pd.DataFrame({"layer": ["stage 1", "pre-logits"], "kl": [0.4, 0.0]})
    assert lens_rows(table, "linear probes, network classifier", "pre-logits")["layer"].tolist() == ["stage 1"]
    assert lens_rows(table, "linear probes", "pre-logits")["layer"].tolist() == ["stage 1", "pre-logits"]


def test_the_exit_estimate_caption_says_when_no_threshold_stays_within_a_point() -> None:
    """``depth.json`` records a null threshold where none is within 1 point of the full accuracy (its NaN); the
    Depth page formatted it with ``:g`` and raised a TypeError."""
    assert exit_estimate_caption({"saved": 0.25, "threshold": 0.9}).startswith(
        "Estimated compute saved at ≤ 1 point accuracy loss: 25.0% (t = 0.9): per-input arithmetic")
    assert exit_estimate_caption({"saved": 0.0, "threshold": None}).startswith(
        "No confidence threshold keeps the accuracy within 1 point of the full model's: per-input arithmetic")
