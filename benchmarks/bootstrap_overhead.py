"""What the bootstrap CIs and paired tests add to a full evaluation (the budget: at most 20%).

    python benchmarks/bootstrap_overhead.py [--setting fashion-mnist-mlp] [--head laya] [--limit N]

One full evaluation of a bundled checkpoint (every method, reduction and intervention, deletion curves,
1,000 resamples); the evaluation times the resampling itself (``timing.bootstrap_s``: every CI and
paired bootstrap) and the rest, so the ratio is measured in one run.
"""

from __future__ import annotations

import torch
from common import parser

from laya.analysis.evaluate import EvalOptions, evaluate
from laya.model.checkpoint import load_checkpoint


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--setting", default="fashion-mnist-mlp")
    p.add_argument("--head", default="laya")
    p.add_argument("--limit", type=int, default=None, help="first N test inputs (default: all)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    checkpoint = load_checkpoint(f"{args.models}/{args.setting}/{args.head}")
    report = evaluate(checkpoint, checkpoint.load_data("test"), EvalOptions(limit=args.limit))
    timing = report["timing"]
    total = timing["total_s"] + timing["summary_s"]  # per-input work + every summary
    bootstrap = timing["bootstrap_s"]
    print(f"{args.setting}/{args.head}: {timing['n']} test inputs, {report['options']['resamples']} resamples, "
          f"torch threads {timing['torch_threads']}")  # fmt: skip
    print(f"evaluation without bootstrap {total - bootstrap:8.2f} s")
    print(f"bootstrap (CIs + paired)     {bootstrap:8.2f} s")
    print(f"bootstrap / rest             {bootstrap / (total - bootstrap):8.1%}  (budget: <= 20%)")


if __name__ == "__main__":
    main()
