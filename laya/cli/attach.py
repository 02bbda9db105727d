"""``laya attach``: the command line of :mod:`laya.training.attach` (its parser and what it runs)."""

from __future__ import annotations

import argparse

from laya.cli.options import (
    csv,
    csv_floats,
    gradcam_option,
    lens_options,
    lens_settings,
    lesion_options,
    lesion_settings,
    resamples_option,
    sigterm_as_interrupt,
)

FAMILY_HELP = "where the architecture comes from: timm | torchvision | transformers (a model_type)"


def _kwargs(text: str) -> dict:
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        example = '{"hidden_size": 192}'
        raise argparse.ArgumentTypeError(f"expected a JSON object, e.g. '{example}'; got {text!r}") from error
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object; got {text!r}")
    return value


def add_attach(sub: argparse._SubParsersAction) -> None:
    """Register ``attach`` (flags for the network, the data, the heads' recipe and the analyses' sizes)."""
    a = sub.add_parser(
        "attach",
        help="your trained classifier, as it is: its own head plus LAYA, ScalarMix, Concat -> a dashboard folder",
        description="Attach a trained classifier (architecture + weights file): its own classifier becomes a "
        "LastLayer head with its exact weights; LAYA, ScalarMix and Concat are fitted on its frozen features; all "
        "four are evaluated and analysed, and a summary is printed.",
        parents=[resamples_option("bootstrap resamples for every CI (default: 1000)"), lens_options(),
                 gradcam_option(), lesion_options()],
    )
    a.add_argument("--family", required=True, choices=["timm", "torchvision", "transformers"], help=FAMILY_HELP)
    a.add_argument("--model", required=True, help="architecture name (timm/torchvision) or model_type (transformers)")
    a.add_argument("--weights", required=True,
                   help="your weights: a .safetensors file, or a .pth/.pt/.ckpt state dict or training checkpoint "
                   "(tensors only are read; a pickled model is refused; FILE#state_dict_ema reads that entry; a key "
                   "prefix such as 'module.' is stripped where the rest fits by name), or with --family transformers "
                   "a Trainer's output folder (config.json + model.safetensors)")
    a.add_argument("--match-by-order", action="store_true",
                   help="match the file's tensors to the architecture's in order, not by name, and print the mapping "
                   "(default: by name; any missing, unexpected or mismatched key is refused)")
    a.add_argument("--dataset", required=True, help="ImageFolder directory (train/, test/) | fashion-mnist | cifar10")
    a.add_argument("--out", default="attached", help="folder the setting is written into (default: attached)")
    a.add_argument("--setting", help="name of the setting folder (default: <dataset>-<model>)")
    a.add_argument("--overwrite", action="store_true",
                   help="replace an existing setting folder, once the new one is written whole (default: an existing "
                   "one is refused)")
    a.add_argument("--image-size", type=int,
                   help="side of the images the network sees, the one it was trained at (default: the dataset's; "
                   "ImageFolder: 32)")
    a.add_argument("--mean", type=csv_floats, help="input normalisation per channel (default: ImageNet's for RGB, else 0.5)")
    a.add_argument("--std", type=csv_floats, help="input normalisation per channel (default: ImageNet's for RGB, else 0.5)")
    a.add_argument("--model-kwargs", type=_kwargs, default={},
                   help="architecture arguments, JSON (default: none): timm's create_model arguments, a transformers "
                   "config's, a torchvision class's plain ones (googlenet '{\"aux_logits\": false}'; an unknown one is "
                   "refused with those allowed)")
    a.add_argument("--layers", type=csv, help="torchvision: graph nodes to read (default: the stages)")
    a.add_argument("--heads", type=csv, default=["laya", "scalarmix", "concat"],
                   help="heads fitted beside the own one (default: laya,scalarmix,concat)")
    a.add_argument("--depth-heads", type=csv, default=["own", "laya"],
                   help="heads whose depth analytics run (default: own,laya)")
    a.add_argument("--lr", type=float, default=3e-4, help="learning rate of the fitted heads (default: 3e-4)")
    a.add_argument("--patience", type=int, default=5,
                   help="epochs without a better validation accuracy before a fitted head stops (default: 5)")
    a.add_argument("--max-epochs", type=int, default=50, help="most epochs a fitted head trains (default: 50)")
    a.add_argument("--val-fraction", type=float, default=0.1,
                   help="share of the training split held out for early stopping (default: 0.1)")
    a.add_argument("--ig-steps", type=int, default=32,
                   help="integrated-gradients steps of the post-hoc layer attributions (default: 32)")
    a.add_argument("--limit", type=int,
                   help="evaluate N test inputs, a class-balanced random sample drawn with seed 0 (the depth analytics "
                   "take N of a seeded random permutation); default: all")
    a.add_argument("--train-limit", type=int, default=3000,
                   help="training inputs the depth analytics fit on (default: 3000)")
    a.add_argument("--random-orders", type=int, default=10,
                   help="depth analytics: random pruning orders (default: 10)")
    a.add_argument("--timing-batch", type=int, default=64,
                   help="depth analytics: inputs per timed batch, at most: fewer where one forward of them would "
                   "last over a quarter second (default: 64)")
    a.add_argument("--timing-repeats", type=int, default=7,
                   help="timed repeats of the depth analytics' layer costs and the network report's Grad-CAM costs "
                   "(default: 7)")
    a.add_argument("--network-limit", type=int, default=200,
                   help="network report: test inputs explained unit by unit, a class-balanced sample drawn with seed 0 "
                   "(default: 200)")
    a.add_argument("--budget", type=float, default=3.0,
                   help="network report: forward passes over the training and test images it may cost, counted in "
                   "rows through the network; its samples (--network-limit, --gradcam-sample, --lesion-limit) are "
                   "capped to fit, and the summary says what was capped; 0: no cap (default: 3)")
    a.add_argument("--no-network", action="store_true",
                   help="skip the tuned lens and the network report (default: both are written beside the own head)")
    a.set_defaults(func=cmd_attach)


