"""Wall-clock time of short runs on a shared machine: each run warmed up once, then timed round-robin and the
fastest kept (``docs/decisions/timing-noise.md``), so load from other work hits every run alike."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch


def fastest_seconds(runs: Sequence[Callable[[], Any]], repeats: int, device: torch.device | None = None) -> list[float]:
    """Seconds of each of ``runs``: one warm-up each, then ``repeats`` rounds timing every run once, the fastest of
    each kept; on a CUDA ``device`` the timer waits for it before and after each run (its work is asynchronous)."""
    if repeats < 1 or not runs:
        raise ValueError(f"need repeats >= 1 and at least one run, got {repeats} and {len(runs)} runs")
    for run in runs:
        run()  # warm-up
    cuda = device is not None and torch.device(device).type == "cuda"
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for k, run in enumerate(runs):
            if cuda:
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            run()
            if cuda:
                torch.cuda.synchronize(device)
            best[k] = min(best[k], time.perf_counter() - start)
    return best


__all__ = ["fastest_seconds"]
