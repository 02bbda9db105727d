"""``laya attach`` at the size users train, against one plain forward pass over the same images, in one run.

    python benchmarks/attach_at_size.py [--data /tmp/laya-attach-224] [--train 2000] [--test 500] [--size 224]
        [--family torchvision] [--model resnet18] [--threads 2] [--out docs/speed] [--attach-flags "..."]

Writes (resumable, outside the repository) a synthetic ImageFolder of smooth JPEGs (``make_image_folder.py``,
``--classes`` classes) and a randomly initialised network's weights (seed 0: a trained network costs the same),
then measures, each in a fresh interpreter with ``--threads`` torch threads:

* **the forward**: one pass of the network over every train and test image, read as attach reads them
  (:func:`laya.data.datasets.load_dataset` at ``--size``, batches of 64, attach's default ImageNet normalisation,
  inference mode): the unit of the ratio;
* **the attach**: ``python -m laya attach`` with the default flags (plus ``--attach-flags``) into a temporary
  folder, as a first attach runs (an empty ``$LAYA_CACHE``: no cached features): its wall time, its peak RSS
  (``wait4``'s ``ru_maxrss``) and each step's seconds, read from its progress bar (the step names it shows, the
  elapsed time at which each began), and the line of its summary that says what the network report's budget allowed.

Goal (the issue "at the size you train"): the attach within :data:`GOAL` forwards, peak RSS within
:data:`RSS_GOAL_GB`. Writes ``attach_at_size.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 6.0  # the whole attach, at most this many plain forward passes over the same images
RSS_GOAL_GB = 3.0
OUTSIDE = "outside the bar (start-up, checks, summary)"
STEP = re.compile(r"attach bench:.*?\[(?:(\d+):)?(\d+):(\d+)<[^,\]]*, [^,\]]*, ([^\]]+)\]")  # [elapsed<eta, rate, step]


def forward_child(data: str, family: str, model: str, weights: str, size: int, threads: int) -> None:
    """In this fresh interpreter: one plain forward over the train and test splits; print its seconds as JSON."""
    import torch
    from safetensors.torch import load_file

    sys.path.insert(0, str(ROOT))
    from laya.data.datasets import load_dataset
    from laya.training.preflight import IMAGENET_MEAN, IMAGENET_STD  # attach's default normalisation

    torch.set_num_threads(threads)
    network = _network(family, model, _classes(data))
    network.load_state_dict(load_file(weights))
    network.eval()
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in (IMAGENET_MEAN, IMAGENET_STD))
    start = time.perf_counter()
    n = 0
    with torch.inference_mode():
        for split in ("train", "test"):
            images = load_dataset(data, split, size)
            index = torch.arange(len(images))
            for batch in images.iter_batches(index.split(64)):
                network((batch.float() / 255.0 - mean) / std)
                n += len(batch)
    print(json.dumps({"seconds": time.perf_counter() - start, "images": n}))


def _classes(data: str) -> int:
    return len([p for p in (Path(data) / "train").iterdir() if p.is_dir()])


def _network(family: str, model: str, classes: int):
    if family == "torchvision":
        import torchvision

        return torchvision.models.get_model(model, num_classes=classes, weights=None)
    import timm

    return timm.create_model(model, num_classes=classes, pretrained=False)


def make_data(args: argparse.Namespace) -> Path:
    """The ImageFolder (kept between runs) and the network's weights file."""
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_image_folder.py"), str(args.data), "--train",
                    str(args.train), "--test", str(args.test), "--classes", str(args.classes), "--size",
                    str(args.size)], check=True)  # fmt: skip
    weights = Path(args.data) / f"{args.family}-{args.model}.safetensors"
    if not weights.exists():
        import torch
        from safetensors.torch import save_file

        torch.manual_seed(0)
        network = _network(args.family, args.model, args.classes)
        save_file({k: v.contiguous() for k, v in network.state_dict().items()}, str(weights))
    return weights


