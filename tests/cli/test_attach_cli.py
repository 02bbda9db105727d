"""``laya attach`` on the command line: the summary it prints and the errors a user can fix."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from laya.cli import main
from tests.model.test_own_head import _save


def test_attach_prints_the_one_screen_summary(tmp_path: Path, image_folder: Path, capsys) -> None:
    import timm

    torch.manual_seed(0)
    weights = _save(timm.create_model("resnet10t", num_classes=3), tmp_path / "mine.pth")
    argv = ["--threads", "1", "attach", "--family", "timm", "--model", "resnet10t", "--weights", weights,
            "--dataset", str(image_folder), "--image-size", "32", "--out", str(tmp_path / "out"), "--setting", "mine",
            "--max-epochs", "1", "--resamples", "50", "--ig-steps", "4", "--train-limit", "48", "--random-orders", "1",
            "--timing-batch", "4", "--timing-repeats", "1"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "own head (the network as it is)" in out and "LAYA attends to" in out
    assert f"laya dashboard --models {tmp_path / 'out'}" in out
    written = {p.name for p in (tmp_path / "out" / "mine").iterdir()}
    assert written >= {"own", "laya", "scalarmix", "concat", "backbone.safetensors", "examples", "summary.md"}


@pytest.fixture()
def no_long_step(monkeypatch):
    """Fails the test if attach reaches its first long step (features of the training split)."""
    import laya.training.attach as attach_module

    def refuse(*args, **kwargs):
        raise AssertionError("a long step started before the refusal")

    monkeypatch.setattr(attach_module, "cached_hidden_states", refuse)
    monkeypatch.setattr(attach_module, "bundle", refuse)


def _attach(weights: str, dataset: Path, tmp_path: Path, *extra: str, model: str = "resnet10t") -> list[str]:
    return ["attach", "--family", "timm", "--model", model, "--weights", weights, "--dataset", str(dataset),
            "--out", str(tmp_path / "out"), *extra]  # fmt: skip


def _refusal(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    (line,) = [x for x in captured.err.splitlines() if x.strip()]  # one line: no progress bar before it
    assert line.startswith("error: ")
    return line


def test_weights_of_another_architecture_are_refused_by_key(tmp_path: Path, image_folder: Path, capsys,
                                                            no_long_step) -> None:  # fmt: skip
    import timm

    weights = _save(timm.create_model("resnet14t", num_classes=3), tmp_path / "deeper.safetensors")
    line = _refusal(_attach(weights, image_folder, tmp_path, "--image-size", "32"), capsys)
    assert "do not fit the architecture" in line and " not in the architecture (layer" in line  # the extra blocks
    assert "--match-by-order" in line


def test_the_classifier_s_class_count_is_named_with_the_dataset_s(tmp_path: Path, image_folder: Path, capsys,
                                                                 no_long_step) -> None:  # fmt: skip
    import timm

    weights = _save(timm.create_model("resnet10t", num_classes=10), tmp_path / "ten.safetensors")
    line = _refusal(_attach(weights, image_folder, tmp_path, "--image-size", "32"), capsys)
    assert "the weights' classifier has 10 outputs" in line
    assert f"the dataset '{image_folder}' has 3 classes (blue, green, red)" in line


def test_a_one_class_folder_is_said_in_plain_words(tmp_path: Path, capsys, no_long_step) -> None:
    import timm

    from tests.conftest import make_image_folder

    data = make_image_folder(tmp_path / "data", train=2, test=2)
    for split in ("train", "test"):
        for name in ("green", "red"):
            shutil.rmtree(data / split / name)
    weights = _save(timm.create_model("resnet10t", num_classes=3), tmp_path / "w.safetensors")
    line = _refusal(_attach(weights, data, tmp_path), capsys)
    assert "has one class (blue) in train/: a classifier needs at least two classes" in line


def test_a_size_the_network_cannot_take_names_sizes_that_work(tmp_path: Path, image_folder: Path, capsys,
                                                              no_long_step) -> None:  # fmt: skip
    import timm

    weights = _save(timm.create_model("resnet10t", num_classes=3), tmp_path / "w.safetensors")
    line = _refusal(_attach(weights, image_folder, tmp_path, "--image-size", "1"), capsys)
    assert "cannot take 1x1 inputs" in line and "sizes that work: 32, 64" in line
    vit = timm.create_model("test_vit", num_classes=3, img_size=32)
    weights = _save(vit, tmp_path / "vit.safetensors")
    line = _refusal(_attach(weights, image_folder, tmp_path, "--image-size", "64", model="test_vit"), capsys)
    assert "cannot take 64x64 inputs" in line and "sizes that work: 32." in line  # the weights' position embeddings
    assert "pos_embed" in line


def test_files_that_are_not_weights_are_refused_with_the_reason(tmp_path: Path, image_folder: Path, capsys,
                                                                no_long_step) -> None:  # fmt: skip
    import timm

    line = _refusal(_attach(str(tmp_path / "absent.pt"), image_folder, tmp_path), capsys)
    assert f"weights file '{tmp_path / 'absent.pt'}' not found (a path to the file)" in line
    torch.save(timm.create_model("resnet10t", num_classes=3), tmp_path / "model.pth")  # the whole module: a pickle
    line = _refusal(_attach(str(tmp_path / "model.pth"), image_folder, tmp_path), capsys)
    assert "holds pickled Python objects, not only tensors" in line and "nothing in the file was executed" in line


def test_match_by_order_maps_renamed_weights_and_prints_the_mapping(tmp_path: Path, image_folder: Path) -> None:
    import timm

    from laya.training.attach import AttachConfig
    from laya.training.preflight import preflight

    network = timm.create_model("resnet10t", num_classes=3).eval()
    renamed = {f"port.{i}": v for i, v in enumerate(network.state_dict().values())}
    torch.save(renamed, tmp_path / "port.pt")  # keeps the order (a safetensors file's is its own)
    config = dict(family="timm", model="resnet10t", weights=str(tmp_path / "port.pt"),
                  dataset=str(image_folder), image_size=32)  # fmt: skip
    with pytest.raises(ValueError, match="missing from the file"):
        preflight(AttachConfig(**config))
    checked = preflight(AttachConfig(**config, weights_by_order=True), echo=False)
    assert checked.backbone.weights_mapping[0] == ("port.0", "conv1.0.weight")
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(checked.backbone.eval().model(x), network(x))


def test_a_lightning_checkpoint_attaches_with_its_prefix_stripped_and_says_so(tmp_path: Path, image_folder: Path,
                                                                             capsys) -> None:  # fmt: skip
    import timm

    from laya.training.attach import AttachConfig
    from laya.training.preflight import preflight

    network = timm.create_model("resnet10t", num_classes=3).eval()
    state = {f"model.{k}": v for k, v in network.state_dict().items()}
    torch.save({"state_dict": state, "epoch": 3, "optimizer_states": [{"state": {}, "param_groups": [{"lr": 0.1}]}],
                "lr_schedulers": []}, tmp_path / "last.ckpt")  # fmt: skip
    config = AttachConfig(family="timm", model="resnet10t", weights=str(tmp_path / "last.ckpt"),
                          dataset=str(image_folder), image_size=32)  # fmt: skip
    checked = preflight(config)
    assert capsys.readouterr().err.splitlines() == [
        f"weights: read the entry 'state_dict' of last.ckpt; stripped the prefix 'model.' from {len(state)} keys"
    ]
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(checked.backbone.eval().model(x), network(x))


def test_a_prefix_is_stripped_only_when_shared_and_a_misfit_is_named(tmp_path: Path, image_folder: Path, capsys,
                                                             no_long_step) -> None:  # fmt: skip
    import timm

    state = {f"module.{k}": v for k, v in timm.create_model("resnet10t", num_classes=3).state_dict().items()}
    state["criterion.weight"] = torch.ones(3)  # one key outside the wrapper: nothing is stripped
    torch.save(state, tmp_path / "ddp.pt")
    line = _refusal(_attach(str(tmp_path / "ddp.pt"), image_folder, tmp_path, "--image-size", "32"), capsys)
    assert "missing from the file (conv1.0.weight" in line and "not in the architecture (module.conv1.0.weight" in line
    state.pop("criterion.weight")
    state["module.fc.weight"] = torch.zeros(10, state["module.fc.weight"].shape[1])  # shared, 10 classes
    state["module.fc.bias"] = torch.zeros(10)
    torch.save(state, tmp_path / "ten.pt")
    line = _refusal(_attach(str(tmp_path / "ten.pt"), image_folder, tmp_path, "--image-size", "32"), capsys)
    assert "the weights' classifier has 10 outputs" in line and "has 3 classes (blue, green, red)" in line


def test_an_unknown_architecture_is_answered_at_once_with_the_closest_names(tmp_path: Path, image_folder: Path,
                                                                            capsys, monkeypatch) -> None:  # fmt: skip
    import time

    import laya.training.preflight as preflight_module

    def no_data(*args, **kwargs):
        raise AssertionError("a dataset was opened before the name was checked")

    monkeypatch.setattr(preflight_module, "load_dataset", no_data)
    (tmp_path / "w.pt").write_bytes(b"not read")
    start = time.process_time()  # CPU seconds: what a shared machine's load does not inflate
    line = _refusal(_attach(str(tmp_path / "w.pt"), image_folder, tmp_path, model="resnet_18"), capsys)
    assert time.process_time() - start < 10
    assert line.startswith("error: timm has no architecture 'resnet_18'; the closest names: 'resnet18'")
    assert line.endswith("(all: timm.list_models())")
    argv = ["attach", "--family", "torchvision", "--model", "resnet_18", "--weights", str(tmp_path / "w.pt"),
            "--dataset", str(image_folder)]  # fmt: skip
    assert "the closest names: 'resnet18'" in _refusal(argv, capsys)
    argv[2], argv[4] = "transformers", "vitt"
    assert "has no architecture 'vitt'; the closest names: 'vit'" in _refusal(argv, capsys)


def test_the_command_answers_an_unknown_architecture_within_10_cpu_seconds(tmp_path: Path, image_folder: Path) -> None:
    """The whole command, Python's start and torch's import included: the child process's CPU seconds (on 2 idle
    cores its wall time; the load of a shared machine stretches the wall time, not these)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    argv = _attach(str(tmp_path / "w.pt"), image_folder, tmp_path, model="resnet_18")
    done = subprocess.run([sys.executable, "-m", "laya", *argv], capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 2 and "the closest names: 'resnet18'" in done.stderr
    assert (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) < 10


def test_attach_help_describes_every_option_with_its_default() -> None:
    from laya.cli import build_parser

    parser = build_parser()
    attach = parser._subparsers._group_actions[0].choices["attach"]
    for action in attach._actions:
        if action.dest == "help":
            continue
        assert action.help, f"{action.option_strings} has no description"
        assert action.required or "default" in action.help, f"{action.option_strings}: no default stated"


def test_version_and_help_answer_without_importing_torch() -> None:
    code = ("import sys, time; t = time.perf_counter(); from laya.cli import build_parser; build_parser(); "
            "print('torch' in sys.modules, time.perf_counter() - t)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "False" and float(out[1]) < 1.0
    version = subprocess.run([sys.executable, "-m", "laya", "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("laya ")


@pytest.mark.parametrize(
    "low, high, p, words",
    [(-0.118, -0.022, 0.12, "significant before correction, not after"), (0.01, 0.05, 0.01, "better"),
     (-0.05, -0.01, 0.03, "worse"), (-0.01, 0.02, 0.001, "tie")],
)  # fmt: skip
def test_the_summary_s_verdict_agrees_with_the_interval_it_prints(low, high, p, words) -> None:
    from laya.training.attach import comparison_words

    assert comparison_words(low, high, p) == words


def test_limit_draws_a_class_balanced_random_sample_and_says_so(tmp_path: Path, image_folder: Path, capsys) -> None:
    import timm

    torch.manual_seed(0)
    weights = _save(timm.create_model("resnet10t", num_classes=3), tmp_path / "mine.safetensors")
    argv = ["--threads", "1", "attach", "--family", "timm", "--model", "resnet10t", "--weights", weights,
            "--dataset", str(image_folder), "--image-size", "32", "--out", str(tmp_path / "out"), "--setting", "m",
            "--heads", "laya", "--depth-heads", "own", "--limit", "6", "--max-epochs", "1", "--resamples", "50",
            "--ig-steps", "4", "--train-limit", "48", "--random-orders", "1", "--timing-batch", "4",
            "--timing-repeats", "1"]  # fmt: skip
    assert main(argv) == 0
    assert "6 test inputs (a class-balanced random sample of the 24, seed 0)" in capsys.readouterr().out
    report = json.loads((tmp_path / "out" / "m" / "own" / "report.json").read_text())
    assert report["class_counts"] == {"blue": 2, "green": 2, "red": 2}


@pytest.mark.parametrize("flag, value", [("--model-kwargs", "[1]"), ("--mean", "a,b")])
def test_bad_flags_are_refused_by_the_parser(flag: str, value: str) -> None:
    with pytest.raises(SystemExit):
        main(["attach", "--family", "timm", "--model", "m", "--weights", "w", "--dataset", "d", flag, value])


def test_an_existing_setting_is_refused_before_any_step_unless_overwrite(tmp_path: Path, image_folder: Path, capsys,
                                                                        no_long_step) -> None:  # fmt: skip
    import time

    import timm

    weights = _save(timm.create_model("resnet10t", num_classes=3), tmp_path / "w.safetensors")
    (tmp_path / "out" / "mine").mkdir(parents=True)
    argv = _attach(weights, image_folder, tmp_path, "--image-size", "32", "--setting", "mine")
    line = _refusal(argv, capsys)
    assert f"the setting folder {tmp_path / 'out' / 'mine'} exists already" in line and "pass --overwrite" in line
    start = time.process_time()
    with pytest.raises(AssertionError, match="a long step started"):  # past the checks: on to the first long step
        main([*argv, "--overwrite"])
    assert time.process_time() - start < 10  # every check, the network built and run once: CPU seconds
    assert (tmp_path / "out" / "mine").is_dir()  # the earlier one is back


def test_torchvision_model_kwargs_are_its_class_s_plain_arguments(tmp_path: Path, image_folder: Path, capsys,
                                                                  no_long_step) -> None:  # fmt: skip
    argv = ["attach", "--family", "torchvision", "--model", "googlenet", "--weights", str(tmp_path / "w.pt"),
            "--dataset", str(image_folder), "--out", str(tmp_path / "out"), "--model-kwargs", '{"blocks": 1}']
    line = _refusal(argv, capsys)
    assert "--model-kwargs: backbone.model_kwargs.blocks = 1: not an allowed argument" in line
    assert "allowed: aux_logits, dropout, dropout_aux, init_weights, num_classes, transform_input" in line


def test_an_attach_stopped_by_sigterm_leaves_the_earlier_setting_as_it_was(tmp_path: Path, image_folder: Path) -> None:
    """A scheduler's or torchrun's stop (SIGTERM) unwinds like Ctrl-C: the setting being written is removed, the one
    it replaces (``--overwrite``) put back, no hidden folder left; one line says so, exit status 143."""
    import os
    import signal
    import time

    import timm

    torch.manual_seed(0)
    weights = _save(timm.create_model("resnet10t", num_classes=3), tmp_path / "mine.pth")
    earlier = tmp_path / "out" / "mine"
    earlier.mkdir(parents=True)
    (earlier / "kept.txt").write_text("the earlier setting")
    argv = [sys.executable, "-m", "laya", "--threads", "1", *_attach(weights, image_folder, tmp_path, "--setting", "mine",
            "--overwrite", "--image-size", "32", "--max-epochs", "1")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while not (earlier / "examples").is_dir() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the new setting is being written in place of the earlier one
    assert child.poll() is None, child.communicate()
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "stopped by signal 15: nothing half-written is left" in err and "Traceback" not in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["mine"]
    assert sorted(p.name for p in earlier.iterdir()) == ["kept.txt"]
