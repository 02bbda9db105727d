import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from laya.analysis.report import Report
from laya.cli import main
from laya.training.settings import SETTINGS
from laya.training.suite import results_table, summary_table, write_summary
from scripts.depth_cards import exit_card, truncation_card
from tests.hostile import BUNDLED_SETTING, LENS_CASES, LENS_FILES, attached_setting


def test_evaluate_command_writes_a_report(tiny_models, tmp_path, capsys):
    checkpoint = tiny_models / "colours-mlp" / "scalarmix"
    code = main(
        [
            "evaluate",
            "--checkpoint",
            str(checkpoint),
            "--out",
            str(tmp_path),
            "--ig-steps",
            "4",
            "--modes",
            "zero",
            "--resamples",
            "200",
        ]
    )
    assert code == 0
    report = Report.load(tmp_path)
    assert report.data["modes"] == ["zero"] and report.primary_method == "scalarmix_weights"
    assert (
        "faithfulness[scalarmix_weights, spearman_eps, zero]" in capsys.readouterr().out
    )  # headline: an evaluated mode


def test_exits_command_writes_measured_runs(tiny_models, tmp_path, capsys):
    checkpoint = tiny_models / "colours-mlp" / "laya"
    args = ["exits", "--checkpoint", str(checkpoint), "--out", str(tmp_path), "--limit", "12", "--train-limit", "30",
            "--batch-sizes", "1,4", "--repeats", "1", "--min-seconds", "0", "--thresholds", "0.6,0.9", "--alpha-levels", "0.5",
            "--trained", "linear", "--resamples", "20"]  # fmt: skip
    assert main(args) == 0
    report = json.loads((tmp_path / "exits.json").read_text())
    policies = [(r["exits"], r["policy"]) for r in report["runs"]]
    assert policies == [("readout", "full model"), ("readout", "confidence 0.6"), ("readout", "confidence 0.9"),
                        ("readout", "α profile 0.5"), ("trained linear", "full model"),
                        ("trained linear", "confidence 0.6"), ("trained linear", "confidence 0.9")]  # fmt: skip
    assert {"saved_b1", "saved_b4", "macs_saved"} <= set(report["runs"][1]) and report["n_test"] == 12
    assert [r["layers_kept"] for r in report["truncation"]] == [2, 2, 1, 1]
    assert "--thresholds 0.6,0.9" in report["command"] and "measured early exit" in capsys.readouterr().out
    for name in ("exits_runs.csv", "exits_alpha.csv", "exits_truncation.csv"):
        assert (tmp_path / name).is_file()
    load = report["machine"]["load_average"]  # the wall clock's conditions are part of the record
    assert len(load) == 2 and min(load) >= 0 and report["machine"]["cpus"] >= 1
    card = exit_card([tmp_path])
    header, row = card.splitlines()[0], card.splitlines()[2]
    assert header.endswith("| timed with |") and row.count("|") == header.count("|")
    threads, cpus = report["machine"]["torch_threads"], report["machine"]["cpus"]
    assert f"| cpu, {threads} thread" in row and row.endswith(f", load {load[0]:.1f}→{load[1]:.1f} on {cpus} cores |")
    assert header.count("noise of a saving (2 × plain timings' spread)") == 1 and row.count("±") == 2  # one spread per batch size
    truncation = truncation_card([tmp_path]).splitlines()
    assert truncation[0].endswith("| noise of a speed-up (2 × full-model timings' spread) |") and all(
        line.count("|") == truncation[0].count("|") and line.count("±") == 2 for line in truncation[2:]
    )
    assert report["format"] == 2 and "kept" not in report
    assert main([*args, "--readout-only"]) == 0  # re-measures the readout exits, keeps the rest
    merged = json.loads((tmp_path / "exits.json").read_text())
    assert [(r["exits"], r["policy"]) for r in merged["runs"]] == policies
    assert merged["runs"][4:] == report["runs"][4:] and merged["truncation"] == report["truncation"]
    assert merged["kept"]["kinds"] == ["trained linear"] and merged["command"].endswith("--readout-only")
    assert main([*args[:4], str(tmp_path / "none"), *args[5:], "--readout-only"]) == 2  # nothing to keep
    assert "--readout-only keeps the other runs" in capsys.readouterr().err


