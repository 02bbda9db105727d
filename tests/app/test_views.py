"""laya.app.views: the dashboard's display-ready tables, images and labels, checked against laya's own numbers."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from laya.analysis.explain import explain, explain_bytes
from laya.analysis.report import Report
from laya.app import labels, views
from laya.app.numbers import percent
from laya.data.datasets import DatasetNotFoundError
from laya.data.images import ImageError, load_image_tensor
from laya.model.checkpoint import META_FILE, load_checkpoint


def reference(checkpoint, data: bytes, **kwargs):
    """laya's own explanation of ``data`` (what the dashboard must show)."""
    spec = checkpoint.meta.input
    return explain(checkpoint, load_image_tensor(data, spec.channels, spec.source_size), **kwargs)


def test_explanations_work_under_the_callers_grad_modes(setting: Path, example: bytes) -> None:
    """Post-hoc methods need gradients; explain lifts inference_mode/no_grad for them itself."""
    laya, concat = load_checkpoint(setting / "laya"), load_checkpoint(setting / "concat")
    expected = reference(laya, example, mode="renormalise", posthoc=("saliency", "integrated_gradients"))
    for context in (torch.inference_mode, torch.no_grad):
        with context():
            shown = explain_bytes(laya, example, mode="renormalise", posthoc=("saliency", "integrated_gradients"))
            posthoc_only = explain_bytes(concat, example)
        assert shown.label == expected.label and shown.confidence == pytest.approx(expected.confidence)
        assert list(shown.scores) == ["laya_alpha", "saliency", "integrated_gradients"]
        assert all(torch.allclose(shown.scores[m], expected.scores[m]) for m in shown.scores)
        assert posthoc_only.intrinsic is None and list(posthoc_only.scores) == ["integrated_gradients"]
        assert torch.allclose(
            posthoc_only.scores["integrated_gradients"], reference(concat, example).scores["integrated_gradients"]
        )


def test_explain_refuses_bad_images(setting: Path) -> None:
    with pytest.raises(ImageError, match="empty"):
        explain_bytes(load_checkpoint(setting / "laya"), b"")


def test_profiles(setting: Path) -> None:
    report = Report.load(setting / "laya")
    profile = report.class_layer_profile("scores")
    blue = views.class_profile(profile, "blue", "all")
    expected = profile[(profile["class"] == "blue") & (profile["subset"] == "all")]
    assert list(blue["layer"]) == report.layer_names
    assert blue["mean"].tolist() == pytest.approx(expected["mean"].tolist())
    assert views.class_counts(profile, "all") == {c: n for c, n in report.data["class_counts"].items()}
    assert views.profile_methods(report)[0] == "laya_alpha" and "random" not in views.profile_methods(report)
    assert views.global_profile(report, "saliency")["mean"].tolist() == pytest.approx(
        [r["mean"] for r in report.data["profiles"]["layer"]["signed"]["saliency"]]
    )
    loo = views.global_loo(report)
    modes = [labels.mode_label(m) for m in report.data["modes"]]
    pairs = [f"{v} ({m})" for m in modes for v in ("mean LOO drop", "label flips")]
    assert list(loo.columns) == ["layer", *pairs]
    shown = [float(v) for v in loo["mean LOO drop (mean (cross-head))"]]
    assert shown == pytest.approx(report.data["loo"]["mean"]["mean_drop"], abs=1e-4)
    flips = report.data["loo"]["mean"]["flip_rate"]
    assert loo["label flips (mean (cross-head))"].tolist() == [percent(f) for f in flips]
    assert loo.filter(like="label flips").stack().str.endswith("%").all()  # every mode's flips as percentages
    assert views.profile_title(report, "loo").startswith("Mean leave-one-layer-out drop")
    assert "Integrated Gradients (baseline: training mean) (post-hoc)" in views.profile_title(Report.load(setting / "concat"), "scores")


def test_seed_profiles_and_stability() -> None:
    counts = {"a": 1, "b": 3}
    rows = [{"head": "laya", "values": "scores", "seed": s, "class": c, "class_index": ci, "layer": f"b{i}",
             "layer_index": i, "mean": m, "count": counts[c]}
            for s, table in ((0, [[0.7, 0.3], [0.2, 0.8]]), (1, [[0.6, 0.4], [0.6, 0.4]]))
            for ci, (c, values) in enumerate(zip(("a", "b"), table)) for i, m in enumerate(values)]  # fmt: skip
    profiles = views.seed_profiles(pd.DataFrame(rows), "laya")
    stability = views.seed_stability(profiles)
    assert stability["top layer per seed"].tolist() == ["b0, b0", "b1, b0"]
    assert stability["seeds agreeing on the top layer"].tolist() == ["2 of 2", "1 of 2"]
    assert float(stability["max across-seed std"][1]) == pytest.approx(np.std([0.2, 0.6], ddof=1), abs=1e-3)  # number_text: 3 decimals
    whole = views.seed_global_profile(profiles)  # class means weighted by their counts (1 and 3)
    assert whole.set_index(["seed", "layer_index"])["mean"].to_dict() == pytest.approx(
        {(0, 0): (0.7 + 3 * 0.2) / 4, (0, 1): (0.3 + 3 * 0.8) / 4, (1, 0): 0.6, (1, 1): 0.4}
    )
    assert set(whole["class"]) == {views.ALL_CLASSES} and whole["count"].tolist() == [4, 4, 4, 4]
    assert views.seed_stability(whole)["top layer per seed"].tolist() == ["b1, b0"]


