"""The network report of an attached network: shapes, the tuned lens at the last unit, agreement numbers by hand,
storage and its checks."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file

from laya.analysis.network.report import NetworkOptions, run_network
from laya.analysis.network.report_files import load_network_report, write_network_report
from laya.analysis.network.scores import SCORES
from laya.analysis.sample import sample_indices
from laya.model.attached_files import AttachedFileError
from laya.model.checkpoint import load_checkpoint
from laya.training.attach import own_checkpoint
from tests.hostile import REPORT_CASES, REPORT_FILES, attached_setting
from tests.model.test_own_head import _save, networks
from tests.training.test_attach import _config, _retarget

FAMILIES = ["torchvision resnet18", "timm test_vit"]
QUICK = NetworkOptions(limit=12, references=3, ig_steps=2, batch_size=6, resamples=200, lens_sample=24,
                       lens_epochs=2, lens_lr=1e-3, gradcam_sample=6, timing_repeats=1)  # fmt: skip


@pytest.fixture(scope="module", params=FAMILIES)
def own(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, image_folder: Path):
    """An attached network's own checkpoint (3 classes, random weights) and its network report in its folder."""
    tmp = tmp_path_factory.mktemp("network")
    _, network, config = next(n for n in networks(tmp) if n[0] == request.param)
    config.weights = _save(_retarget(network, 3).eval(), Path(config.weights))
    checkpoint = load_checkpoint(own_checkpoint(_config(config, image_folder, tmp), tmp / "own"))
    report = run_network(checkpoint, QUICK, command="laya network --checkpoint own")
    return checkpoint, report


def test_report_shapes_and_the_last_unit_lens(own) -> None:
    checkpoint, report = own
    N, U = 12, len(report.units)
    assert U >= 6 and report.method == "resample" and len(report.stages) == len(report.residual) == U
    for name in ("drops", "lens_kl", "lens_prob", "lens_class", "lens_agrees"):
        assert tuple(getattr(report, name).shape) == (N, U), name
    assert {k: tuple(v.shape) for k, v in report.scores.items()} == {k: (N, U) for k in SCORES}
    assert report.indices.shape == report.labels.shape == report.prediction_depth.shape == (N,)
    test = checkpoint.load_data("test")
    assert torch.equal(report.labels, test.labels[report.indices])
    assert torch.bincount(report.labels).tolist() == [4, 4, 4]  # class-balanced
    assert report.last_unit_agreement >= 0.99  # the tuned lens at the last unit is the network's prediction
    assert (report.prediction_depth <= U).all()
    assert report.lens["command"] == "laya network --checkpoint own" and report.references == 3
    assert (report.drops.abs().max() > 0) and torch.isfinite(report.drops).all()
    interventions = set(report.agreement["intervention"])
    assert interventions == {"resample", "skip"} and list(report.agreement.columns) == [
        "score", "intervention", "spearman_mean", "ci_low", "ci_high", "n", "kind", "units", "vs_baseline", "vs_low",
        "vs_high", "trusted"]  # fmt: skip
    baselines = report.agreement[report.agreement["kind"] == "baseline"]
    assert sorted(baselines["score"]) == ["random", "random", "unit_mean", "unit_mean"]  # per intervention
    assert baselines["vs_baseline"].isna().all() and not baselines["trusted"].any()
    assert (report.agreement["units"] == sum(report.residual)).all()  # over the units that keep the input
    table = report.tables["lens_prob/true"]
    assert list(table.index) == ["all", "blue", "green", "red"] and table.loc["all", "n"] == N
    assert table.loc["all", report.units[2]] == pytest.approx(float(report.lens_prob[:, 2].mean()))
    lesion, correct = report.lesion, (report.predictions == report.labels).double()
    assert lesion.n == N and lesion.intact[0] == pytest.approx(float(correct.mean()))
    assert lesion.curve["k"].tolist() == list(range(sum(report.residual) + 1))  # k = 0 .. U'
    assert lesion.curve.loc[0, "mean"] == lesion.intact[0] and lesion.curve.loc[0, "sd"] == 0  # k = 0: intact
    assert (lesion.curve["draws"].iloc[1:] == QUICK.lesion_draws).all()
    skip = lesion.single[lesion.single["intervention"] == "skip"].set_index("unit")
    assert list(skip.index) == report.units and set(lesion.single["intervention"]) == {"skip", "resample"}
    assert [m.startswith("skip") for m in skip["method"]] == report.residual  # else the fallback, named
    drop = lesion.intact[0] - skip["accuracy"]
    assert np.allclose(skip["drop"], drop) and (skip["drop_low"] <= skip["drop"] + 1e-12).all()
    table = lesion.classes["resample"]
    assert list(table.columns) == ["intact", *report.units, "n"] and table.loc["all", "n"] == N
    by_class = lesion.by_class[lesion.by_class["intervention"] == "resample"].set_index(["class", "unit"])
    assert len(by_class) == 3 * (U + 1) and (by_class["n"] == 4).all()  # per class: intact and every unit
    assert by_class.loc[("red", report.units[2]), "accuracy"] == pytest.approx(table.loc["red", report.units[2]])
    grad = report.gradcam
    assert grad.n == 6 and list(grad.units["unit"]) == report.units and len(grad.rows) == 3 * U
    assert (grad.units["seconds"] > 0).all() and grad.forward_seconds > 0 and grad.all_seconds > 0
    assert np.allclose(grad.rows["diff"], grad.rows["mean"] - grad.rows["random"])  # unit minus random, paired
    assert (grad.rows["holm_p"] >= grad.rows["p_value"]).all()
    assert grad.chosen is None or grad.wins[grad.chosen] == grad.wins.max() > 0
    assert (checkpoint.path / "tuned_lens.safetensors").is_file()
    assert json.loads((checkpoint.path / "tuned_lens.json").read_text())["command"] == "laya network --checkpoint own"


