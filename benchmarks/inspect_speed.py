"""Dashboard Inspect page: model time from the decoded upload to every number shown, vs one plain forward.

    python benchmarks/inspect_speed.py [--threads 1] [--rounds 100]

For each bundled checkpoint and its first example image, decoded once (``decode ms``: PNG bytes to the uint8
tensor, a cost a plain prediction of an upload pays alike, so it is left out of both sides): Inspect's
explanation as its default view asks for it, ``laya.analysis.head.explain.explain(approximate=False)``: preprocess +
backbone + prediction + layer scores + leave-one-layer-out for every layer + the exact spatial maps of the top
classes (CLS-token layers' approximate maps deferred until their section is opened), then Spearman + Deletion@1,
against one plain forward of the same model on the same decoded image (preprocess + backbone + head + softmax).
``+ OOD``: the same with the uncertainty and OOD scores its status shows under the depth fit (max softmax and the
depth report's best OOD score, ``depth_views.shown_ood_scores``; from the same backbone pass and the same head
call), the page's whole default view. Heads without intrinsic scores also compute
Integrated Gradients (32 steps), which the page shows in their place. Where maps were deferred, ``opened`` is the
model time of opening them (the explanation with them). Target: <= 1.5x. Measured in one run: the fastest of
``--rounds`` calls of each, alternating, so that load changes affect both alike.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from common import inspect_ood, interleaved_seconds, parser

from laya.analysis.depth.fit import DepthFit
from laya.analysis.head.attribution import intrinsic_method
from laya.analysis.head.explain import explain
from laya.app.catalog import example_images, find_checkpoints
from laya.data.images import load_image_tensor
from laya.model.checkpoint import load_checkpoint


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=100)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads {torch.get_num_threads()}, fastest of {args.rounds} alternating calls, "
          f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")  # fmt: skip
    print(f"{'model':<40} {'decode ms':>9} {'forward ms':>10} {'Inspect ms':>10} {'ratio':>7} {'+ OOD':>7} {'opened':>7}  scores")
    for entry in find_checkpoints(args.models):
        ck = load_checkpoint(entry.path)
        fit = DepthFit.load(ck.path)
        example = example_images(entry.path)[0]
        data = Path(example).read_bytes()
        image = load_image_tensor(data, ck.meta.input.channels, ck.meta.input.source_size)

        def plain():
            with torch.inference_mode():
                return ck.model(ck.preprocess(image.unsqueeze(0)))

        def decode():
            return load_image_tensor(data, ck.meta.input.channels, ck.meta.input.source_size)

        shown = inspect_ood(ck, fit)

        def inspect(ood: bool | tuple[str, ...] = False):
            e = explain(ck, image, approximate=False, ood=ood, fit=fit)
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

        calls = {"plain": plain, "inspect": inspect, "ood": lambda: inspect(ood=shown), "decode": decode}
        spatial = explain(ck, image, approximate=False).spatial
        if spatial is not None and any(spatial.deferred):
            calls["opened"] = lambda: explain(ck, image)
        best = interleaved_seconds(calls, rounds=args.rounds)
        t_plain, t_inspect = best["plain"], best["inspect"]
        opened = f"{best['opened'] / t_plain:>6.2f}x" if "opened" in best else f"{'–':>7}"
        kind = "intrinsic" if intrinsic_method(ck.model.head) else "IG-32 (no intrinsic scores)"
        name = f"{entry.path.parent.name}/{entry.head}"
        ood = best["ood"] / t_plain
        print(f"{name:<40} {best['decode'] * 1e3:>9.2f} {t_plain * 1e3:>10.2f} {t_inspect * 1e3:>10.2f} {t_inspect / t_plain:>6.2f}x {ood:>6.2f}x "
              f"{opened}  {kind}")  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
