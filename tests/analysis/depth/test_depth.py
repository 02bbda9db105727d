"""Depth analytics end to end on the tiny bundled models (ImageFolder data: the OOD sets are noise)."""

from pathlib import Path

import pandas as pd
import pytest
import torch

from laya.analysis.depth.data import seeded_subset
from laya.analysis.depth.detection import COVARIANCE, Mahalanobis
from laya.analysis.depth.fit import FIT_FILE, DepthFit
from laya.analysis.depth.input_depth import InputDepth, input_depth
from laya.analysis.depth.layer_lens import lens, load_lens
from laya.analysis.depth.report import (
    CSV_TABLES,
    DEPTH_FILE,
    DepthOptions,
    DepthReport,
    LensOptions,
    depth_report,
    lens_report,
    write_depth,
)
from laya.cli import main
from laya.model.checkpoint import load_checkpoint

OPTIONS = DepthOptions(
    limit=12, train_limit=30, resamples=20, random_orders=2, refit_steps=3, timing_repeats=1, timing_batch=4
)


@pytest.fixture(scope="module", params=["laya", "concat"])
def analysed(request, tiny_models: Path, tmp_path_factory):
    checkpoint = load_checkpoint(tiny_models / "colours-mlp" / request.param)
    report, fit = depth_report(checkpoint, OPTIONS)
    out = write_depth(report, tmp_path_factory.mktemp("depth"))
    return checkpoint, report, fit, out


def test_report_holds_every_analysis_and_the_fit_is_stored(analysed):
    checkpoint, report, fit, out = analysed
    assert report["n_test"] == 12 and report["n_train"] == 30
    assert fit.probes is not None  # every head: its same-kind readouts
    own = checkpoint.meta.head.name == "laya"
    assert report["readout_kind"] == ("own classifier" if own else "fitted probe")
    probes = DepthReport(report).table("prediction_depth_probes")
    assert probes.set_index("class").loc["all", "n"] == 12
    if not own:  # Concat's readouts are the probes: both tables are the same numbers
        assert probes.equals(DepthReport(report).table("prediction_depth"))
    assert (fit.alpha_profile is not None) == (checkpoint.meta.head.name == "laya")
    stored = DepthFit.load(checkpoint.path)
    assert (checkpoint.path / FIT_FILE).is_file() and stored.info["n_train"] == 30
    view = DepthReport.load(out)
    assert (out / DEPTH_FILE).is_file() and all((out / f"depth_{k}.csv").is_file() for k in CSV_TABLES)
    overall = view.table("prediction_depth").set_index("class").loc["all"]
    assert 1 <= overall["prediction_depth"] <= 4 and overall["n"] == 12
    curve = view.table("exit_curve")
    assert curve["cost"].iloc[-1] == pytest.approx(1.0) and curve["accuracy"].iloc[-1] == pytest.approx(
        report["accuracy"]
    )
    detection = view.table("detection")
    assert set(detection["task"]) == {"misclassification", "OOD: uniform noise", "OOD: gaussian noise"}
    assert len(report["early_exit"]["layer_cost_s"]) == 4
    pruning = view.table("pruning")
    assert (pruning.loc[pruning["layers_kept"] == 3, "accuracy"] == report["accuracy"]).all()


def test_readout_probes_reads_every_head_through_fitted_probes(tiny_models: Path):
    checkpoint = load_checkpoint(tiny_models / "colours-mlp" / "laya")
    report, _ = depth_report(checkpoint, DepthOptions(**{**OPTIONS.__dict__, "readout": "probes"}))
    view = DepthReport(report)
    assert report["readout_kind"] == "fitted probe" and report["command"].endswith("--readout probes")
    assert view.table("prediction_depth").equals(view.table("prediction_depth_probes"))
    with pytest.raises(ValueError, match="readout must be"):
        depth_report(checkpoint, DepthOptions(**{**OPTIONS.__dict__, "readout": "classifier"}))


def test_input_depth_matches_the_model(analysed):
    checkpoint, _, fit, _ = analysed
    image = checkpoint.load_data("test").images[0]
    result = input_depth(checkpoint, image, fit)
    with torch.no_grad():
        logits = checkpoint.model(checkpoint.preprocess(image.unsqueeze(0))).logits.double()
    assert (result.attribution.logits - logits).abs().max() < 1e-5
    assert result.readouts.probs.shape == (1, 3, 3) and set(result.scores) >= {"msp", "mahalanobis"}
    bare = input_depth(checkpoint, image, None)  # no fit: what the head alone allows
    assert (bare.readouts is None) == (checkpoint.meta.head.name == "concat") and "mahalanobis" not in bare.scores


def test_cli_writes_the_report_and_refuses_a_missing_checkpoint(tiny_models: Path, tmp_path: Path, capsys):
    args = ["depth", "--checkpoint", str(tiny_models / "colours-mlp" / "scalarmix"), "--limit", "12"]
    assert main([*args, "--train-limit", "30", "--resamples", "20", "--out", str(tmp_path)]) == 0
    assert DepthReport.load(tmp_path).data["n_test"] == 12 and "prediction depth" in capsys.readouterr().out
    assert main(["depth", "--checkpoint", str(tmp_path / "nothing")]) == 2
    assert "no LAYA checkpoint" in capsys.readouterr().err