def test_the_lesion_study_on_a_sample_of_its_own(own) -> None:
    """``lesion_limit``: the lesion study on its own class-balanced sample (or the whole test split), the rest of
    the report on its 12 inputs; its intact accuracy is the network's on exactly those inputs."""
    from dataclasses import replace

    from laya.analysis.network.report import network_report

    checkpoint, _ = own
    test = checkpoint.load_data("test")
    for limit, n in ((9, 9), ("all", len(test))):
        options = replace(QUICK, lesion_limit=limit, gradcam_sample=0, lesion_draws=1)
        report = network_report(checkpoint, test, options=options)
        assert len(report.indices) == 12 and report.lesion.n == n
        index = sample_indices(test.labels, n, options.seed)
        with torch.no_grad():
            predicted = checkpoint.model(checkpoint.preprocess(test.images[index])).logits.argmax(-1)
        assert report.lesion.intact[0] == pytest.approx(float((predicted == test.labels[index]).double().mean()))
    for bad in (0, -3, "most"):
        with pytest.raises(ValueError, match="lesion_limit"):
            replace(QUICK, lesion_limit=bad)


def test_the_lens_beside_what_needs_no_input_at_every_unit(own, tmp_path: Path) -> None:
    checkpoint, report = own
    rows = pd.DataFrame(report.lens["units"])
    assert rows["unit"].tolist() == report.units
    assert rows["kl"].tolist() == pytest.approx(report.lens_kl.mean(0).tolist())
    assert rows["agreement"].tolist() == pytest.approx(report.lens_agrees.double().mean(0).tolist())
    assert rows["constant_kl"].nunique() == 1 and rows["constant_kl"].iloc[0] > 0  # one input-free distribution
    fit = report.lens["fit"]
    assert len(fit["constant"]) == len(report.classes) and sum(fit["constant"]) == pytest.approx(1)
    assert report.units[-1] in fit["exact"] and rows["kl"].iloc[-1] < 1e-5  # the identity translator, the network
    vit = report.units[0].startswith("blocks")  # the logit lens applies to a ViT's blocks, not to a ResNet's
    assert rows["logit_kl"].notna().all() if vit else rows["logit_kl"].isna().all()
    write_network_report(checkpoint, report, tmp_path)
    again = load_network_report(tmp_path).lens["units"]
    assert [r["logit_kl"] is None for r in again] == [not vit] * len(report.units)  # NaN stored as null


