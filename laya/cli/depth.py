"""``laya depth`` (depth analytics), ``laya lens`` (its per-layer lens alone) and ``laya exits`` (measured early
exit and truncated models): the commands that act on a checkpoint's depth."""

from __future__ import annotations

import argparse
from pathlib import Path

from laya.cli.options import (
    allow_import_option,
    checkpoint_option,
    csv_floats,
    csv_ints,
    inputs_or_all,
    out_option,
    resamples_option,
)
from laya.progress import progress_bar


def cmd_depth(args: argparse.Namespace) -> None:
    from laya.analysis.depth.report import DepthOptions, refresh_detection, run_depth
    from laya.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint, allow_import=args.allow_import)
    if args.only == "detection":
        out = args.out or checkpoint.path
        report = refresh_detection(checkpoint, out, progress_bar(f"detection of {checkpoint.name}"))
        _refresh_sample(checkpoint, Path(out))
        print(f"detection refreshed ({report['covariance']} Mahalanobis) with {report['command']!r}'s options -> {out}")
        return
    options = DepthOptions(
        limit=args.limit, train_limit=args.train_limit, resamples=args.resamples, readout=args.readout,
        random_orders=args.random_orders, timing_batch=args.timing_batch, timing_repeats=args.timing_repeats,
    )  # fmt: skip
    out = args.out or checkpoint.path
    report = run_depth(checkpoint, options, progress_bar(f"depth analytics of {checkpoint.name}"), out)
    _refresh_sample(checkpoint, Path(out))
    saved = report["early_exit"]["at_1pt"]["saved"]
    depth = next(r for r in report["prediction_depth"] if r["class"] == "all")
    print(
        f"accuracy {report['accuracy']:.4f}  prediction depth {depth['prediction_depth']:.2f}  "
        f"overthinking {depth['overthinking_rate']:.3f}  compute saved at <=1 pt (estimate) {saved:.1%}  -> {out}"
    )


def cmd_lens(args: argparse.Namespace) -> None:
    from laya.analysis.depth.layer_lens import write_lens
    from laya.analysis.depth.report import LensOptions, lens_report
    from laya.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint, allow_import=args.allow_import)
    options = LensOptions(limit=args.limit, train_limit=args.train_limit, resamples=args.resamples,
                          readout=args.readout)  # fmt: skip
    table = lens_report(checkpoint, options, progress_bar(f"lens of {checkpoint.name}"))
    out = write_lens(table, args.out or checkpoint.path)
    overall = table[table["class"] == "all"]
    print(f"per-layer lens ({table['readout'].iloc[0]}), {int(overall['n'].iloc[0])} test inputs, all classes; "
          "mean [95% bootstrap CI]")  # fmt: skip
    for row in overall.to_dict("records"):
        print(f"  {row['layer']:>12}  KL {row['kl']:.3f} [{row['kl_low']:.3f}, {row['kl_high']:.3f}]  "
              f"p(final) {row['prob']:.3f}  rank {row['rank']:.2f}  entropy {row['entropy']:.3f}")
    print(f"-> {out}")



def cmd_exits(args: argparse.Namespace) -> None:
    from laya.analysis.depth.exits import ExitRunOptions
    from laya.analysis.depth.exits_record import load_exits
    from laya.analysis.depth.measured import MeasureOptions, measure, merge_exits, write_exits
    from laya.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint)
    runs = ExitRunOptions(batch_sizes=tuple(args.batch_sizes), repeats=args.repeats, resamples=args.resamples,
                          min_seconds=args.min_seconds)  # fmt: skip
    options = MeasureOptions(limit=args.limit, train_limit=args.train_limit, truncation=not args.no_truncation,
                             runs=runs, trained=None if args.trained == "none" else args.trained)  # fmt: skip
    if args.thresholds:
        options.thresholds = tuple(args.thresholds)
    if args.alpha_levels:
        options.alpha_levels = tuple(args.alpha_levels)
    out = Path(args.out or checkpoint.path)
    previous = load_exits(out) if args.readout_only else None
    if args.readout_only:
        if previous is None:
            raise FileNotFoundError(f"--readout-only keeps the other runs of an existing {out / 'exits.json'}; "
                                    "there is none")  # fmt: skip
        options.trained, options.truncation = None, False
    report = measure(checkpoint, options)
    if previous is not None:
        report = merge_exits(report | {"command": f"{report['command']} --readout-only"}, previous)
    write_exits(report, out)
    print(f"measured early exit and truncation of {checkpoint.name} in {report['seconds']:.0f} s -> {out}")


