"""``laya evaluate`` (a checkpoint's report) and ``laya sample`` (the test-set browser's sample)."""

from __future__ import annotations

import argparse
from pathlib import Path

from laya.cli.options import (
    allow_import_option,
    checkpoint_option,
    evaluation_options,
    to_eval_options,
)
from laya.progress import progress_bar


def cmd_evaluate(args: argparse.Namespace) -> None:
    from laya.analysis.evaluate import evaluate
    from laya.analysis.report import Report, write_report
    from laya.model.checkpoint import load_checkpoint
    from laya.model.devices import setup_distributed

    place = setup_distributed(args.device)  # under torchrun: one shard of the test set per process
    checkpoint = load_checkpoint(args.checkpoint, map_location=place.device, allow_import=args.allow_import)
    data = checkpoint.load_data("test", args.dataset, stream=args.stream)
    progress = progress_bar(f"evaluating {checkpoint.name}") if place.main else None
    report = evaluate(checkpoint, data, to_eval_options(args), progress)
    if not place.main:
        return
    out = write_report(report, args.out or checkpoint.path)
    samples = _write_sample(checkpoint, data, out, args.sample, report["headline"]["mode"])
    view = Report(report)
    headline = report["headline"]
    faith = view.faithfulness(mode=headline["mode"], reduction=headline["reduction"], metric=headline["metric"])
    acc = report["accuracy_ci"]
    print(
        f"accuracy {acc['estimate']:.4f} [{acc['low']:.4f}, {acc['high']:.4f}]  macro-F1 {report['macro_f1']:.4f}  "
        f"faithfulness[{report['primary_method']}, {headline['metric']}, {headline['mode']}] "
        f"{view.status(mode=headline['mode']) or f'{faith:.3f}'}  -> {out}"
    )
    if samples:
        print(samples)


def _write_sample(checkpoint, data, out: Path, size: int, mode: str | None = None, images_dir=None) -> str:
    """The test-set browser's sample (``sample.safetensors`` + sprite) and, where the checkpoint has none,
    example images (correct and wrong inputs per class); returns what was written, in words."""
    from laya.analysis.sample import EXAMPLES_DIR, Sample, write_examples, write_sample
    from laya.app.catalog import example_images

    if size <= 0:
        return ""
    path = write_sample(checkpoint, data, out, size=size, mode=mode, images_dir=images_dir)
    sample = Sample.load(out)
    said = f"browser sample: {len(sample.table)} test inputs -> {path}"
    if not example_images(out) and not example_images(checkpoint.path):
        written = write_examples(sample, Path(out) / EXAMPLES_DIR)
        said += f"; {len(written)} example images -> {Path(out) / EXAMPLES_DIR}"
    return said


def cmd_sample(args: argparse.Namespace) -> None:
    from laya.analysis.sample import SAMPLE_IMAGES
    from laya.model.checkpoint import load_checkpoint

    for directory in args.checkpoints:
        checkpoint = load_checkpoint(directory)
        data = checkpoint.load_data("test", args.dataset, stream=args.stream)
        shared = Path(directory).parent if (Path(directory).parent / SAMPLE_IMAGES).is_file() or args.shared else None
        print(_write_sample(checkpoint, data, Path(directory), args.size, images_dir=shared))


def add_evaluate(sub: argparse._SubParsersAction) -> None:
    """Register ``evaluate``."""
    e = sub.add_parser("evaluate", help="accuracy, faithfulness, Deletion@1, profiles -> report.json + CSVs",
                       parents=[checkpoint_option(), allow_import_option(), evaluation_options()])  # fmt: skip
    e.add_argument("--dataset", help="default: the checkpoint's dataset")
    e.add_argument("--out", help="report directory (default: the checkpoint's directory)")
    e.add_argument(
        "--sample",
        type=int,
        default=1000,
        help="test inputs kept for the dashboard's test-set browser (class-balanced, seeded; 0 = none)",
    )
    e.set_defaults(func=cmd_evaluate)


def add_sample(sub: argparse._SubParsersAction) -> None:
    """Register ``sample``."""
    s = sub.add_parser(
        "sample", help="(re)write the test-set browser's sample of evaluated checkpoints, without re-evaluating"
    )
    s.add_argument("checkpoints", nargs="+", help="checkpoint directories")
    s.add_argument("--dataset", help="default: each checkpoint's dataset")
    s.add_argument("--size", type=int, default=1000, help="test inputs (class-balanced, seeded)")
    s.add_argument("--shared", action="store_true", help="one thumbnail sheet in the parent folder for all heads")
    s.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None)
    s.set_defaults(func=cmd_sample)


__all__ = ["add_evaluate", "add_sample", "cmd_evaluate", "cmd_sample"]
