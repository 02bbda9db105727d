"""``torchrun --nproc_per_node 2 -m laya evaluate`` (gloo on CPU) writes the report one process writes."""

import json
import os
import subprocess
import sys
from pathlib import Path

from laya.cli import main
from tests.training.test_device_pipeline import _numbers

REPO = Path(__file__).resolve().parents[2]


def test_torchrun_evaluation_equals_one_process(tiny_models, tmp_path):
    checkpoint = tiny_models / "colours-mlp" / "laya"
    # 24 test inputs in batches of 10: process 0 gets batches 0 and 2 (14 inputs), process 1 batch 1 (10)
    flags = ["evaluate", "--checkpoint", str(checkpoint), "--ig-steps", "4", "--batch-size", "10", "--device", "cpu"]
    assert main([*flags, "--out", str(tmp_path / "one")]) == 0
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        "-m", "laya", *flags, "--stream", "--out", str(tmp_path / "two"),
    ]  # fmt: skip
    result = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    one = json.loads((tmp_path / "one" / "report.json").read_text())
    two = json.loads((tmp_path / "two" / "report.json").read_text())
    assert two["dataset"]["n"] == 24 and _numbers(one) == _numbers(two)
    assert result.stdout.count("accuracy") == 1  # only process 0 writes and prints
