"""``laya patch``: activation patching over pairs of test inputs of one class (correct <- misclassified)."""

from __future__ import annotations

import argparse
from pathlib import Path

from laya.cli.options import checkpoint_option, resamples_option


def cmd_patch(args: argparse.Namespace) -> None:
    import torch

    from laya.analysis.patching import effect_table, patch_backbone, patch_head
    from laya.data.features import hidden_states, image_batches
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
        x = next(image_batches(test.images, [torch.cat([targets, sources])]))
        x = checkpoint.preprocess(x)
        effects = patch_backbone(model, x[:n], x[n:])
    table = effect_table(effects, names, c, pred[sources], args.resamples)
    print(f"patching {args.where}: {n} pairs (target: correct {classes[c]!r}, source: {kind}); mean change per "
          "layer, 95% bootstrap CI over pairs; logit diff = target's class - source's prediction")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)


def add_patch(sub: argparse._SubParsersAction) -> None:
    """Register ``patch``."""
    pa = sub.add_parser(
        "patch", help="activation patching over pairs of test inputs of one class (correct <- misclassified)",
        parents=[checkpoint_option(), resamples_option()],
    )  # fmt: skip
    pa.add_argument("--where", choices=["head", "backbone"], default="head",
                    help="head: direct effect (hidden state handed to the head); backbone: total effect")  # fmt: skip
    pa.add_argument("--label", help="true class of the pairs (default: the class with the most errors)")
    pa.add_argument("--source-label", help="sources: inputs of this class (default: misclassified inputs of --label)")
    pa.add_argument("--pairs", type=int, default=50, help="at most this many pairs")
    pa.add_argument("--limit", type=int, default=1000, help="first N test inputs to draw pairs from")
    pa.add_argument("--batch-size", type=int, default=256)
    pa.add_argument("--out", help="write the table to this CSV file")
    pa.set_defaults(func=cmd_patch)


__all__ = ["add_patch", "cmd_patch"]
