"""``laya network``: an attached network by its own units (tuned lens + network report beside its own head)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from laya.cli.options import (
    allow_import_option,
    checkpoint_option,
    gradcam_option,
    lens_options,
    lens_settings,
    lesion_options,
    lesion_settings,
    out_option,
    resamples_option,
)

if TYPE_CHECKING:
    from laya.analysis.network.gradcam_choice import GradcamChoice


def cmd_network(args: argparse.Namespace) -> None:
    import shlex

    from laya.analysis.network.lens_fit import lens_line
    from laya.analysis.network.report import NetworkOptions, run_network
    from laya.analysis.network.scores import SCORE_LABELS
    from laya.model.checkpoint import load_checkpoint
    from laya.model.sharding import quiet_unless_main, torchrun_placement

    place = torchrun_placement()  # under torchrun: the lens sample and the test inputs split between the processes
    checkpoint = load_checkpoint(args.checkpoint, map_location=place.device, allow_import=args.allow_import)
    options = NetworkOptions(limit=args.limit, references=args.references, method=args.method, branch=args.branch,
                             ig_steps=args.ig_steps, resamples=args.resamples, **lesion_settings(args),
                             gradcam_sample=args.gradcam_sample, timing_repeats=args.timing_repeats, budget=args.budget,
                             **lens_settings(args))  # fmt: skip
    out = Path(args.out or checkpoint.path)
    with quiet_unless_main(place):  # the main process alone writes and prints
        report = run_network(checkpoint, options, "laya " + shlex.join(sys.argv[1:]), args.refit_lens, dest=out,
                             write=place.main)  # fmt: skip
    if not place.main:
        return
    lens = lens_line(report.units, report.lens_agrees, report.lens.get("fit", {}))
    print(f"{len(report.indices)} test inputs, {len(report.units)} units.\n{lens}\n"
          "Per-input Spearman with the interventions over the units that keep the input [95% bootstrap CI]; trusted: "
          "beats both baselines (paired bootstrap):")
    for row in report.agreement.itertuples():
        print(f"  {SCORE_LABELS[row.score]:<28} vs {row.intervention:<14} {row.spearman_mean:.3f} "
              f"[{row.ci_low:.3f}, {row.ci_high:.3f}]  n = {row.n}, {row.units} units"
              + ("  trusted" if row.kind == "score" and bool(row.trusted) else ""))
    lesion = report.lesion
    print(f"Lesion study: accuracy {lesion.intact[0]:.3f} intact; per unit, skipped alone (the method named) "
          "[95% bootstrap CI], the drop from intact (paired bootstrap):")
    for row in lesion.single.itertuples():
        print(f"  {row.intervention:<9}{row.unit:<28}{row.method:<14}{row.accuracy:.3f} [{row.low:.3f}, "
              f"{row.high:.3f}]  drop {row.drop:+.3f} [{row.drop_low:+.3f}, {row.drop_high:+.3f}]")
    print("k units that keep the input skipped at once, accuracy over the draws (mean, min to max): " + ", ".join(
        f"k={p.k} {p.mean:.3f} ({p.min:.3f} to {p.max:.3f})" for p in lesion.curve.itertuples()))  # fmt: skip
    if report.gradcam is not None:
        print_gradcam(report.gradcam)
    print(f"-> {out}")


def print_gradcam(choice: GradcamChoice) -> None:
    """Per unit its Grad-CAM minus a random map of its grid on each metric [95 % paired CI] (``*``: beats random),
    the seconds per image of its map alone (and over one forward); then the unit to use."""
    from laya.analysis.network.gradcam_choice import choice_line

    print("Grad-CAM of the predicted class, each unit's map minus a random map of its grid [95% paired bootstrap CI] "
          "(insertion and road: higher is better, deletion: lower; * beats random, Holm-corrected); seconds per image "
          "of the unit's map alone (x one forward):")  # fmt: skip
    beats = choice.beats
    for cost in choice.units.itertuples():
        rows = choice.rows[choice.rows["unit"] == cost.unit]
        cells = [f"{r.metric} {r.diff:+.3f} [{r.diff_low:+.3f}, {r.diff_high:+.3f}]{'*' if beats[r.Index] else ' '}"
                 for r in rows.itertuples()]  # fmt: skip
        print(f"  {cost.unit:<28}{f'{cost.h}x{cost.w}':<7}" + "  ".join(cells)
              + f"  {cost.seconds:.4f} s ({cost.x_forward:.1f}x)")
    print(choice_line(choice))


def add_network(sub: argparse._SubParsersAction) -> None:
    """Register ``network``."""
    nw = sub.add_parser(
        "network", help="an attached network by its own units: tuned lens + network report beside its own head",
        parents=[checkpoint_option("the own head's checkpoint directory (laya attach's own/)"), out_option(),
                 allow_import_option(), resamples_option("bootstrap resamples (default: 1000)"), lens_options(),
                 gradcam_option(), lesion_options()],
    )  # fmt: skip
    nw.add_argument("--limit", type=int, default=200,
                    help="test inputs, a class-balanced sample drawn with seed 0 (default: 200)")
    nw.add_argument("--references", type=int, default=8,
                    help="reference training inputs for resample and the integrated-gradients baseline (default: 8)")
    nw.add_argument("--method", choices=["resample", "skip", "mean"], default="resample",
                    help="the default intervention the cheap scores are compared with (default: resample)")
    nw.add_argument("--branch", choices=["block", "attention", "mlp"], default="block",
                    help="what of each transformer block the interventions act on: the whole block, or its attention "
                    "or MLP branch alone (units without it: the whole block, named so); default: block")  # fmt: skip
    nw.add_argument("--ig-steps", type=int, default=8, help="integrated-gradients steps per unit (default: 8)")
    nw.add_argument("--timing-repeats", type=int, default=5,
                    help="timed repeats of each unit's Grad-CAM cost, the fastest kept (default: 5)")
    nw.add_argument("--budget", type=float, default=0.0,
                    help="forward passes over the training and test images the report may cost, counted in rows "
                    "through the network; --limit, --gradcam-sample and --lesion-limit are capped to fit (default: 0, "
                    "no cap: the sizes as given; laya attach's default is 3)")
    nw.add_argument("--refit-lens", action="store_true",
                    help="fit the tuned lens again (default: the stored one, fitted only where none fits)")
    nw.set_defaults(func=cmd_network)


__all__ = ["add_network", "cmd_network", "print_gradcam"]
