"""``torchrun --nproc_per_node 2 -m laya attach`` and ``… -m laya network`` (gloo on CPU) write what one process
writes: every tensor of every ``.safetensors`` file within 1e-6 and every JSON number within 1e-6, but for timings,
commands and paths (``depth.json`` holds measured layer costs and is left out; its fit, ``depth_fit.*``, is in)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from laya.analysis.network.interventions import RESAMPLES
from laya.analysis.network.lesion import DRAWS
from laya.analysis.network.scores import IG_STEPS
from tests.conftest import make_image_folder

REPO = Path(__file__).resolve().parents[2]
#: fields that differ between any two runs: wall-clock times, the command line and the folders written
VARYING = {"timing", "seconds", "train_seconds", "command", "setting_command", "checkpoint", "out",
           "forward_seconds", "all_seconds", "x_forward"}  # measured times (the Grad-CAM test's costs too)
# 300 training images: the feature pass takes 2 batches of 256; a lens sample of 150: 2 batches of 128; 24 test
# inputs of the network report: 2 batches of 16 (each process owns one); the evaluation's 30 in 1 batch of 500
# (process 1 owns none)
LENS = ["--lens-sample", "90", "--lens-epochs", "2", "--resamples", "50", "--gradcam-sample", "3"]
ATTACH = ["--family", "torchvision", "--model", "resnet18", "--image-size", "32", "--heads", "laya",
          "--depth-heads", "own", "--max-epochs", "1", "--patience", "1", "--ig-steps", "2", "--train-limit", "48",
          "--random-orders", "1", "--timing-batch", "4", "--timing-repeats", "1", "--network-limit", "12", "--setting",
          "s", *LENS]  # fmt: skip


#: imported at start-up by every process (``sitecustomize``): process 1 reaches attach's checks 3 s after the
#: main one, as a loaded machine made it once; the main one then had created the setting folder, which process 1's
#: check refused as "exists already" (exit 2), until every process checks before the main one creates it
LATE = """import os, time
if os.environ.get("RANK") == "1":
    import laya.training.preflight as checks
    early = checks.preflight
    def late(*args, **kwargs):
        time.sleep(3)
        return early(*args, **kwargs)
    checks.preflight = late
"""


def _run(tmp_path: Path, processes: int, cache: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m laya ARGS`` in one process, or under ``torchrun`` in ``processes`` (gloo, process 1 late:
    :data:`LATE`), with its own cache."""
    (tmp_path / "late").mkdir(exist_ok=True)
    (tmp_path / "late" / "sitecustomize.py").write_text(LATE)
    path = os.pathsep.join([str(tmp_path / "late"), str(REPO)])
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "LAYA_CACHE": str(tmp_path / cache)}
    launch = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)] if processes > 1 else []
    command = [sys.executable, *launch, "-m", "laya", *args]
    result = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=600)
    said = re.findall(r"error \(torchrun process \d+ of \d+\): [^\r\n]*", result.stderr)  # after a bar's \r, maybe
    assert result.returncode == 0, "\n".join([*said, result.stderr[-3000:]])
    return result


def _differences(a, b, where: str = "") -> list[str]:
    """Where two JSON values differ (numbers by more than 1e-6), ignoring :data:`VARYING` keys."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a if k not in VARYING for d in _differences(a[k], b[k], f"{where}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float):
        return [] if abs(a - b) <= 1e-6 or (a != a and b != b) else [f"{where}: {a} vs {b}"]
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]


def _assert_same_files(one: Path, two: Path, names: list[str]) -> None:
    for name in names:
        if name.endswith(".safetensors"):
            a, b = load_file(str(one / name)), load_file(str(two / name))
            assert a.keys() == b.keys(), name
            for key in a:
                torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6, equal_nan=True, msg=f"{name}: {key}")
        elif name.endswith(".json") and not name.endswith("depth.json"):
            assert not _differences(json.loads((one / name).read_text()), json.loads((two / name).read_text())), name


@pytest.mark.slow  # about 50 s on 2 idle cores (three runs of a ResNet-18 at 32 px), minutes loaded
def test_torchrun_attach_and_network_equal_one_process(tmp_path):
    import torchvision

    data = make_image_folder(tmp_path / "data", train=100, test=10)
    torch.manual_seed(0)
    weights = tmp_path / "resnet18.safetensors"
    save_file({k: v.contiguous() for k, v in torchvision.models.resnet18(num_classes=3).state_dict().items()},
              str(weights))  # fmt: skip
    flags = ["attach", *ATTACH, "--weights", str(weights), "--dataset", str(data)]
    _run(tmp_path, 1, "cache-one", *flags, "--out", str(tmp_path / "one"))
    attached = _run(tmp_path, 2, "cache-two", *flags, "--out", str(tmp_path / "two"))
    assert attached.stdout.count("Open it in the dashboard") == 1  # the main process alone prints
    one, two = tmp_path / "one" / "s", tmp_path / "two" / "s"
    names = sorted(str(p.relative_to(one)) for p in one.rglob("*") if p.is_file())
    assert names == sorted(str(p.relative_to(two)) for p in two.rglob("*") if p.is_file())
    assert {"own/network.safetensors", "own/tuned_lens.safetensors", "own/model.safetensors",
            "laya/model.safetensors", "own/depth_fit.safetensors"} <= set(names)  # fmt: skip
    _assert_same_files(one, two, names)

    # the network report of the same options again, by `laya network` in 2 processes (its lens fitted anew: none is
    # beside --out): the one-process report attach wrote, within attach's default budget as there (one input a class)
    network = ["network", "--checkpoint", str(one / "own"), "--limit", "12", "--references", str(RESAMPLES),
               "--ig-steps", str(IG_STEPS), "--lesion-draws", str(DRAWS), "--timing-repeats", "1", "--budget", "3",
               *LENS]  # fmt: skip
    printed = _run(tmp_path, 2, "cache-two", *network, "--out", str(tmp_path / "network")).stdout
    assert printed.count("Lesion study") == 1 and printed.count("Network report sized to its budget") == 1
    written = ["network.json", "network.safetensors", "references.safetensors", "tuned_lens.json",
               "tuned_lens.safetensors"]  # fmt: skip
    _assert_same_files(one / "own", tmp_path / "network", written)
    assert sorted(p.name for p in (tmp_path / "network").iterdir()) == written