def test_evaluate_locally(setting: Path, tmp_path: Path) -> None:
    calls: list[float] = []
    report = views.evaluate_locally(load_checkpoint(setting / "laya"), limit=9, progress=lambda f, m: calls.append(f))
    assert report.data["dataset"]["n"] == 9 and calls[-1] == 1.0
    assert set(report.class_layer_profile("scores")["subset"]) == {"all", "correct", "incorrect"}
    moved = tmp_path / "laya"
    shutil.copytree(setting / "laya", moved)
    meta = json.loads((moved / META_FILE).read_text())
    meta["dataset"] = str(tmp_path / "missing-dataset")
    (moved / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(DatasetNotFoundError):
        views.evaluate_locally(load_checkpoint(moved))


def test_explain_is_safe_across_threads(setting: Path, example: bytes) -> None:
    """Dashboard sessions share one loaded model: concurrent explanations equal the serial one."""
    checkpoint = load_checkpoint(setting / "concat")  # post-hoc IG: gradients in every thread
    serial = explain_bytes(checkpoint, example, mode="mean", posthoc=("saliency",))
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda _: explain_bytes(checkpoint, example, mode="mean", posthoc=("saliency",)), range(8))
        )
    for result in results:
        assert torch.allclose(result.drops, serial.drops)
        assert all(torch.allclose(result.scores[m], serial.scores[m]) for m in serial.scores)


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
    assert views.best_ood_score(DEPTH) == ("mahalanobis", pytest.approx(0.97), 2)
    singular = {**DEPTH, "n_train": 240}  # an older (ridge) fit on fewer inputs than features: never the default
    assert views.best_ood_score(singular, [1280])[0] != "mahalanobis"
    assert views.best_ood_score({**singular, "covariance": "ledoit-wolf"}, [1280])[0] == "mahalanobis"
    lines = views.ood_status({"msp": -0.79, "mahalanobis": 3.1}, DEPTH)
    assert lines[0] == "Max softmax **0.790** (flagged below 0.620): not flagged."  # the probability, not −0.79
    assert "multi-layer Mahalanobis (mean AUROC 0.970 over 2 OOD sets): **3.1**, flagged above 2.76" in lines[1]
    assert "**flagged as out of distribution**" in lines[1]
    assert "flags 5 % of in-distribution test inputs by design" in lines[2]
    table = views.detection_view({"msp": -0.79, "mahalanobis": 1.0}, DEPTH)
    assert table.to_dict("records")[0] == {"score": "max softmax (baseline)", "value": "0.790", "rule": "flagged below",
                                           "threshold": "0.620", "flagged": "no"}  # fmt: skip
    assert table["flagged"].tolist() == ["no", "no"]
    assert views.mahalanobis_warning(1.2e8, 30, [64, 32]).startswith("Mahalanobis = 1.2e+08 comes from a covariance")
    assert views.mahalanobis_warning(2.0, 30, [64]) is not None  # fewer inputs than features: singular
    assert views.mahalanobis_warning(2.0, 3000, [64]) is None
    assert views.mahalanobis_warning(1.2e8, 30, [64], covariance="ledoit-wolf") is None  # never singular


def test_recompute_refusal_names_laya_path_roots() -> None:
    from laya.model.validation import CheckpointError

    text = views.recompute_error(CheckpointError("dataset '/x': must be a folder inside the data roots"))
    assert text.startswith("Cannot recompute: dataset '/x'") and "LAYA_PATH_ROOTS" in text
    assert "LAYA_PATH_ROOTS" not in views.recompute_error(DatasetNotFoundError("no images under /d"))


def test_html_export_carries_input_setting_hash_and_link(setting: Path) -> None:
    import base64
    import io

    from PIL import Image

    from laya.app.export import Provenance, html_report, weights_sha256

    sha = weights_sha256(setting / "laya")
    assert sha == json.loads((setting / "laya" / META_FILE).read_text())["weights"]["sha256"]
    pixels = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    source = Provenance("colours · mlp", "colours / mlp / laya", sha, "http://host/?head=laya&mode=mean", pixels, "red.png")
    page = html_report("Inspect: red.png", [("Table", pd.DataFrame({"a": [1]}))], "sub", source)
    assert "colours · mlp" in page and sha in page and "http://host/?head=laya&amp;mode=mean" in page
    encoded = page.split('src="data:image/png;base64,')[1].split('"')[0]
    assert (np.asarray(Image.open(io.BytesIO(base64.b64decode(encoded)))) == pixels).all()
    assert weights_sha256(setting / "nothing") is None


def test_inspect_asks_only_for_the_ood_scores_its_status_shows() -> None:
    depth = json.loads((Path(__file__).resolve().parents[2] / "models" / "cifar10-vit" / "laya" / "depth.json").read_text())
    best = views.best_ood_score(depth)
    assert views.shown_ood_scores(depth) == ("msp", best[0]) and best[0] != "msp"
    assert views.shown_ood_scores({}) == ("msp",)  # no detection table: max softmax alone
