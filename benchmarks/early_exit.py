"""A real early-exit run and a truncated model against plain inference, end to end (issue 18 §1-2).

    python benchmarks/early_exit.py [--setting fashion-mnist-mlp] [--head laya] [--limit 1000] [--threads 1]

Runs ``laya.analysis.depth.measured.measure`` on one bundled checkpoint with a short threshold list and prints the
measured tables (MACs from torch.utils.flop_counter; wall clock the fastest of 3 timings of at least 0.2 s each,
plain and early exit alternating, at batch 1, 64 and 1,024). Nothing is written; ``python -m laya exits`` writes the full report beside a
checkpoint. Savings below zero mean the early-exit run was slower than plain inference.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from common import parser

from laya.analysis.depth.exits import ExitRunOptions
from laya.analysis.depth.measured import MeasureOptions, measure, write_exits
from laya.model.checkpoint import load_checkpoint
from scripts.depth_cards import alpha_card, exit_card, truncation_card


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--setting", default="fashion-mnist-mlp")
    p.add_argument("--head", default="laya")
    p.add_argument("--limit", type=int, default=1000, help="test inputs")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    checkpoint = load_checkpoint(f"{args.models}/{args.setting}/{args.head}")
    options = MeasureOptions(limit=args.limit, train_limit=2000, thresholds=(0.8, 0.9, 0.99), alpha_levels=(0.6, 0.8),
                             runs=ExitRunOptions(timing_inputs={1: 100, 64: 1024, 1024: 2048}))  # fmt: skip
    report = measure(checkpoint, options)
    print(f"{args.setting}/{args.head}, {report['n_test']} test inputs, torch threads {torch.get_num_threads()}, "
          f"{report['seconds']:.0f} s")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / args.setting / args.head
        out.mkdir(parents=True)
        write_exits(report, out)
        for card in (exit_card, alpha_card, truncation_card):
            print(card([out]))


if __name__ == "__main__":
    main()
