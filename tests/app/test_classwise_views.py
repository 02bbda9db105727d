"""laya.app.classwise_views: a report's class-wise and dataset-wide profiles as display text, checked against
report.json, and Recompute on the local test split."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from laya.analysis.report import Report
from laya.app.classwise_views import (
    class_counts,
    class_profile,
    evaluate_locally,
    global_loo,
    global_profile,
    profile_methods,
    profile_title,
    recompute_error,
)
from laya.app.labels import mode_label
from laya.app.numbers import percent
from laya.data.datasets import DatasetNotFoundError
from laya.model.checkpoint import META_FILE, load_checkpoint


def test_profiles(setting: Path) -> None:
    report = Report.load(setting / "laya")
    profile = report.class_layer_profile("scores")
    blue = class_profile(profile, "blue", "all")
    expected = profile[(profile["class"] == "blue") & (profile["subset"] == "all")]
    assert list(blue["layer"]) == report.layer_names
    assert blue["mean"].tolist() == pytest.approx(expected["mean"].tolist())
    assert class_counts(profile, "all") == {c: n for c, n in report.data["class_counts"].items()}
    assert profile_methods(report)[0] == "laya_alpha" and "random" not in profile_methods(report)
    assert global_profile(report, "saliency")["mean"].tolist() == pytest.approx(
        [r["mean"] for r in report.data["profiles"]["layer"]["signed"]["saliency"]]
    )
    loo = global_loo(report)
    modes = [mode_label(m) for m in report.data["modes"]]
    pairs = [f"{v} ({m})" for m in modes for v in ("mean LOO drop", "label flips")]
    assert list(loo.columns) == ["layer", *pairs]
    shown = [float(v) for v in loo["mean LOO drop (mean (cross-head))"]]
    assert shown == pytest.approx(report.data["loo"]["mean"]["mean_drop"], abs=1e-4)
    flips = report.data["loo"]["mean"]["flip_rate"]
    assert loo["label flips (mean (cross-head))"].tolist() == [percent(f) for f in flips]
    assert loo.filter(like="label flips").stack().str.endswith("%").all()  # every mode's flips as percentages
    assert profile_title(report, "loo").startswith("Mean leave-one-layer-out drop")
    assert "Integrated Gradients (baseline: training mean) (post-hoc)" in profile_title(Report.load(setting / "concat"), "scores")


def test_evaluate_locally(setting: Path, tmp_path: Path) -> None:
    calls: list[float] = []
    report = evaluate_locally(load_checkpoint(setting / "laya"), limit=9, progress=lambda f, m: calls.append(f))
    assert report.data["dataset"]["n"] == 9 and calls[-1] == 1.0
    assert set(report.class_layer_profile("scores")["subset"]) == {"all", "correct", "incorrect"}
    moved = tmp_path / "laya"
    shutil.copytree(setting / "laya", moved)
    meta = json.loads((moved / META_FILE).read_text())
    meta["dataset"] = str(tmp_path / "missing-dataset")
    (moved / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(DatasetNotFoundError):
        evaluate_locally(load_checkpoint(moved))


def test_recompute_refusal_names_laya_path_roots() -> None:
    from laya.model.validation import CheckpointError

    text = recompute_error(CheckpointError("dataset '/x': must be a folder inside the data roots"))
    assert text.startswith("Cannot recompute: dataset '/x'") and "LAYA_PATH_ROOTS" in text
    assert "LAYA_PATH_ROOTS" not in recompute_error(DatasetNotFoundError("no images under /d"))
