"""benchmarks/inspect_speed.py runs on every bundled checkpoint and prints its row.

docs/speed.md gives the command with ``--rounds 100`` (marked ``long``: a minute of repeated calls, where one
round runs every line of the script); this runs it as written but for one round, from the checkout's root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from laya.app.catalog import find_checkpoints

ROOT = Path(__file__).resolve().parents[2]


def test_one_round_prints_a_row_per_bundled_checkpoint() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "benchmarks/inspect_speed.py", "--rounds", "1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split()[0] for line in done.stdout.splitlines()[2:-1]]
    assert rows == [f"{e.path.parent.name}/{e.head}" for e in find_checkpoints(ROOT / "models")], done.stdout
    assert "fastest of 1 alternating calls" in done.stdout.splitlines()[0]