def _refresh_sample(checkpoint, out: Path) -> None:
    """After ``depth``: rewrite an existing browser sample, now with prediction depth and every detection score."""
    from laya.analysis.sample import refresh_sample

    path = refresh_sample(checkpoint, out)
    if path is not None:
        print(f"browser sample updated with depth columns -> {path}")



def add_lens(sub: argparse._SubParsersAction) -> None:
    """Register ``lens``."""
    le = sub.add_parser(
        "lens", help="only the per-layer lens of the depth command (lens.csv beside the checkpoint): cheap",
        parents=[checkpoint_option(), out_option(), allow_import_option(), resamples_option()],
    )  # fmt: skip
    le.add_argument("--limit", type=inputs_or_all, default=2000, help="test inputs (depth's seeded subset); default 2000; all: the whole split")
    le.add_argument("--train-limit", type=inputs_or_all, default=3000,
                    help="training inputs for probes, only where no depth fit is stored")  # fmt: skip
    le.add_argument("--readout", choices=["own", "probes"], default="own",
                    help="own: LAYA/ScalarMix through their classifier; probes: fitted probes for every head")  # fmt: skip
    le.set_defaults(func=cmd_lens)


def add_depth(sub: argparse._SubParsersAction) -> None:
    """Register ``depth``."""
    d = sub.add_parser(
        "depth", help="readouts, prediction depth, early exit, pruning, error/OOD detection -> depth.json + CSVs",
        parents=[checkpoint_option(), out_option(), allow_import_option(), resamples_option()],
    )  # fmt: skip
    d.add_argument("--limit", type=inputs_or_all, default=2000, help="test inputs (and inputs per OOD set); default 2000; all: the whole split")
    d.add_argument("--train-limit", type=inputs_or_all, default=3000, help="training inputs for probes and Mahalanobis")
    d.add_argument("--random-orders", type=int, default=10,
                   help="random layer-removal orders in the pruning curves (their mean is the random control)")
    d.add_argument("--timing-batch", type=int, default=64,
                   help="test inputs timed per forward pass for the early-exit cost estimate, at most: fewer where "
                   "one forward of them would last over a quarter second")
    d.add_argument("--timing-repeats", type=int, default=7,
                   help="round-robin timings of each truncated backbone (fastest kept); 1-2 suffice on small data")
    d.add_argument(
        "--readout", choices=["own", "probes"], default="own",
        help="per-layer readouts: 'own' = LAYA/ScalarMix's own classifier, fitted probes for Concat/LastLayer; "
        "'probes' = fitted probes for every head (same kind across heads; the report always also holds the "
        "fitted-probe prediction depth of every head)",
    )  # fmt: skip
    d.add_argument("--only", choices=["detection"],
                   help="recompute only this block of the existing depth.json, with the options it was run with "
                   "(the limits and resamples above are ignored); a Mahalanobis fitted by an older estimator is refitted")
    d.set_defaults(func=cmd_depth)


def add_exits(sub: argparse._SubParsersAction) -> None:
    """Register ``exits``."""
    e = sub.add_parser(
        "exits", help="measured early-exit runs (readouts, trained exits, α policy) and truncated models -> exits.json",
        parents=[checkpoint_option(), out_option(), resamples_option()],
    )  # fmt: skip
    e.add_argument("--limit", type=inputs_or_all, default=2000, help="test inputs (the depth analytics' subset); default 2000; all: the whole split")
    e.add_argument("--train-limit", type=inputs_or_all, default=3000, help="training inputs for the trained exits and re-fits")
    e.add_argument("--batch-sizes", type=csv_ints, default=[1, 64, 1024], help="batch sizes timed; default 1,64,1024")
    e.add_argument("--thresholds", type=csv_floats, help="confidence thresholds (default 0.5,0.7,0.8,0.9,0.95,0.97,0.99,0.999)")
    e.add_argument("--alpha-levels", type=csv_floats, help="α-profile exit levels (LAYA; default 0.2,0.4,0.6,0.8)")
    e.add_argument("--repeats", type=int, default=3, help="timed runs per measurement (the fastest is kept)")
    e.add_argument("--min-seconds", type=float, default=0.2,
                   help="shortest timing: a shorter run is repeated within one timing until it lasts this long")  # fmt: skip
    e.add_argument("--trained", choices=["mlp", "linear", "none"], default="mlp", help="trained exits' kind")
    e.add_argument("--no-truncation", action="store_true", help="skip the truncated models")
    e.add_argument("--readout-only", action="store_true",
                   help="re-measure the readout exits only, keeping the other runs of the exits.json already in --out")  # fmt: skip
    e.set_defaults(func=cmd_exits)


__all__ = ["add_depth", "add_exits", "add_lens", "cmd_depth", "cmd_exits", "cmd_lens"]
