"""Cost of a sandboxed worker per dashboard interaction, against the in-process path, in one run.

    python benchmarks/worker_overhead.py [--models models] [--rounds 5]

For the LAYA head of every bundled setting: one Inspect interaction (``explain``: backbone once, the
head under L + 1 masks) and one Depth-analytics interaction (``input_depth``) on a bundled example,
in this process (the model already loaded) and through a warm worker (model already loaded there:
the request, the JSON + safetensors frames, the rebuild). Calls alternate between the two paths
(:func:`interleaved_seconds`, fastest of ``--rounds``), so load on the machine affects both alike;
the added milliseconds and the ratio are printed per setting. Also printed: the worker's start-up
(imports, confinement) and its first load of each model, which a visitor pays once per worker.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
from common import interleaved_seconds, parser

from laya.analysis.depth.fit import DepthFit
from laya.analysis.depth.input_depth import input_depth
from laya.analysis.head.explain import explain_bytes
from laya.data.images import load_image_tensor
from laya.model.checkpoint import load_checkpoint
from laya.sandbox.client import Sandboxed
from laya.sandbox.pool import PoolConfig, WorkerPool


def main() -> int:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--head", default="laya")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    pool = WorkerPool(PoolConfig(size=1, env={"LAYA_WORKER_THREADS": str(args.threads)}))
    rows = []
    try:
        start = time.perf_counter()
        pool.warm()  # start the worker alone: its start-up cost
        startup = time.perf_counter() - start
        for setting in sorted(Path(args.models).iterdir()):
            path = setting / args.head
            examples = sorted((setting / "examples").glob("*.png"))
            if not (path / "model.json").is_file() or not examples:
                continue
            data = examples[0].read_bytes()
            start = time.perf_counter()
            checkpoint = load_checkpoint(path)
            local_load = time.perf_counter() - start
            remote = Sandboxed(pool, str(path))
            start = time.perf_counter()
            remote.info()
            worker_load = time.perf_counter() - start
            spec, fit = checkpoint.meta.input, DepthFit.load(path)
            times = interleaved_seconds(
                {
                    "explain_local": lambda: explain_bytes(checkpoint, data),
                    "explain_worker": lambda: remote.explain(data),
                    "depth_local": lambda: input_depth(
                        checkpoint, load_image_tensor(data, spec.channels, spec.source_size), fit
                    ),
                    "depth_worker": lambda: remote.depth(data),
                },
                rounds=args.rounds,
            )
            row = {"setting": setting.name, "load_in_process_s": round(local_load, 3),
                   "first_load_in_worker_s": round(worker_load, 3)}  # fmt: skip
            for what in ("explain", "depth"):
                local, worker = times[f"{what}_local"], times[f"{what}_worker"]
                row |= {f"{what}_in_process_ms": round(local * 1e3, 1), f"{what}_worker_ms": round(worker * 1e3, 1)}
                row |= {f"{what}_added_ms": round((worker - local) * 1e3, 1), f"{what}_ratio": round(worker / local, 2)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        pool.close()
    added = [r[f"{w}_added_ms"] for r in rows for w in ("explain", "depth")]
    print(json.dumps({"worker_startup_s": round(startup, 2), "max_added_ms": max(added), "goal_ms": 100,
                      "threads": args.threads, "rounds": args.rounds}))  # fmt: skip
    return 0 if max(added) <= 100 else 1


if __name__ == "__main__":
    sys.exit(main())
