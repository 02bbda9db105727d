"""laya.cli.options: an option several commands take is written once, as a parent parser, and every command that
takes it gets the same option (flags, help, default)."""

import argparse
import re
from pathlib import Path

from laya.cli import build_parser

CLI = Path(__file__).resolve().parents[2] / "laya" / "cli"
SHARED = {"--checkpoint": {"lens", "network", "evaluate", "depth", "exits", "patch"},
          "--allow-import": {"lens", "network", "evaluate", "depth", "dashboard"},
          "--resamples": {"lens", "network", "evaluate", "benchmark", "depth", "exits", "patch", "reproduce", "bundle",
                          "attach"},
          "--device": {"train", "evaluate", "benchmark", "reproduce", "bundle"},
          "--lens-sample": {"network", "attach"},
          "--gradcam-sample": {"network", "attach"}}  # fmt: skip


def commands() -> dict[str, argparse.ArgumentParser]:
    return next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_each_shared_option_is_written_once_in_the_package() -> None:
    sources = "".join(p.read_text() for p in sorted(CLI.glob("*.py")))
    written = {name: len(re.findall(rf'add_argument\(\s*"{name}"', sources)) for name in SHARED}
    assert written == {"--checkpoint": 1, "--allow-import": 2, "--resamples": 1, "--device": 1, "--lens-sample": 1,
                       "--gradcam-sample": 1}
    # --allow-import twice: the dashboard's says "in --models ... (never uploads)", not the checkpoint's wording


def test_the_commands_that_take_a_shared_option_get_it_from_its_parent() -> None:
    parsers = commands()
    for name, expected in SHARED.items():
        having = {command for command, parser in parsers.items() if name in parser._option_string_actions}
        assert having == expected, name
    evaluate, depth = parsers["evaluate"]._option_string_actions, parsers["depth"]._option_string_actions
    assert evaluate["--checkpoint"].help == depth["--checkpoint"].help == (
        "checkpoint directory (model.json + model.safetensors)")  # fmt: skip
    assert evaluate["--checkpoint"].required and depth["--resamples"].default == 1000
    assert parsers["network"]._option_string_actions["--checkpoint"].help.startswith("the own head's checkpoint")


def test_the_gradcam_sample_defaults_to_the_library_s() -> None:
    """Written as a number to keep ``--help`` free of torch: it must stay the library's default."""
    from laya.analysis.network.gradcam_choice import SAMPLE
    from laya.analysis.network.report import NetworkOptions

    for command in ("network", "attach"):
        assert commands()[command]._option_string_actions["--gradcam-sample"].default == SAMPLE, command
    assert NetworkOptions().gradcam_sample == SAMPLE


def test_the_budget_defaults_to_the_library_s() -> None:
    """``laya attach --budget`` is the library's attach budget (and an AttachConfig's); ``laya network`` caps nothing."""
    from laya.analysis.network.budget import ATTACH
    from laya.training.attach_config import AttachConfig

    assert commands()["attach"]._option_string_actions["--budget"].default == ATTACH
    assert AttachConfig("timm", "resnet18", "w.safetensors", "data").network.budget == ATTACH
    assert commands()["network"]._option_string_actions["--budget"].default == 0


def test_the_network_timing_repeats_default_to_the_library_s() -> None:
    """``laya network --timing-repeats`` (written without importing torch) is the Grad-CAM cost timing's default."""
    from laya.analysis.network.gradcam_choice import REPEATS
    from laya.analysis.network.report import NetworkOptions

    assert commands()["network"]._option_string_actions["--timing-repeats"].default == REPEATS
    assert NetworkOptions().timing_repeats == REPEATS
