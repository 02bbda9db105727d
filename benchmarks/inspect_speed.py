"""Dashboard Inspect page: model time from uploaded bytes to every number shown, vs one plain forward.

    python benchmarks/inspect_speed.py [--threads 1]

For each bundled checkpoint and its first example image (PNG bytes): decode + preprocess +
backbone + prediction + layer scores + leave-one-layer-out for every layer + Spearman +
Deletion@1 (``laya.analysis.explain.explain_bytes``), against one plain forward of the same model on
the already-decoded image. Heads without intrinsic scores also compute Integrated Gradients
(32 steps), which the page shows in their place. Target: <= 1.5x. Measured in one run: the fastest
of 100 calls of each, alternating, so that load changes affect both alike.
"""

from __future__ import annotations

from pathlib import Path

import torch
from common import interleaved_seconds, parser

from laya.analysis.attribution import intrinsic_method
from laya.analysis.explain import explain_bytes
from laya.app.catalog import example_images, find_checkpoints
from laya.data.images import load_image_tensor
from laya.model.checkpoint import load_checkpoint


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads {torch.get_num_threads()}")
    print(f"{'model':<40} {'forward ms':>10} {'Inspect ms':>10} {'ratio':>7}  scores")
    for entry in find_checkpoints(args.models):
        ck = load_checkpoint(entry.path)
        example = example_images(entry.path)[0]
        data = Path(example).read_bytes()
        image = load_image_tensor(data, ck.meta.input.channels, ck.meta.input.source_size)

        def plain():
            with torch.inference_mode():
                return ck.model(ck.preprocess(image.unsqueeze(0)))

        def inspect():
            e = explain_bytes(ck, data)
            method = e.primary
            return (
                e.label,
                e.confidence,
                e.scores[method],
                e.drops,
                e.loo.flipped,
                e.spearman(method),
                e.deletion_at_1(method),
            )

        t_plain, t_inspect = interleaved_seconds({"plain": plain, "inspect": inspect}, rounds=100).values()
        kind = "intrinsic" if intrinsic_method(ck.model.head) else "IG-32 (no intrinsic scores)"
        name = f"{entry.path.parent.name}/{entry.head}"
        print(f"{name:<40} {t_plain * 1e3:>10.2f} {t_inspect * 1e3:>10.2f} {t_inspect / t_plain:>6.2f}x  {kind}")


if __name__ == "__main__":
    main()
