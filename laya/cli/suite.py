"""``laya benchmark``, ``laya reproduce`` and ``laya bundle``: a setting's heads over seeds, and the bundled
checkpoints built from them."""

from __future__ import annotations

import argparse
from pathlib import Path

from laya.cli.options import csv, csv_ints, evaluation_options, to_eval_options
from laya.progress import progress_bar


def _setting(name: str) -> Setting:  # noqa: F821
    from laya.training.settings import SETTINGS

    if name not in SETTINGS:
        raise ValueError(f"unknown setting {name!r}; expected one of {sorted(SETTINGS)}")
    return SETTINGS[name]


def cmd_benchmark(args: argparse.Namespace) -> None:
    from laya.training.suite import results_table, run_suite, write_summary

    setting = _setting(args.suite)
    runs = run_suite(setting, args.runs, args.seeds, args.heads, to_eval_options(args), args.device, args.stream)
    out = write_summary(
        results_table(runs), Path(args.out or Path(args.runs) / setting.name), setting.description, runs
    )
    print((out / "summary.md").read_text())


def cmd_reproduce(args: argparse.Namespace) -> None:
    from laya.analysis.depth.report import run_depth
    from laya.data.datasets import load_dataset
    from laya.training.bundle import bundle, export_examples, update_model_card
    from laya.training.suite import results_table, run_suite, write_summary

    setting = _setting(args.setting)
    runs = run_suite(setting, args.runs, args.seeds, args.heads, to_eval_options(args), args.device, args.stream)
    dest = Path(args.models) / setting.name
    write_summary(results_table(runs), dest, setting.description, runs)
    test = load_dataset(setting.template.dataset, "test", setting.template.image_size)
    export_examples(test, dest / "examples", per_class=1)
    bundle_seed = min(args.seeds or setting.seeds)
    for head in args.heads or setting.heads:
        run = Path(setting.config(head, bundle_seed, Path(args.runs)).out)
        bundle(run, dest / head, test, to_eval_options(args), progress_bar(f"bundling {head}"))
        run_depth(dest / head, progress=progress_bar(f"depth analytics of {head}"))
    update_model_card(args.models)
    print(f"bundled {setting.name} into {dest}; model card: {Path(args.models) / 'README.md'}")


def cmd_bundle(args: argparse.Namespace) -> None:
    from laya.training.bundle import refresh_setting, summary_seeds, update_model_card

    for setting in args.settings:
        dest = refresh_setting(setting, to_eval_options(args), progress_bar, resume=args.resume)
        seeds = summary_seeds(dest)
        kept = (
            f"; kept its {seeds}-seed summary (rebuild it with `python -m laya reproduce`)"
            if seeds > 1
            else ", summary"
        )
        print(f"re-evaluated {dest}: reports, expected outputs{kept}")
    update_model_card(Path(args.settings[0]).parent)



def add_benchmark(sub: argparse._SubParsersAction) -> None:
    """Register ``benchmark``."""
    b = sub.add_parser("benchmark", help="train + evaluate all heads over seeds; mean ± std table",
                       parents=[evaluation_options()])  # fmt: skip
    b.add_argument("--suite", required=True, help="a setting name from laya.training.settings.SETTINGS")
    b.add_argument("--seeds", type=csv_ints, help="default: the setting's seeds")
    b.add_argument("--heads", type=csv, help="default: all four heads")
    b.add_argument("--runs", default="runs", help="where runs are written (resumable)")
    b.add_argument("--out", help="table directory (default: RUNS/<suite>)")
    b.set_defaults(func=cmd_benchmark)


def add_reproduce(sub: argparse._SubParsersAction) -> None:
    """Register ``reproduce``."""
    r = sub.add_parser("reproduce", help="benchmark a setting, then bundle its seed-0 checkpoints into models/",
                       parents=[evaluation_options()])  # fmt: skip
    r.add_argument("setting", help="a setting name from laya.training.settings.SETTINGS")
    r.add_argument("--seeds", type=csv_ints)
    r.add_argument("--heads", type=csv)
    r.add_argument("--runs", default="runs")
    r.add_argument("--models", default="models")
    r.set_defaults(func=cmd_reproduce)


def add_bundle(sub: argparse._SubParsersAction) -> None:
    """Register ``bundle``."""
    u = sub.add_parser(
        "bundle", help="re-evaluate bundled settings in place (models/<setting>): reports, expected.json, summary",
        parents=[evaluation_options()],
    )  # fmt: skip
    u.add_argument("settings", nargs="+", help="bundled setting folders, e.g. models/cifar10-cnn")
    u.add_argument("--resume", action="store_true", help="keep heads already re-evaluated by this version")
    u.set_defaults(func=cmd_bundle)


__all__ = ["add_benchmark", "add_bundle", "add_reproduce", "cmd_benchmark", "cmd_bundle", "cmd_reproduce"]
