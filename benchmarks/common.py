"""Shared helpers of the benchmark scripts: timing with torch.utils.benchmark, model discovery, inputs."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from pathlib import Path

import torch
from torch.utils.benchmark import Timer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from laya.data.datasets import DatasetNotFoundError
from laya.model.checkpoint import Checkpoint

if TYPE_CHECKING:
    from laya.analysis.depth.fit import DepthFit


def seconds(fn: Callable[[], object], min_run_time: float = 1.0) -> float:
    """Median wall time of one call of ``fn`` (torch.utils.benchmark, blocked autorange)."""
    return Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time).median


def interleaved_seconds(
    fns: dict[str, Callable[[], object]], rounds: int = 3, repeats: dict[str, int] | None = None
) -> dict[str, float]:
    """Fastest of ``rounds`` calls of each function, after one warm-up round, calling them in turn so
    that a change of load on the machine affects all of them alike (for ratios of calls that are either
    long, where ``seconds`` would time a single call, or short and sensitive to drift). ``repeats``: how many
    calls (each timed alone) a function gets per round, for a short call timed beside one that takes a minute,
    where a fastest of ``rounds`` would still carry the load of the moment."""
    best = dict.fromkeys(fns, math.inf)
    for round_ in range(rounds + 1):
        for name, fn in fns.items():
            for _ in range((repeats or {}).get(name, 1)):
                start = time.perf_counter()
                fn()
                if round_:
                    best[name] = min(best[name], time.perf_counter() - start)
    return best


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--models", default=str(ROOT / "models"), help="folder of bundled checkpoints")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 = least noisy)")
    return p


def run_facts(device: str = "cpu") -> dict:
    """What a result file says about its run, taken at its start: the command line, the date, the commit (and
    whether the checkout had uncommitted changes), the machine, the torch threads and the load average."""
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    script = Path(sys.argv[0]).resolve()
    script_name = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
    return {"command": shlex.join(["python", str(script_name), *sys.argv[1:]]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
            "uncommitted_changes": bool(dirty.stdout.strip()),
            "machine": {"cpu": _cpu_model(), "cpus": os.cpu_count(), "platform": platform.platform(),
                        "torch": torch.__version__, "device": device},
            "threads": torch.get_num_threads(), "load_average": {"start": os.getloadavg()}}  # fmt: skip


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def write_result(folder: Path, name: str, facts: dict, **results: object) -> Path:
    """``folder/name.json``: ``facts`` (:func:`run_facts`, the load average at the end added) and ``results``."""
    facts["load_average"]["end"] = os.getloadavg()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({**facts, **results}, indent=1) + "\n")
    return path


def inspect_ood(checkpoint: Checkpoint, fit: DepthFit | None) -> bool | tuple[str, ...]:
    """The ``ood`` Inspect's page passes to its explanation: the scores its status shows under the checkpoint's
    depth report (``laya.app.depth_views.shown_ood_scores``), False without a report or a fit."""
    from laya.analysis.depth.report import DepthReport  # the page modules, for the two benchmarks that time Inspect
    from laya.app.depth_views import shown_ood_scores

    report = DepthReport.load(checkpoint.path)
    return False if report is None or fit is None else shown_ood_scores(report.data, checkpoint.model.head.dims)


def test_images(checkpoint: Checkpoint, n: int) -> tuple[torch.Tensor, str]:
    """``n`` test images of the checkpoint's dataset, or random images of the right shape if it is absent."""
    spec = checkpoint.meta.input
    try:
        data = checkpoint.load_data("test")
        return data.images[:n], f"{min(n, len(data))} test images"
    except DatasetNotFoundError:
        g = torch.Generator().manual_seed(0)
        shape = (n, spec.channels, spec.source_size, spec.source_size)
        return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8), f"{n} random images (dataset absent)"