def test_depth_writes_the_lens_and_lens_alone_reproduces_it(analysed, tmp_path: Path, capsys):
    """lens.csv beside depth.json equals the lens of the report's own head pass, and `laya lens` (same inputs,
    same stored fit) writes the same numbers without the rest of depth analytics."""
    checkpoint, _, fit, out = analysed
    summary = load_lens(out)
    own = checkpoint.meta.head.name == "laya"
    assert set(summary["readout"]) == {"head classifier" if own else "linear probes"}
    test = checkpoint.load_data("test").subset(seeded_subset(len(checkpoint.load_data("test")), 12, 0))
    hidden = checkpoint.model.backbone(checkpoint.preprocess(test.images))
    expected = lens(checkpoint.model.head, hidden, None if own else fit.probes)
    overall = summary[summary["class"] == "all"]
    assert list(overall["n"]) == [12] * 3
    assert list(overall["kl"]) == pytest.approx(expected.kl.mean(0).tolist(), abs=1e-6)
    assert list(overall["prob"]) == pytest.approx(expected.prob.mean(0).tolist(), abs=1e-6)
    alone = lens_report(checkpoint, LensOptions(limit=12, resamples=20))
    columns = [c for c in summary.columns if c != "command"]
    pd.testing.assert_frame_equal(alone[columns], summary[columns], check_dtype=False, atol=1e-9)
    args = ["lens", "--checkpoint", str(checkpoint.path), "--limit", "12", "--resamples", "20", "--out", str(tmp_path)]
    assert main(args) == 0 and "per-layer lens" in capsys.readouterr().out
    assert load_lens(tmp_path)["command"].iloc[0].startswith("python -m laya lens --checkpoint")
    result = input_depth(checkpoint, test.images[0], fit)  # the Depth page's per-input lens, through a worker too
    again = InputDepth.from_tensors(*result.to_tensors())
    assert again.readout_kind == ("own classifier" if own else "fitted probe")
    assert torch.allclose(again.lens().kl[0], expected.kl[0], atol=1e-6)


def test_lens_fits_probes_only_where_there_is_no_fit(tiny_models: Path, tmp_path: Path):
    import shutil

    copy = tmp_path / "concat"
    shutil.copytree(tiny_models / "colours-mlp" / "concat", copy)
    for name in (FIT_FILE, "depth_fit.json"):
        (copy / name).unlink(missing_ok=True)
    table = lens_report(load_checkpoint(copy), LensOptions(limit=12, train_limit=30, resamples=20))
    assert set(table["readout"]) == {"linear probes"} and "--train-limit 30" in table["command"].iloc[0]
    assert not (copy / FIT_FILE).exists()  # fitted for the lens only, never stored as a depth fit
    with pytest.raises(ValueError, match="readout must be"):
        lens_report(load_checkpoint(copy), LensOptions(readout="tuned"))


def test_only_detection_refits_an_older_mahalanobis_and_keeps_every_other_block(tiny_models: Path, tmp_path, capsys):
    """`laya depth --only detection` on a report and fit from before Ledoit–Wolf: the fit gets a new Mahalanobis
    (its probes kept), the detection block equals a whole run's, every other block is left as it was."""
    import shutil

    copy = tmp_path / "laya"
    shutil.copytree(tiny_models / "colours-mlp" / "laya", copy)
    checkpoint = load_checkpoint(copy)
    report, fit = depth_report(checkpoint, OPTIONS)
    older = {k: v * 3 if k.startswith("maha_precision") else v for k, v in fit.mahalanobis.to_tensors().items()}
    info = {k: v for k, v in fit.info.items() if k != "covariance"}  # a ridge fit recorded no estimator
    DepthFit(Mahalanobis.from_tensors(older), fit.probes, fit.alpha_profile, info).save(copy)
    stale = {k: v for k, v in report.items() if k != "covariance"} | {"early_exit": {**report["early_exit"], "device": "kept"}}
    stale["detection"] = {**report["detection"], "table": [{"score": "mahalanobis", "auroc": 0.123}]}
    write_depth(stale, copy)
    assert main(["depth", "--checkpoint", str(copy), "--only", "detection"]) == 0
    assert "ledoit-wolf" in capsys.readouterr().out
    new = DepthReport.load(copy)
    assert new.data["early_exit"]["device"] == "kept" and new.data["covariance"] == COVARIANCE
    assert new.data["detection"]["refreshed"]["command"].endswith("--only detection")
    pd.testing.assert_frame_equal(new.table("detection"), DepthReport(report).table("detection"), atol=1e-12)
    refitted = DepthFit.load(copy)
    assert refitted.info["covariance"] == COVARIANCE
    # the same fit up to the float32 features' rounding (the command's own feature pass where the test runs alone,
    # not the cached one: relative 3e-8 seen); the older fit is 3 times it
    assert all(torch.allclose(a, b, rtol=1e-6, atol=0) for a, b in zip(refitted.mahalanobis.precisions,
                                                                        fit.mahalanobis.precisions))  # fmt: skip
    assert all(torch.equal(a, b) for a, b in zip(refitted.probes.to_tensors().values(), fit.probes.to_tensors().values()))
    (copy / DEPTH_FILE).unlink()
    assert main(["depth", "--checkpoint", str(copy), "--only", "detection"]) == 2
    assert "no depth.json" in capsys.readouterr().err


def test_a_streamed_split_gives_the_decoded_one_s_report(analysed, monkeypatch: pytest.MonkeyPatch) -> None:
    """A split streamed from its files, as one larger than the memory threshold is, is read batch by batch (never
    decoded whole) and gives the same numbers as the decoded split (issue 47: datasets larger than RAM)."""
    from laya.data import datasets
    from laya.data.streaming import ImageFiles

    checkpoint, report, _, _ = analysed
    monkeypatch.setattr(datasets, "STREAM_THRESHOLD_BYTES", 0)
    assert isinstance(checkpoint.load_data("train"), ImageFiles)
    streamed, _ = depth_report(checkpoint, OPTIONS)
    for key in ("n_train", "n_test", "accuracy", "readout_accuracy", "prediction_depth", "logit_attribution"):
        assert streamed[key] == report[key], key  # the same pixels, batch by batch: the same features
