"""Memory after failed checkpoint loads: does the process give it back?

    python benchmarks/failed_loads.py [--model vit_base_patch16_224] [--repeats 4] [--no-trim]

Writes a checkpoint whose ``model.json`` describes a timm model within the budget but whose weights
file does not fit it, so every load builds the model (hundreds of MB) and then fails. Loads it
``--repeats`` times, calling :func:`laya.app.deploy.release_memory` after each failure (unless
``--no-trim``), and prints the process's resident memory (VmRSS, MB) after each attempt.
Run with ``MALLOC_MMAP_THRESHOLD_=65536`` in the environment to see the Docker image's setting.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import timm  # noqa: F401 - imported up front, so "start" includes its few hundred MB of modules
import torch
from safetensors.torch import save_file

from laya.app.deploy import release_memory
from laya.model.checkpoint import CheckpointError, load_checkpoint, sha256_file


def rss_mb() -> float:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return float(line.split()[1]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="vit_base_patch16_224")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--no-trim", action="store_true")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="laya-failed-load-"))
    save_file(
        {"unrelated": torch.zeros(4)}, str(directory / "model.safetensors"), metadata={"format": "laya-checkpoint"}
    )
    record = {
        "format": "laya-checkpoint", "format_version": 1, "classes": ["a", "b"], "dataset": "cifar10",
        "backbone": {"name": "timm", "model": args.model, "in_channels": 3, "input_size": 224},
        "head": {"name": "laya"},
        "input": {"channels": 3, "source_size": 224, "size": 224, "mean": [0.5] * 3, "std": [0.5] * 3},
        "weights": {"file": "model.safetensors", "sha256": sha256_file(directory / "model.safetensors")},
    }  # fmt: skip
    (directory / "model.json").write_text(json.dumps(record))
    print(f"start: {rss_mb():.0f} MB")
    for i in range(args.repeats):
        try:
            load_checkpoint(directory)
        except CheckpointError as error:
            message = str(error)[:60]
        if not args.no_trim:
            release_memory()
        print(f"after failed load {i + 1}: {rss_mb():.0f} MB ({message}...)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
