"""Veit, Wilber and Belongie (NeurIPS 2016, §4) on this machine: a CIFAR ResNet and its plain twin, lesioned.

    python scripts/veit_lesion.py                          # every step of both networks, each skipped once done
    python scripts/veit_lesion.py --only plain20 --steps check
    python scripts/veit_lesion.py --ship                   # copy the ResNet's attached setting into models/, then
    python scripts/bundled_predictions.py --only cifar10-resnet20   # its heads' classes on the test split, for the tests

Per network of :data:`NETWORKS`, He et al.'s CIFAR family of depth 20 (:mod:`laya.model.cifar_resnets`: three stages
of three basic blocks; the plain twin without any shortcut):

* ``train``: ``scripts/train_network.py`` on the CIFAR-10 copy (the timm model laya registers; nothing of LAYA in it);
* ``attach``: ``python -m laya attach``, its lesion study on a class-balanced seeded sample of 2,000 test images
  (``--lesion-limit 2000``; the whole split is about five times the hour this takes on 2 cores): each
  block skipped alone (a residual block's branch removed; a plain block deleted by passing its input on, where its
  output has its input's shape) and resampled, and ``k`` blocks skipped at once;
* ``check``: ``docs/veit/<name>.json`` from the attached folder: the lesion study, which blocks change the shape
  (the downsampling ones), the Grad-CAM test, the commands. ``scripts/claims/veit.py`` sets them beside the
  paper's statements on ``docs/lesion-veit.md``.

Paths: runs under ``runs/veit/`` (gitignored); ``LAYA_DATA`` or ``../shared/data`` has the CIFAR-10 copy.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNS = ROOT / "runs" / "veit"
DOCS = ROOT / "docs" / "veit"
SHIPPED = "resnet20"
MEAN, STD = "0.4914,0.4822,0.4465", "0.2470,0.2435,0.2616"  # CIFAR-10's channel statistics


@dataclass(frozen=True)
class Network:
    """One network of the study: its timm name, how long it trains, how it is named on the page."""

    model: str
    title: str
    epochs: int = 12

    def weights(self, name: str) -> Path:
        return RUNS / f"{self.model}.safetensors"

    def setting(self, name: str) -> Path:
        return RUNS / "attached" / f"cifar10-{name}"

    def train_command(self, name: str) -> list[str]:
        return [sys.executable, "scripts/train_network.py", "--family", "timm", "--model", self.model, "--epochs",
                str(self.epochs), "--threads", "1", "--mean", MEAN, "--std", STD,
                "--out", str(self.weights(name).relative_to(ROOT))]  # fmt: skip

    def attach_command(self, name: str) -> list[str]:
        """The own head's analyses at attach's defaults and one fitted head (LAYA, at most 15 epochs; the study is of
        the network itself); the lesion study on 2,000 test images, ten draws per k."""
        return [sys.executable, "-m", "laya", "attach", "--family", "timm", "--model", self.model,
                "--weights", str(self.weights(name).relative_to(ROOT)), "--dataset", "cifar10", "--mean", MEAN,
                "--std", STD, "--out", str(self.setting(name).parent.relative_to(ROOT)), "--setting",
                self.setting(name).name, "--overwrite", "--heads", "laya", "--depth-heads", "own", "--max-epochs", "15",
                "--random-orders", "3", "--lesion-limit", "2000", "--lesion-draws", "10"]  # fmt: skip


NETWORKS: dict[str, Network] = {
    "resnet20": Network("cifar_resnet20", "ResNet-20 (He et al.'s CIFAR family, option A shortcuts)"),
    "plain20": Network("cifar_plain20", "plain-20 (the same network without shortcuts)"),
}


def _run(command: list[str]) -> None:
    print("$", " ".join(command), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)


def shape_changes(model: torch.nn.Module, units: list, x: torch.Tensor) -> list[bool]:
    """Per unit, whether its output has another shape than its input in a pass of ``x`` (a stem, a downsampling
    block): Veit et al.'s "downsampling" blocks."""
    from laya.analysis.patching import on_input
    from laya.model.hooks import Hooks, layer_tensor

    shapes: dict[int, list] = {}
    with Hooks() as hooks, torch.no_grad():
        for u, unit in enumerate(units):
            on_input(hooks, unit.block, lambda t, u=u: shapes.setdefault(u, []).append(tuple(t.shape)))
            hooks.after(unit.block.module, lambda m, a, out, u=u: shapes.setdefault(u, []).append(
                tuple(layer_tensor(out).shape)))  # fmt: skip
        model.backbone(x)
    return [shapes[u][0] != shapes[u][1] for u in range(len(units))]


def check(name: str) -> dict:
    """``docs/veit/<name>.json`` from the attached network ``name`` (module docstring); returns what it writes."""
    from laya.analysis.network.report_files import load_network_report
    from laya.analysis.network.units import network_units
    from laya.model.checkpoint import load_checkpoint

    network = NETWORKS[name]
    own = network.setting(name) / "own"
    checkpoint = load_checkpoint(own)
    report = load_network_report(own)
    if report is None or report.lesion is None:
        raise SystemExit(f"{own} has no lesion study: run the attach step")
    units = network_units(checkpoint.model.backbone)
    probe = torch.zeros(1, 3, 32, 32)
    out = {
        "network": name, "title": network.title, "model": network.model, "epochs": network.epochs,
        "train_command": "python " + " ".join(network.train_command(name)[1:]),
        "attach_command": "python " + " ".join(network.attach_command(name)[1:]),
        "classes": list(checkpoint.meta.classes), "units": report.units, "residual": report.residual,
        "downsampling": shape_changes(checkpoint.model, units, probe),
        "lesion": report.lesion.to_record(),
        "gradcam": json.loads((own / "network.json").read_text()).get("gradcam"),  # the Grad-CAM test, as stored
    }  # fmt: skip
    DOCS.mkdir(parents=True, exist_ok=True)
    (DOCS / f"{name}.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{name}: intact accuracy {report.lesion.intact[0]:.4f} on {report.lesion.n} test inputs", flush=True)
    return out


def ship(name: str = SHIPPED) -> Path:
    """Copy the attached setting of ``name`` into ``models/`` without the per-input arrays the bundled settings leave
    out (``per_input.safetensors``)."""
    source, dest = NETWORKS[name].setting(name), ROOT / "models" / NETWORKS[name].setting(name).name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("per_input.safetensors"))
    return dest


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=list(NETWORKS), help="one network (default: both)")
    p.add_argument("--steps", default="train,attach,check", help="comma-separated steps (default: all three)")
    p.add_argument("--ship", action="store_true", help=f"copy {SHIPPED}'s attached setting into models/ and stop")
    args = p.parse_args(argv)
    if args.ship:
        print(f"-> {ship()}")
        return
    steps = args.steps.split(",")
    for name in [args.only] if args.only else list(NETWORKS):
        network = NETWORKS[name]
        if "train" in steps and not network.weights(name).is_file():
            _run(network.train_command(name))
        if "attach" in steps and not (network.setting(name) / "own" / "network.json").is_file():
            _run(network.attach_command(name))
        if "check" in steps:
            check(name)


if __name__ == "__main__":
    main()
