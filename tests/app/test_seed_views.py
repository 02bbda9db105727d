"""laya.app.seed_views: per-seed class profiles and their stability across seeds, on a table worked by hand."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from laya.app.seed_views import ALL_CLASSES, seed_global_profile, seed_profiles, seed_stability, seed_summary


def _two_seeds() -> pd.DataFrame:
    """A ``class_profiles.csv`` of one head: two classes (counts 1 and 3), two layers, two seeds."""
    counts = {"a": 1, "b": 3}
    rows = [{"head": "laya", "values": "scores", "seed": s, "class": c, "class_index": ci, "layer": f"b{i}",
             "layer_index": i, "mean": m, "count": counts[c]}
            for s, table in ((0, [[0.7, 0.3], [0.2, 0.8]]), (1, [[0.6, 0.4], [0.6, 0.4]]))
            for ci, (c, values) in enumerate(zip(("a", "b"), table)) for i, m in enumerate(values)]  # fmt: skip
    return pd.DataFrame(rows)


def test_seed_profiles_and_stability() -> None:
    profiles = seed_profiles(_two_seeds(), "laya")
    stability = seed_stability(profiles)
    assert stability["top layer per seed"].tolist() == ["b0, b0", "b1, b0"]
    assert stability["seeds agreeing on the top layer"].tolist() == ["2 of 2", "1 of 2"]
    assert float(stability["max across-seed std"][1]) == pytest.approx(np.std([0.2, 0.6], ddof=1), abs=1e-3)  # number_text: 3 decimals
    whole = seed_global_profile(profiles)  # class means weighted by their counts (1 and 3)
    assert whole.set_index(["seed", "layer_index"])["mean"].to_dict() == pytest.approx(
        {(0, 0): (0.7 + 3 * 0.2) / 4, (0, 1): (0.3 + 3 * 0.8) / 4, (1, 0): 0.6, (1, 1): 0.4}
    )
    assert set(whole["class"]) == {ALL_CLASSES} and whole["count"].tolist() == [4, 4, 4, 4]
    assert seed_stability(whole)["top layer per seed"].tolist() == ["b1, b0"]


def test_the_seed_summary_is_what_the_page_showed_and_is_kept_per_file_version(tmp_path) -> None:
    """The Class-wise page's tables over seeds come from one summary per head, kind and file version."""
    from pages.common import loading

    table = _two_seeds()
    summary = seed_summary(table, "laya")
    profiles = seed_profiles(table, "laya")
    pd.testing.assert_frame_equal(summary.per_seed, profiles)
    pd.testing.assert_frame_equal(summary.stability, seed_stability(profiles))
    pd.testing.assert_frame_equal(summary.whole, seed_global_profile(profiles))
    pd.testing.assert_frame_equal(summary.whole_stability, seed_stability(seed_global_profile(profiles)))
    assert seed_summary(table, "concat").per_seed.empty and seed_summary(table, "concat").stability is None
    assert loading.seed_summary_of(tmp_path, "laya", "scores") is None  # no class_profiles.csv
    table.to_csv(tmp_path / "class_profiles.csv", index=False)
    kept = loading.seed_summary_of(tmp_path, "laya", "scores")
    pd.testing.assert_frame_equal(kept.stability, summary.stability)
    table.assign(mean=1 - table["mean"]).to_csv(tmp_path / "class_profiles.csv", index=False)
    os.utime(tmp_path / "class_profiles.csv", ns=(1, 10**18))  # a new version of the file: read again
    assert loading.seed_summary_of(tmp_path, "laya", "scores").stability["top layer per seed"].tolist() == [
        "b1, b1", "b0, b1"]
