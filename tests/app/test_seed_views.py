"""laya.app.seed_views: per-seed class profiles and their stability across seeds, on a table worked by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from laya.app.seed_views import ALL_CLASSES, seed_global_profile, seed_profiles, seed_stability


def test_seed_profiles_and_stability() -> None:
    counts = {"a": 1, "b": 3}
    rows = [{"head": "laya", "values": "scores", "seed": s, "class": c, "class_index": ci, "layer": f"b{i}",
             "layer_index": i, "mean": m, "count": counts[c]}
            for s, table in ((0, [[0.7, 0.3], [0.2, 0.8]]), (1, [[0.6, 0.4], [0.6, 0.4]]))
            for ci, (c, values) in enumerate(zip(("a", "b"), table)) for i, m in enumerate(values)]  # fmt: skip
    profiles = seed_profiles(pd.DataFrame(rows), "laya")
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
