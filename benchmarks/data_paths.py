"""In-memory vs streamed data, CPU vs GPU: identical reports, epoch time, and the memory of a large evaluation.

    python benchmarks/data_paths.py reports --checkpoint models/cifar10-cnn/laya
    python benchmarks/data_paths.py epoch --dataset /tmp/laya-epoch        # make it with make_image_folder.py
    python benchmarks/data_paths.py rss --dataset /tmp/laya-100k           # 100,000 test images at 224 px
    python benchmarks/data_paths.py decode --dataset /tmp/laya-100k --n 8000

``reports``: evaluates a checkpoint on its test split decoded in memory and streamed from the files;
prints whether every number of the two reports is equal (timings and paths aside) and their times.
``epoch``: one training epoch of the CIFAR-10 reference CNN on an ImageFolder, in memory and streamed,
on every device present (cpu, cuda): seconds and images/s. ``rss``: builds an (untrained) CNN checkpoint
for the folder, then runs ``python -m laya evaluate --stream`` on its test split (every method; by default
ablation mode ``zero`` only and IG with 4 steps) while sampling the
process tree every 0.5 s: peak memory (PSS summed over the main process and its decoding workers, and
the main process's RSS) and CPU use (cores busy on average). ``decode``: the streamed path alone
(:meth:`ImageFiles.iter_batches`, no model) over ``--n`` test images with 1 decoding worker and with the
default (one per core): images/s, the speed-up, and cores busy (CPU seconds of the process tree / wall).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from common import ROOT

from laya.analysis.evaluate import EvalOptions, evaluate
from laya.data.datasets import InputSpec, load_dataset
from laya.data.streaming import default_workers
from laya.model.backbones import BackboneConfig
from laya.model.checkpoint import CheckpointMeta, build_model, load_checkpoint, save_checkpoint
from laya.model.heads import HeadConfig
from laya.training.train import TrainConfig, train

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def reports(args: argparse.Namespace) -> None:
    ck = load_checkpoint(args.checkpoint, map_location=args.device)
    options = EvalOptions(limit=args.limit)
    results = {}
    for stream in (False, True):
        data = ck.load_data("test", stream=stream)
        start = time.perf_counter()
        report = evaluate(ck, data, options)
        results[stream] = (
            {k: v for k, v in report.items() if k not in ("timing", "checkpoint")},
            time.perf_counter() - start,
        )
        print(f"{'streamed' if stream else 'in memory':>9}: {type(data).__name__}, n = {report['dataset']['n']}, "
              f"accuracy {report['accuracy']:.4f}, {results[stream][1]:.1f} s")  # fmt: skip
    same = results[False][0] == results[True][0]
    print(f"{ck.path} on {args.device}: the two reports are {'IDENTICAL' if same else 'DIFFERENT'}")


def epoch(args: argparse.Namespace) -> None:
    backbone = BackboneConfig(name="cnn", widths=(32, 64, 128, 128, 256))
    print(
        f"{'device':>6} {'data':>9} {'epoch s':>8} {'images/s':>9}   (1 epoch, batch {args.batch_size}, {args.dataset})"
    )
    for device in DEVICES:
        for stream in (False, True):
            with tempfile.TemporaryDirectory() as out:
                config = TrainConfig(dataset=args.dataset, backbone=backbone, head=HeadConfig(name="laya"), out=out,
                                     max_epochs=1, batch_size=args.batch_size, device=device, stream=stream,
                                     augment="flip_crop")  # fmt: skip
                train(config)
                metrics = json.loads((Path(out) / "model.json").read_text())["metrics"]
            n = round(len(load_dataset(args.dataset, "train", stream=True)) * (1 - config.val_fraction))
            seconds = metrics["history"][0]["seconds"]
            print(f"{device:>6} {'streamed' if stream else 'in memory':>9} {seconds:8.1f} {n / seconds:9.0f}")


def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in children.read_text().split()] if children.exists() else []
    return [pid] + [p for k in kids for p in _tree(k)]


def _kib(pid: int, field: str, name: str) -> int:
    for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss(args: argparse.Namespace) -> None:
    checkpoint = Path(args.checkpoint)
    if not (checkpoint / "model.json").is_file():
        torch.manual_seed(0)
        classes = load_dataset(args.dataset, "test", args.size, stream=True).classes
        meta = CheckpointMeta(
            backbone=BackboneConfig(name="cnn", widths=(16, 32, 64), in_channels=3, input_size=args.model_size),
            head=HeadConfig(name="laya", d_star=32, scorer_hidden=32),
            classes=classes,
            dataset=args.dataset,
            input=InputSpec(channels=3, source_size=args.size, size=args.model_size, mean=(0.5,) * 3, std=(0.25,) * 3),
        )
        save_checkpoint(build_model(meta).eval(), meta, checkpoint)
    command = [sys.executable, "-m", "laya", "evaluate", "--checkpoint", str(checkpoint), "--stream",
               "--out", str(checkpoint / "report"), "--device", args.device, "--batch-size", str(args.batch_size),
               "--modes", args.modes, "--ig-steps", str(args.ig_steps)]  # fmt: skip
    print(" ".join(command), flush=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shutil.rmtree(checkpoint / "report", ignore_errors=True)  # never read an earlier run's report
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(command, env=env, stderr=errors)
        peak_pss = peak_main = 0
        workers = 0
        cpu: dict[int, float] = {}
        while process.poll() is None:
            try:
                pids = _tree(process.pid)
                peak_pss = max(peak_pss, sum(_kib(p, "Pss:", "smaps_rollup") for p in pids))
                peak_main = max(peak_main, _kib(process.pid, "VmRSS:", "status"))
                workers = max(workers, len(pids) - 1)
                cpu.update({p: _cpu_seconds(p) for p in pids})
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass  # a worker ended between listing and reading
            time.sleep(0.5)
        wall = time.perf_counter() - start
        if process.returncode:
            errors.seek(0)
            sys.exit(f"evaluate failed (exit {process.returncode}):\n" + errors.read().decode(errors="replace")[-3000:])
    report = json.loads((checkpoint / "report" / "report.json").read_text())
    print(f"exit {process.returncode}; {report['dataset']['n']:,} images at {args.size} px in {wall:.0f} s "
          f"({report['dataset']['n'] / wall:.0f} images/s); peak PSS of the process tree {peak_pss / 2**20:.2f} GiB, "
          f"peak RSS of the main process {peak_main / 2**20:.2f} GiB; up to {workers} child processes; "
          f"CPU {sum(cpu.values()) / wall:.2f} cores busy on average of {os.cpu_count()}")  # fmt: skip


def _busy(run) -> tuple[float, float]:
    """Wall seconds of ``run()`` and cores busy meanwhile (CPU seconds of this process and its children / wall)."""
    before = os.times()
    start = time.perf_counter()
    run()
    wall = time.perf_counter() - start
    after = os.times()
    cpu = sum(after[i] - before[i] for i in range(4))  # user + system, self + reaped children (the workers)
    return wall, cpu / wall


def decode(args: argparse.Namespace) -> None:
    data = load_dataset(args.dataset, "test", args.size, stream=True)
    data = data.subset(torch.randperm(len(data), generator=torch.Generator().manual_seed(0))[: args.n])
    batches = list(torch.arange(len(data)).split(args.batch_size))
    print(f"{len(data):,} images at {args.size} px from {args.dataset}, batches of {args.batch_size}, "
          f"os.cpu_count() = {os.cpu_count()}")  # fmt: skip
    rates = {}
    for workers in sorted({1, default_workers()}):
        wall, cores = _busy(lambda: sum(len(b) for b in replace(data, num_workers=workers).iter_batches(batches)))
        rates[workers] = len(data) / wall
        print(f"{workers} decoding worker(s): {wall:6.1f} s, {rates[workers]:6.0f} images/s, {cores:.2f} cores busy")
    if len(rates) > 1:
        print(f"speed-up with {max(rates)} workers: {rates[max(rates)] / rates[1]:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("reports")
    r.add_argument("--checkpoint", default=str(ROOT / "models" / "cifar10-cnn" / "laya"))
    r.add_argument("--limit", type=int)
    r.add_argument("--device", default="auto")
    r.set_defaults(func=reports)
    e = sub.add_parser("epoch")
    e.add_argument("--dataset", required=True)
    e.add_argument("--batch-size", type=int, default=128)
    e.set_defaults(func=epoch)
    m = sub.add_parser("rss")
    m.add_argument("--dataset", required=True)
    m.add_argument("--checkpoint", default=str(Path(tempfile.gettempdir()) / "laya-rss-checkpoint"))
    m.add_argument("--size", type=int, default=224, help="side of the dataset's images")
    m.add_argument("--model-size", type=int, default=32, help="side the CNN receives")
    m.add_argument("--modes", default="zero", help="ablation modes (the run measures the data path, not the analyses)")
    m.add_argument("--ig-steps", type=int, default=4)
    m.add_argument("--batch-size", type=int, default=500)
    m.add_argument("--device", default="auto")
    m.set_defaults(func=rss)
    d = sub.add_parser("decode")
    d.add_argument("--dataset", required=True)
    d.add_argument("--n", type=int, default=8000, help="test images to decode")
    d.add_argument("--size", type=int, default=224, help="side of the dataset's images")
    d.add_argument("--batch-size", type=int, default=250)
    d.set_defaults(func=decode)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