def test_round_trip_and_refusals(own, tmp_path: Path) -> None:
    checkpoint, report = own
    write_network_report(checkpoint, report, tmp_path)
    loaded = load_network_report(tmp_path)
    assert loaded.units == report.units and loaded.residual == report.residual
    for name, value in report.arrays().items():
        got = loaded.arrays()[name]
        assert torch.equal(got, value), name
    assert np.allclose(loaded.agreement[["spearman_mean", "ci_low", "ci_high"]].to_numpy(dtype=float),
                       report.agreement[["spearman_mean", "ci_low", "ci_high"]].to_numpy(dtype=float), equal_nan=True)
    assert loaded.tables["drops/predicted"].equals(report.tables["drops/predicted"].astype(float)) or np.allclose(
        loaded.tables["drops/predicted"].to_numpy(dtype=float), report.tables["drops/predicted"].to_numpy(dtype=float))
    assert loaded.lesion.n == report.lesion.n and loaded.lesion.intact == report.lesion.intact
    for name in ("single", "curve"):
        assert getattr(loaded.lesion, name).equals(getattr(report.lesion, name)), name
    assert np.allclose(loaded.lesion.classes["skip"].to_numpy(dtype=float),
                       report.lesion.classes["skip"].to_numpy(dtype=float))  # fmt: skip
    pd.testing.assert_frame_equal(loaded.lesion.by_class, report.lesion.by_class)
    grad, stored = report.gradcam, loaded.gradcam
    pd.testing.assert_frame_equal(stored.rows, grad.rows, check_dtype=False)
    pd.testing.assert_frame_equal(stored.units, grad.units, check_dtype=False)
    assert (stored.n, stored.seed, stored.forward_seconds, stored.all_seconds, stored.chosen) == (
        grad.n, grad.seed, grad.forward_seconds, grad.all_seconds, grad.chosen)  # fmt: skip
    assert json.loads((tmp_path / "network.json").read_text())["gradcam"]["chosen"] == grad.chosen
    assert load_network_report(tmp_path / "absent") is None
    arrays = load_file(tmp_path / "network.safetensors")
    save_file({**arrays, "drops": arrays["drops"][:, :-1].contiguous()}, tmp_path / "network.safetensors")
    with pytest.raises(ValueError, match="do not fit its"):
        load_network_report(tmp_path)
    save_file({k: v for k, v in arrays.items() if k != "lens_kl"}, tmp_path / "network.safetensors")
    with pytest.raises(ValueError, match="lacks"):
        load_network_report(tmp_path)


def test_the_budget_caps_the_samples_and_says_so(own, tmp_path: Path) -> None:
    """A budget that affords the lens and six explained inputs (issue 47 §2): the report explains six, two of each
    class, runs no Grad-CAM test (fewer than one image per class would fit) and records what it ran; the line
    logged says what was asked."""
    from dataclasses import replace

    from laya.analysis.network.budget import report_rows

    checkpoint, report = own
    train, test = checkpoint.load_data("train"), checkpoint.load_data("test")
    rows = report_rows(len(report.units), QUICK)
    budget = (min(QUICK.lens_sample, len(train)) + 6 * rows.explained) / (len(train) + len(test))
    said: list[str] = []
    written = run_network(checkpoint, replace(QUICK, limit=None, budget=budget), dest=tmp_path, log=said.append)
    assert written.indices.shape == (6,) and torch.bincount(written.labels).tolist() == [2, 2, 2]
    assert written.gradcam is None and written.lesion.n == 6
    stored = load_network_report(tmp_path).options
    assert stored["limit"] == 6 and stored["gradcam_sample"] == 0 and stored["budget"] == budget
    assert [line for line in said if line.startswith("Network report sized to its budget")] == [
        f"Network report sized to its budget ({budget:g} forward passes over the {len(train) + len(test):,} images, "
        f"{round(budget * (len(train) + len(test))):,} rows): 6 test inputs explained (asked: all), the "
        f"Grad-CAM test not run (asked: 6 images) ({24 + 6 * rows.explained:,} rows; what was asked costs "
        f"{24 + len(test) * rows.explained + 6 * rows.gradcam:,}: rerun it with `laya network`, or attach with "
        "--budget 0)"]  # fmt: skip


