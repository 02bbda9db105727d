"""Wall-clock time of short runs on a shared machine: each run warmed up once, then timed round-robin and the
fastest kept (``docs/decisions/timing-noise.md``), so load from other work hits every run alike; a run of a few
milliseconds is repeated within one timing until it lasts ``min_seconds`` (``timeit``'s autorange), since one such
call timed alone is mostly scheduler noise."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch


def fastest_seconds(
    runs: Sequence[Callable[[], Any]], repeats: int, device: torch.device | None = None, min_seconds: float = 0.0
) -> list[float]:
    """Seconds per call of each of ``runs``: one warm-up each, then ``repeats`` rounds timing every run once, the
    fastest of each kept; a timing makes ``n`` calls of its run, ``n`` chosen from the warm-up so that it lasts at
    least ``min_seconds``. On a CUDA ``device`` the timer waits for it before and after each timing (its work is
    asynchronous)."""
    if repeats < 1 or not runs:
        raise ValueError(f"need repeats >= 1 and at least one run, got {repeats} and {len(runs)} runs")
    cuda = device is not None and torch.device(device).type == "cuda"

    def timed(run: Callable[[], Any], n: int) -> float:
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(n):
            run()
        if cuda:
            torch.cuda.synchronize(device)
        return (time.perf_counter() - start) / n

    calls = [max(1, math.ceil(min_seconds / warm)) if warm > 0 else 1 for warm in (timed(run, 1) for run in runs)]
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for k, run in enumerate(runs):
            best[k] = min(best[k], timed(run, calls[k]))
    return best


__all__ = ["fastest_seconds"]
