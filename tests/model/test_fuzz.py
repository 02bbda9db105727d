"""The checkpoint fuzzer (tests/model/fuzz_checkpoints.py) in CI: a subprocess under a memory and CPU-time
limit, with no network; every generated model.json and safetensors header is refused or loads."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 6 * 2**30  # address space: torch and timm take about 2 GiB of it
CPU_LIMIT_S = 400
EXAMPLES = int(os.environ.get("LAYA_FUZZ_EXAMPLES", "120"))  # per property; ~60 s in all on 2 cores


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_S, CPU_LIMIT_S))


def test_fuzzed_checkpoints_are_refused_or_load(tiny_models: Path) -> None:
    good = tiny_models / "colours-mlp" / "laya"
    run = subprocess.run(
        [sys.executable, "-m", "tests.model.fuzz_checkpoints", str(good), "--examples", str(EXAMPLES)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
        preexec_fn=_limits,
        env={**os.environ, "LAYA_DOWNLOAD": "1", "OMP_NUM_THREADS": "1"},  # downloads allowed: still none may happen
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    print(result)
    counts = result["counts"]
    assert counts.get("model.json:refused", 0) + counts.get("model.json:loaded", 0) >= EXAMPLES
    assert counts.get("model.json:refused", 0) > 0 and counts.get("header:refused", 0) > 0
    assert result["max_rss_mb"] < MEMORY_LIMIT / 2**20