def timed(command: list[str], log: Path, cache: Path) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in GB and stdout of ``command`` (stderr into ``log``), with an empty ``$LAYA_CACHE``
    (``cache``): no feature or size estimate of an earlier run is reused."""
    start = time.perf_counter()
    with open(log, "w") as err:
        env = {**os.environ, "LAYA_CACHE": str(cache)}
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT, env=env)
        out = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{shlex.join(command)} failed; its errors: {log}")
    return wall, usage.ru_maxrss / 2**20, out  # ru_maxrss: KiB on Linux


def step_seconds(progress: str, total: float) -> dict[str, float]:
    """Each step's seconds from the attach bar's redraws (``[elapsed<eta, rate, step]``): from the first elapsed
    time at which a step's name shows to the next step's, the last one to the bar's last redraw; what the bar does
    not cover (start-up, the checks, the summary) is :data:`OUTSIDE`, up to the attach's wall time ``total``."""
    starts: dict[str, float] = {}
    end = 0.0
    for hours, minutes, secs, name in STEP.findall(progress.replace("\r", "\n")):
        elapsed = int(hours or 0) * 3600 + int(minutes) * 60 + int(secs)
        starts.setdefault(name.strip(), elapsed)
        end = max(end, elapsed)
    names = list(starts)
    ends = [starts[n] for n in names[1:]] + [end]
    return {**{n: float(e - starts[n]) for n, e in zip(names, ends)}, OUTSIDE: round(total - end, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "laya-attach-224")
    p.add_argument("--train", type=int, default=2000)
    p.add_argument("--test", type=int, default=500)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--family", default="torchvision", choices=("torchvision", "timm"))
    p.add_argument("--model", default="resnet18")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--attach-flags", default="", help="flags added to attach's defaults (quoted as one string)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "speed")
    p.add_argument("--forward-child", nargs=6, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.forward_child:
        data, family, model, weights, size, threads = args.forward_child
        return forward_child(data, family, model, weights, int(size), int(threads))
    from common import run_facts  # benchmarks/common.py (torch): after the children's arguments are parsed

    facts = run_facts()
    weights = make_data(args)
    with tempfile.TemporaryDirectory(prefix="laya-attach-at-size-") as scratch:
        forward_s, forward_gb, out = timed(
            [sys.executable, __file__, "--forward-child", str(args.data), args.family, args.model, str(weights),
             str(args.size), str(args.threads)], Path(scratch) / "forward.log", Path(scratch) / "cache-forward")  # fmt: skip
        attach = [sys.executable, "-m", "laya", "--threads", str(args.threads), "attach", "--family", args.family,
                  "--model", args.model, "--weights", str(weights), "--dataset", str(args.data), "--image-size",
                  str(args.size), "--out", scratch, "--setting", "bench", *shlex.split(args.attach_flags)]  # fmt: skip
        log = Path(scratch) / "attach.log"
        attach_s, attach_gb, summary = timed(attach, log, Path(scratch) / "cache-attach")
        steps = step_seconds(log.read_text(errors="replace"), attach_s)
    facts["load_average"]["end"] = os.getloadavg()
    result = {
        **facts, "network": f"{args.family} {args.model}", "size": args.size, "train": args.train, "test": args.test,
        "classes": args.classes, "threads": args.threads, "goal": GOAL, "rss_goal_gb": RSS_GOAL_GB,
        "forward_seconds": round(forward_s, 3), "forward_images": json.loads(out)["images"],
        "forward_peak_rss_gb": round(forward_gb, 2), "attach_seconds": round(attach_s, 3),
        "attach_peak_rss_gb": round(attach_gb, 2), "ratio": round(attach_s / forward_s, 2), "steps": steps,
        "network_budget": next((x for x in summary.splitlines() if x.startswith("Network report ")), None),
        "attach_command": shlex.join(["python", *attach[1:]]).replace(scratch, "TMP").replace(str(args.data), "DATA"),
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "attach_at_size.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