def test_batches_sized_by_memory_give_the_same_report(own, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where an input and its references at every unit fill the activation budget twice over (as at 224 px), the
    report's batches hold two inputs, not QUICK's six; the numbers are the same to float noise."""
    from dataclasses import replace

    from laya.analysis.network import report as report_module
    from laya.analysis.network.report import network_report
    from laya.data.datasets import batch_indices

    checkpoint, report = own
    rows = 1 + QUICK.references * len(report.units)
    asked: list[int] = []
    monkeypatch.setattr(report_module, "pass_rows", lambda network, x, wanted: asked.append(wanted) or 2 * rows)
    sizes: list[int] = []
    monkeypatch.setattr(report_module, "batch_indices", lambda n, size: sizes.append(size) or batch_indices(n, size))
    again = network_report(checkpoint, options=replace(QUICK, gradcam_sample=0))  # the lens stored beside it
    assert asked == [QUICK.batch_size * rows] and 2 in sizes and QUICK.batch_size not in sizes  # 256: image reads
    for name in ("drops", "skip_drops", "lens_kl", "probability"):
        torch.testing.assert_close(getattr(again, name), getattr(report, name), rtol=0, atol=1e-6, msg=name)
    assert torch.equal(again.predictions, report.predictions)


def test_laya_network_command(own, capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    from laya.cli import main

    checkpoint, report = own
    args = ["network", "--checkpoint", str(checkpoint.path), "--out", str(tmp_path), "--limit", "6",
            "--references", "2", "--ig-steps", "2", "--resamples", "50", "--lens-sample", "24", "--lens-epochs", "1",
            "--branch", "mlp", "--lesion-draws", "2", "--gradcam-sample", "3"]  # fmt: skip
    (tmp_path / "network.json").write_text("null")  # a broken earlier report: replaced, saying so (issue 43)
    assert main(args) == 0
    out, err = capsys.readouterr()
    for bar in ("tuned lens: the units on its sample", "network report: profiles, lens, scores",
                "Grad-CAM against random"):  # the long passes each show their own bar (issue 47 §2)
        assert bar in err, bar
    assert ("The network report already there cannot be read and is replaced: network.json: (the file) = None: "
            "must be a JSON object") in out.splitlines()
    assert "6 test inputs" in out and "integrated gradients" in out and f"-> {tmp_path}" in out
    assert f"{report.units[-1]} 100.0% (identity translator: equal by construction)" in out
    written = load_network_report(tmp_path)
    assert written.units == report.units and written.indices.shape == (6,)
    assert "Lesion study: accuracy" in out and "k=0 " in out and written.lesion.n == 6
    assert (written.lesion.curve["draws"].iloc[1:] == 2).all() and written.options["lesion_draws"] == 2
    assert written.gradcam.n == 3 and written.options["gradcam_sample"] == 3
    assert "Grad-CAM of the predicted class, each unit's map minus a random map of its grid" in out
    assert "Grad-CAM to use: " in out or "Grad-CAM: no unit's map beats a random one" in out
    row = written.gradcam.rows.iloc[0]
    assert f"{row['metric']} {row['diff']:+.3f} [{row['diff_low']:+.3f}, {row['diff_high']:+.3f}]" in out
    vit = report.units[0].startswith("blocks")  # its blocks have an MLP branch; a ResNet's units none
    method = "resample of MLP" if vit else "resample"
    assert written.method == method and written.options["branch"] == "mlp"
    assert set(written.methods) == {"resample of MLP" if vit else "resample of the whole block"}
    assert set(written.agreement["intervention"]) == {method, method.replace("resample", "skip")}
    assert (tmp_path / "tuned_lens.json").is_file()  # fitted anew for this folder, with its command
    assert json.loads((tmp_path / "tuned_lens.json").read_text())["command"].startswith("laya ")


@pytest.mark.parametrize("case", REPORT_CASES, ids=lambda c: c.name)
def test_hostile_report_files_are_refused_naming_the_file(case, tmp_path: Path) -> None:
    """Every hostile ``network.*`` (a copy of the bundled own head's, broken one way: a list for a table, misshapen
    or NaN agreement rows, links out of the setting folder) gets one AttachedFileError naming its file."""
    own = attached_setting(tmp_path, REPORT_FILES)
    assert load_network_report(own).units[0] == "bn1"  # the copy loads as it is
    case.write(own)
    start = time.monotonic()
    with pytest.raises(AttachedFileError, match=re.escape(case.message)) as refused:
        load_network_report(own)
    assert time.monotonic() - start < 2.0
    message = str(refused.value)
    assert refused.value.file == case.file and case.file in message and str(tmp_path) not in message