def cmd_attach(args: argparse.Namespace) -> None:
    import shlex
    import sys

    from laya.analysis.depth.report import DepthOptions
    from laya.analysis.evaluate import EvalOptions
    from laya.analysis.network.report import NetworkOptions
    from laya.model.sharding import quiet_unless_main, torchrun_placement
    from laya.training.attach import AttachConfig, attach, summary

    network = None if args.no_network else NetworkOptions(limit=args.network_limit, resamples=args.resamples,
                                                          gradcam_sample=args.gradcam_sample,
                                                          timing_repeats=args.timing_repeats, budget=args.budget,
                                                          **lens_settings(args), **lesion_settings(args))

    config = AttachConfig(
        family=args.family, model=args.model, weights=args.weights, weights_by_order=args.match_by_order,
        dataset=args.dataset, out=args.out, setting=args.setting, overwrite=args.overwrite,
        image_size=args.image_size, mean=args.mean, std=args.std, model_kwargs=args.model_kwargs, layers=args.layers,
        heads=tuple(args.heads), depth_heads=tuple(args.depth_heads), lr=args.lr, patience=args.patience,
        max_epochs=args.max_epochs, val_fraction=args.val_fraction,
        evaluation=EvalOptions(resamples=args.resamples, ig_steps=args.ig_steps, limit=args.limit),
        depth=DepthOptions(limit=args.limit, train_limit=args.train_limit, resamples=args.resamples,
                           random_orders=args.random_orders, timing_batch=args.timing_batch,
                           timing_repeats=args.timing_repeats),
        network=network, command="laya " + shlex.join(sys.argv[1:]),
    )  # fmt: skip
    place = torchrun_placement()  # under torchrun: the passes that grow with the data split between the processes
    with quiet_unless_main(place), sigterm_as_interrupt():  # stopped: the setting is left as it was
        attached = attach(config)
    if place.main:
        print(summary(attached, args.resamples))


__all__ = ["add_attach", "cmd_attach"]
