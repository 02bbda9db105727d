import json
from pathlib import Path

import pytest

from laya.analysis.report import Report
from laya.cli import main
from laya.training.settings import SETTINGS
from laya.training.suite import results_table, summary_table, write_summary


def test_evaluate_command_writes_a_report(tiny_models, tmp_path, capsys):
    checkpoint = tiny_models / "colours-mlp" / "scalarmix"
    code = main(
        ["evaluate", "--checkpoint", str(checkpoint), "--out", str(tmp_path), "--ig-steps", "4", "--modes", "zero,mean"]
    )
    assert code == 0
    report = Report.load(tmp_path)
    assert report.data["modes"] == ["zero", "mean"] and report.primary_method == "scalarmix_weights"
    assert "accuracy" in capsys.readouterr().out


def test_user_errors_exit_with_status_2_and_one_line(tmp_path, capsys):
    (tmp_path / "model.json").write_text(json.dumps({"format": "something-else"}))
    (tmp_path / "model.safetensors").write_bytes(b"x")
    assert main(["evaluate", "--checkpoint", str(tmp_path)]) == 2
    assert "not a LAYA checkpoint" in capsys.readouterr().err
    assert main(["benchmark", "--suite", "imagenet"]) == 2
    assert "unknown setting" in capsys.readouterr().err


def test_summary_table_mean_and_std_over_seeds(tiny_models, tmp_path):
    runs = [tiny_models / "colours-mlp" / h for h in ("lastlayer", "laya")]
    results = results_table(runs)
    assert set(results["head"]) == {"lastlayer", "laya"}
    laya = results.query("head == 'laya' and mode == 'zero' and primary")
    assert laya["method"].tolist() == ["laya_alpha"]
    summary = summary_table(results)
    assert summary["head"].tolist() == ["LastLayer", "LAYA"]
    assert summary.loc[1, "layer scores"] == "laya_alpha"
    assert summary.loc[1, "accuracy"] == f"{Report.load(runs[1]).accuracy:.4f}"
    out = write_summary(results, tmp_path, "tiny")
    assert "| LAYA" in (out / "summary.md").read_text()


def test_settings_cover_the_four_experimental_settings():
    assert set(SETTINGS) == {"fashion-mnist-mlp", "cifar10-cnn", "cifar10-efficientnet-lite0", "cifar10-vit"}
    for setting in SETTINGS.values():
        config = setting.config("laya", 2, Path("runs"))
        assert config.seed == 2 and config.head.name == "laya" and config.out.endswith("laya/seed2")
    with pytest.raises(ValueError, match="unknown head"):
        SETTINGS["cifar10-cnn"].config("mlp", 0, Path("runs"))


def test_bad_config_files_are_reported(tmp_path, capsys):
    bad = tmp_path / "run.yaml"
    bad.write_text("dataset: [unclosed")
    assert main(["train", "--config", str(bad)]) == 2
    assert "is not valid YAML" in capsys.readouterr().err
    unknown = tmp_path / "run.json"
    unknown.write_text('{"learning_rate": 0.1}')
    assert main(["train", "--config", str(unknown)]) == 2
    assert "training.learning_rate = 0.1: unknown key; expected one of dataset" in capsys.readouterr().err
    assert main(["train", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err
