"""LAYA head vs LastLayer head on the same backbone: parameter count and forward-time overhead.

    python benchmarks/head_overhead.py [--threads 1]

Uses the bundled Fashion-MNIST reference MLP checkpoints (784-512-256-128); both heads run on
the *same* backbone weights, so the difference is the head alone. Measured in one run.
"""

from __future__ import annotations

import torch
from common import parser, seconds, test_images

from laya.model.checkpoint import load_checkpoint


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    torch.set_num_threads(args.threads)
    laya = load_checkpoint(f"{args.models}/fashion-mnist-mlp/laya")
    last = load_checkpoint(f"{args.models}/fashion-mnist-mlp/lastlayer")
    backbone = laya.model.backbone
    print(
        f"backbone {laya.meta.backbone.widths}: {count(backbone):,} parameters; torch threads {torch.get_num_threads()}"
    )
    print(
        f"LAYA head      {count(laya.model.head):>9,} parameters ({count(laya.model.head) / count(backbone):.1%} of the backbone)"
    )
    print(f"LastLayer head {count(last.model.head):>9,} parameters")
    print(f"{'batch':>6} {'LastLayer ms':>13} {'LAYA ms':>9} {'LAYA / LastLayer':>17}")
    for batch in (1, 128, 1024):
        images, _ = test_images(laya, batch)
        x = laya.preprocess(images)
        with torch.inference_mode():
            t_last = seconds(lambda: last.model.head(backbone(x)))
            t_laya = seconds(lambda: laya.model.head(backbone(x)))
        print(f"{batch:>6} {t_last * 1e3:>13.3f} {t_laya * 1e3:>9.3f} {t_laya / t_last:>16.2f}x")


if __name__ == "__main__":
    main()