def test_user_errors_exit_with_status_2_and_one_line(tmp_path, capsys):
    (tmp_path / "model.json").write_text(json.dumps({"format": "something-else"}))
    (tmp_path / "model.safetensors").write_bytes(b"x")
    assert main(["evaluate", "--checkpoint", str(tmp_path)]) == 2
    assert "not a LAYA checkpoint" in capsys.readouterr().err
    assert main(["benchmark", "--suite", "imagenet"]) == 2
    assert "unknown setting" in capsys.readouterr().err


CLI_LENS_CASES = ("units an int", "config linked out", "a text in the fit's constant", "a nested fit constant",
                  "a fit constant of another length")  # fmt: skip


@pytest.mark.parametrize("case", [c for c in LENS_CASES if c.name in CLI_LENS_CASES], ids=lambda c: c.name)
def test_network_command_answers_a_broken_lens_file_in_one_line(case, tmp_path, capsys):
    """``laya network`` on the bundled own head with a broken ``tuned_lens.*``: one ``error:`` line naming the
    file, status 2 (units given as an int, and a fit's constant of texts or nested lists, ended in a TypeError or
    RuntimeError traceback and status 1), before any data is read."""
    own = attached_setting(tmp_path, (*LENS_FILES, "model.json", "model.safetensors"))
    shutil.copy(BUNDLED_SETTING / "backbone.safetensors", own.parent / "backbone.safetensors")
    case.write(own)
    assert main(["network", "--checkpoint", str(own), "--limit", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and err.startswith("error: ") and case.file in err and case.message in err


def test_summary_table_mean_and_std_over_seeds(tiny_models, tmp_path):
    runs = [tiny_models / "colours-mlp" / h for h in ("lastlayer", "laya")]
    results = results_table(runs)
    assert set(results["head"]) == {"lastlayer", "laya"}
    laya = results.query("head == 'laya' and mode == 'zero' and reduction == 'signed' and primary")
    assert laya["method"].tolist() == ["laya_alpha"]
    summary = summary_table(results)
    assert summary["head"].tolist() == ["LastLayer", "LAYA"]
    assert summary.loc[1, "layer scores"] == "LAYA α (intrinsic)"
    acc = Report.load(runs[1]).interval("accuracy")
    assert (
        summary.loc[1, "accuracy"] == f"{acc['estimate']:.4f} [{acc['low']:.4f}, {acc['high']:.4f}]"
    )  # one seed: CI over inputs
    assert summary.loc[0, "Spearman (informative layers)"] == "n/a (one informative layer)"
    out = write_summary(results, tmp_path, "tiny", runs)
    text = (out / "summary.md").read_text()
    assert "| LAYA" in text and "Paired comparisons" in text
    profiles = __import__("pandas").read_csv(out / "class_profiles.csv")
    assert set(profiles["head"]) == {"lastlayer", "laya"} and set(profiles["values"]) == {"scores", "loo"}


def test_summary_over_seeds_has_t_intervals_and_paired_tests(tiny_models, tmp_path):
    import pandas as pd

    from laya.training.suite import comparisons_table

    runs = [tiny_models / "colours-mlp" / h for h in ("scalarmix", "laya")]
    one = results_table(runs)
    shifted = one.assign(seed=1, accuracy=one["accuracy"] - 0.01)  # a second, slightly worse "seed"
    results = pd.concat([one, shifted], ignore_index=True)
    summary = summary_table(results)
    assert " ± " in summary.loc[1, "accuracy"] and "[" in summary.loc[1, "accuracy"]
    comparisons = comparisons_table(results)
    row = comparisons[comparisons["comparison"] == "accuracy"].iloc[0]
    assert row["seeds"] == 2 and "paired t-test over seeds" in row["over seeds"]
    # a benchmark of some heads only (`--heads lastlayer,scalarmix`) has nothing to compare LAYA with: no crash
    assert comparisons_table(results[results["head"] != "laya"]).empty
    out = write_summary(results[results["head"] != "laya"], tmp_path, "no LAYA", runs[:1])
    assert "| ScalarMix" in (out / "summary.md").read_text()


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


def test_bundle_command_refreshes_a_setting_and_evaluate_reproduces_it(tiny_models, tmp_path):
    import shutil

    setting = tmp_path / "models" / "colours-mlp"
    shutil.copytree(tiny_models / "colours-mlp", setting)
    (setting / "laya" / "report.json").unlink()
    assert main(["bundle", str(setting), "--ig-steps", "4", "--resamples", "300"]) == 0
    assert (setting / "summary.md").is_file() and (setting / "class_profiles.csv").is_file()
    assert "Spearman" in (tmp_path / "models" / "README.md").read_text()
    out = tmp_path / "again"
    assert main(["evaluate", "--checkpoint", str(setting / "laya"), "--ig-steps", "4", "--resamples", "300",
                 "--out", str(out)]) == 0  # fmt: skip
    bundled, again = Report.load(setting / "laya").data, Report.load(out).data
    assert {k: v for k, v in bundled.items() if k != "timing"} == {k: v for k, v in again.items() if k != "timing"}


@pytest.mark.parametrize("stream", [False, True], ids=["in-memory", "streamed"])
def test_evaluate_skips_entries_that_are_not_images_and_refuses_a_broken_one(
    tiny_models, image_folder, tmp_path, capsys, caplog, stream
):
    """Issue 17, hole 12: a directory named ``x.png``, a broken link and a link out of the dataset are skipped,
    each with a warning naming it; a file that is not an image is refused in one line (exit 2), never a traceback."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(image_folder, data)
    blue = data / "test" / "blue"
    (blue / "x.png").mkdir()
    (blue / "gone.png").symlink_to(tmp_path / "missing.png")
    (blue / "out.png").symlink_to("/etc/passwd")
    args = ["evaluate", "--checkpoint", str(tiny_models / "colours-mlp" / "laya"), "--dataset", str(data)]
    args += ["--out", str(tmp_path / "report"), "--ig-steps", "2", "--modes", "zero", "--resamples", "100"]
    args += ["--stream"] if stream else []
    with caplog.at_level("WARNING", logger="laya.data"):
        assert main(args) == 0
    skipped = " ".join(r.getMessage() for r in caplog.records)
    assert all(name in skipped for name in ("x.png", "gone.png", "out.png"))
    assert Report.load(tmp_path / "report").data["dataset"]["n"] == 24  # the 3 x 8 real images only
    (blue / "broken.png").write_bytes(b"not an image at all")
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "report2")]) == 2
    err = capsys.readouterr().err
    assert "broken.png" in err and "not a readable image" in err and "Traceback" not in err


def test_image_size_is_what_the_backbone_sees_and_input_size_a_deprecated_alias(capsys):
    from laya.cli import build_parser, train_config_from_args

    parser = build_parser()
    config = train_config_from_args(parser.parse_args(["train", "--image-size", "64"]))
    assert (config.image_size, config.backbone.input_size) == (64, 64)  # decoded at 64, fed at 64
    config = train_config_from_args(parser.parse_args(["train", "--image-size", "64", "--decode-size", "128"]))
    assert (config.image_size, config.backbone.input_size) == (128, 64)
    config = train_config_from_args(parser.parse_args(["train", "--input-size", "96"]))
    assert (config.image_size, config.backbone.input_size) == (96, 96)
    assert "--input-size is deprecated" in capsys.readouterr().err
    with pytest.raises(ValueError, match="disagree"):
        train_config_from_args(parser.parse_args(["train", "--image-size", "64", "--input-size", "96"]))
    help_text = parser._subparsers._group_actions[0].choices["train"].format_help()
    assert "side of the square images the backbone sees" in help_text and "deprecated alias" in help_text


def test_model_and_layers_flags_name_any_family():
    from laya.cli import build_parser, train_config_from_args

    args = build_parser().parse_args(
        ["train", "--backbone", "torchvision", "--model", "resnet18", "--layers", "layer1,layer4"]
    )
    backbone = train_config_from_args(args).backbone
    assert (backbone.name, backbone.model, backbone.layers) == ("torchvision", "resnet18", ["layer1", "layer4"])


def test_dashboard_command_runs_the_checkout_app_with_its_settings(tiny_models, monkeypatch):
    from laya.dashboard import app_dir, command

    argv, env = command(tiny_models, port=8765)
    assert argv[1:4] == ["-m", "streamlit", "run"] and Path(argv[4]) == app_dir() / "app.py"
    assert "--client.showSidebarNavigation=false" in argv and "--server.port=8765" in argv
    assert env["LAYA_MODELS"] == str(tiny_models.resolve())
    with pytest.raises(FileNotFoundError, match="no such folder"):
        command(tiny_models / "missing")


def test_depth_command_takes_the_small_data_flags_and_records_them(tiny_models, tmp_path, capsys):
    checkpoint = tiny_models / "colours-mlp" / "laya"
    args = ["depth", "--checkpoint", str(checkpoint), "--out", str(tmp_path), "--limit", "12", "--train-limit", "30",
            "--resamples", "20", "--random-orders", "2", "--timing-batch", "4", "--timing-repeats", "1"]  # fmt: skip
    assert main(args) == 0
    report = json.loads((tmp_path / "depth.json").read_text())
    assert report["options"] | {"random_orders": 2, "timing_batch": 4, "timing_repeats": 1} == report["options"]
    assert report["early_exit"]["timing_batch"] == 4 and report["n_test"] == 12
    assert report["command"].endswith("--resamples 20 --random-orders 2 --timing-batch 4 --timing-repeats 1")
    assert "prediction depth" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["head", "backbone"])
def test_patch_command_prints_and_writes_the_effect_table(tiny_models, tmp_path, capsys, where):
    import pandas as pd

    out = tmp_path / "patch.csv"
    checkpoint = str(tiny_models / "colours-mlp" / "laya")
    # the tiny model makes no error: the default pairs (correct <- misclassified) are refused clearly
    assert main(["patch", "--checkpoint", checkpoint]) == 2
    assert "no (correct" in capsys.readouterr().err
    classes = json.loads((tiny_models / "colours-mlp" / "laya" / "model.json").read_text())["classes"]
    args = ["patch", "--checkpoint", checkpoint, "--where", where, "--label", classes[0],
            "--source-label", classes[1], "--resamples", "50", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    assert f"source: of class {classes[1]!r}" in capsys.readouterr().out
    table = pd.read_csv(out)
    assert list(table["layer"]) == ["block 1", "block 2", "block 3"] and table["n"].min() > 0
    assert (table["prob_change_low"] <= table["prob_change"] + 1e-12).all()
    assert (table["prob_change"] <= table["prob_change_high"] + 1e-12).all()


def test_patch_command_refuses_an_unknown_class(tiny_models, capsys):
    assert main(["patch", "--checkpoint", str(tiny_models / "colours-mlp" / "laya"), "--label", "nope"]) == 2
    assert "unknown class 'nope'" in capsys.readouterr().err


def test_help_is_plain_text_under_the_name_laya_and_version_is_printed(capsys):
    from laya import __version__

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and out.startswith("usage: laya ") and "python -m laya" not in out
    assert "`" not in out and "dashboard" in out  # no reST markup in the command list or the description
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"laya {__version__}"


def test_a_missing_optional_package_prints_its_install_command(image_folder, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if `pip install laya` without the extra
    args = ["train", "--backbone", "transformers", "--model", "vit", "--dataset", str(image_folder),
            "--max-epochs", "1", "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith('pip install "laya[transformers]"') and "backbone = " not in err


def test_dashboard_listens_on_this_machine_unless_shared_on_every_interface(tiny_models, capsys):
    from laya.dashboard import command, listen_address, url

    argv, _ = command(tiny_models, port=8765)
    assert "--server.address=127.0.0.1" in argv and url(8765, "127.0.0.1") == "http://127.0.0.1:8765"
    assert listen_address() == "127.0.0.1" and listen_address("10.0.0.5") == "10.0.0.5"
    assert listen_address(bind_all=True) is None  # Streamlit's own default: every interface
    assert not any(a.startswith("--server.address") for a in command(tiny_models, address=None)[0])
    assert main(["dashboard", "--models", str(tiny_models), "--bind-all", "--address", "10.0.0.5"]) == 2
    assert "excludes --address 10.0.0.5" in capsys.readouterr().err


def test_dashboard_opens_the_demo_when_no_models_folder_is_given(tmp_path, monkeypatch):
    from laya.dashboard import command
    from laya.demo import demo_models

    monkeypatch.delenv("LAYA_MODELS", raising=False)
    monkeypatch.chdir(tmp_path)  # no models/ here
    _, env = command()
    assert env["LAYA_MODELS"] == str(demo_models().resolve())
    assert (demo_models() / "fashion-mnist-mlp" / "laya" / "model.json").is_file()


def _listeners(port: int) -> set[str]:
    """Local addresses of the sockets listening on ``port`` (``/proc/net/tcp{,6}``, state 0A = LISTEN)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.skipif(not Path("/proc/net/tcp").is_file(), reason="reads the listening sockets from Linux's /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_dashboard_forwards_the_signal_and_exits_with_its_server(tiny_models, signum):
    """``laya dashboard`` serves 127.0.0.1 only, says so, and stops with its Streamlit child: port freed."""
    from scripts.screenshots import _wait_healthy, free_port

    port = free_port()
    laya = subprocess.Popen(
        [sys.executable, "-m", "laya", "dashboard", "--models", str(tiny_models), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert laya.stdout.readline().startswith(f"LAYA dashboard on http://127.0.0.1:{port} ")
        _wait_healthy(laya, f"http://127.0.0.1:{port}", 120)
        assert _listeners(port) == {"0100007F"}  # 127.0.0.1 only, never 0.0.0.0 or ::
        (server,) = _children(laya.pid)
        laya.send_signal(signum)  # to laya only, not to its process group
        assert laya.wait(timeout=60) in (0, 128 + signum)
        assert not Path(f"/proc/{server}").exists() and not _listeners(port)
    finally:
        if laya.poll() is None:
            os.killpg(laya.pid, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/net/tcp").is_file(), reason="reads the listening sockets from Linux's /proc")
def test_dashboard_server_ends_with_a_launcher_killed_by_sigkill(tiny_models):
    """A launcher ended by SIGKILL (the OOM killer) forwards nothing: its Streamlit child must still stop."""
    import time

    from scripts.screenshots import _wait_healthy, free_port
    from tests.test_dashboard_child import end_group, ended

    port = free_port()
    laya = subprocess.Popen(
        [sys.executable, "-m", "laya", "dashboard", "--models", str(tiny_models), "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_healthy(laya, f"http://127.0.0.1:{port}", 120)
        (server,) = _children(laya.pid)
        laya.kill()  # SIGKILL to laya only, not to its process group
        assert laya.wait(timeout=10) == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while not (ended(server) and not _listeners(port)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ended(server), f"the Streamlit child {server} outlived its launcher by 10 s"
        assert not _listeners(port), f"port {port} still served 10 s after the launcher was killed"
    finally:
        end_group(laya)


@pytest.mark.parametrize("command", ["depth", "lens", "exits"])
def test_the_depth_commands_take_back_the_limits_they_record(command):
    """A whole-split run records ``--limit all`` (``limit_flag``), which the command parses back to the whole split."""
    from laya.analysis.depth.data import limit_flag
    from laya.cli import build_parser

    args = build_parser().parse_args([command, "--checkpoint", "c", "--limit", limit_flag(None), "--train-limit", "7"])
    assert args.limit is None and args.train_limit == 7 and limit_flag(7) == "7"
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--checkpoint", "c", "--limit", "None"])
