"""What the per-layer spatial maps add to the Inspect page's model time (issue 20, section 1).

    python benchmarks/maps_overhead.py [--threads 1] [--rounds 50]

For each bundled checkpoint and its first example image: ``explain_bytes`` with the maps (exact maps of the
10 most likely classes from the same backbone pass; for CLS-token layers the gradient x activation
approximation of the top 3 classes, ``L`` backward passes batched over them) against ``explain_bytes(maps=False)``, and
the bytes the maps add to what a sandboxed worker hands over. Measured in one run: the fastest of
``--rounds`` alternating calls of each, so that load changes affect both alike.
"""

from __future__ import annotations

from pathlib import Path

import torch
from common import interleaved_seconds, parser

from laya.analysis.head.explain import explain_bytes
from laya.app.catalog import example_images, find_checkpoints
from laya.model.checkpoint import load_checkpoint


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=50)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads {torch.get_num_threads()}, fastest of {args.rounds} alternating calls")
    print(f"{'model':<40} {'without ms':>10} {'with ms':>9} {'ratio':>7} {'maps KB':>8}  maps")
    for entry in find_checkpoints(args.models):
        ck = load_checkpoint(entry.path)
        data = Path(example_images(entry.path)[0]).read_bytes()
        calls = {"without": lambda: explain_bytes(ck, data, maps=False), "with": lambda: explain_bytes(ck, data)}
        t_without, t_with = interleaved_seconds(calls, rounds=args.rounds).values()
        spatial = explain_bytes(ck, data).spatial
        tensors = {} if spatial is None else spatial.to_tensors()[0]
        size = sum(t.numel() * t.element_size() for t in tensors.values()) / 1e3
        kinds = "none (no layer has positions)" if spatial is None else "/".join(sorted(set(spatial.kinds)))
        name = f"{entry.path.parent.name}/{entry.head}"
        print(
            f"{name:<40} {t_without * 1e3:>10.2f} {t_with * 1e3:>9.2f} {t_with / t_without:>6.2f}x {size:>8.1f}  {kinds}"
        )


if __name__ == "__main__":
    main()
