"""Networks trained on the CIFAR-10 copy, attached, and checked unit by unit: the run behind docs/trained-networks.md.

    python scripts/own_networks.py                     # every step of every network, each skipped once done
    python scripts/own_networks.py --only resnet18 --steps check
    python scripts/own_networks.py --ship              # copy the small network's attached setting into models/

Per network of ``NETWORKS``: ``train`` (``scripts/train_network.py``: a plain classifier, nothing of LAYA in it),
``attach`` (``python -m laya attach``, whose network step fits the tuned lens and writes the network report), then
``check``, which writes ``docs/own-networks/<name>.json`` from the attached folder:

* **same-class pairs**: over the report's sample, every pair of inputs with the same predicted class, and the
  share whose unit profiles differ by more than a constant: ``std_u(drop_u(x1) - drop_u(x2)) > 1e-4``, under the
  default intervention (resample), skip, and the stage mean-ablation the pages used before (every stage's
  output replaced by its training mean: everything after a stage that is not residual sees a constant); and the
  bars such a pair shares at a unit that keeps the input (:func:`shared_bars`: none, where every unit with a
  shortcut, a projection too, keeps it);
* **tuned lens**: the share of the whole test split on which the lens at the last unit predicts the network's own
  class;
* **Grad-CAM**: the largest difference between :func:`~laya.analysis.network.gradcam.unit_gradcam` and
  ``pytorch_grad_cam.GradCAM`` at every unit (on the module that writes the unit's output last:
  :func:`last_writers`), on a class-balanced seeded sample of test inputs;
* **figure data**: a pair of inputs of one class, both predicted right: their profiles, lens and Grad-CAM maps;
  the score-agreement table (``scripts/doc_figures.py`` draws them; ``scripts/prose_claims.py`` prints the tables);
* **the report's lesion study and Grad-CAM test** as stored, under ``network_report`` (``scripts/claims/network.py``
  prints them, ``scripts/doc_figures.py lesion`` draws the study).

Paths: runs under ``runs/own/`` (gitignored); ``LAYA_DATA`` or ``../shared/data`` has the CIFAR-10 copy.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUNS = ROOT / "runs" / "own"
DOCS = ROOT / "docs" / "own-networks"
PAIR_STD = 1e-4  # profiles that differ by more than a constant offset
SHARED = 1e-9  # a bar two inputs share: their drops differ by their probabilities' difference, to this
CAM_SAMPLE = 20  # test inputs of the Grad-CAM check (two per class)
SHIPPED = "resnet18-half"  # the network bundled in models/


@dataclass(frozen=True)
class Network:
    """One trained network: how it is built, trained and attached."""

    family: str
    model: str
    kwargs: dict = field(default_factory=dict)
    image_size: int = 32
    epochs: int = 6
    title: str = ""
    float16: bool = False  # attached (and shipped) as its weights rounded to float16

    def weights(self, name: str) -> Path:
        return RUNS / f"{name}.safetensors"

    def attached_weights(self, name: str) -> Path:
        return RUNS / f"{name}.float16.safetensors" if self.float16 else self.weights(name)

    def setting(self, name: str) -> Path:
        return RUNS / "attached" / f"cifar10-{name}"

    def train_command(self, name: str) -> list[str]:
        return [sys.executable, "scripts/train_network.py", "--family", self.family, "--model", self.model,
                *(["--model-kwargs", json.dumps(self.kwargs)] if self.kwargs else []),
                *(["--image-size", str(self.image_size)] if self.image_size != 32 else []),
                "--epochs", str(self.epochs), "--out", str(self.weights(name).relative_to(ROOT))]  # fmt: skip

    def attach_command(self, name: str) -> list[str]:
        """Sized for two CPU cores (heads fitted for at most 15 epochs): LAYA beside the own head, evaluated on a
        class-balanced 2,000 of the test split, depth analytics of the own head; the bundled network as every
        bundled setting: every head, evaluated on the whole test split, the depth analytics of every head."""
        sized = (["--depth-heads", "own,laya,scalarmix,concat"] if name == SHIPPED else
                 ["--heads", "laya", "--depth-heads", "own", "--limit", "2000"])  # fmt: skip
        return [sys.executable, "-m", "laya", "attach", "--family", self.family, "--model", self.model,
                *(["--model-kwargs", json.dumps(self.kwargs)] if self.kwargs else []),
                "--weights", str(self.attached_weights(name).relative_to(ROOT)), "--dataset", "cifar10",
                "--image-size", str(self.image_size), "--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5",
                "--out", str(self.setting(name).parent.relative_to(ROOT)), "--setting", self.setting(name).name,
                *sized, "--max-epochs", "15", "--network-limit", "200", "--random-orders", "3"]  # fmt: skip


NETWORKS: dict[str, Network] = {
    "resnet18": Network("torchvision", "resnet18", title="torchvision ResNet-18"),
    "vit": Network("timm", "vit_tiny_patch16_224", {"img_size": 32, "patch_size": 4, "embed_dim": 96, "depth": 6,
                                                    "num_heads": 3, "mlp_ratio": 2.0}, epochs=5,
                   title="timm ViT (6 blocks, width 96, patch 4)"),  # fmt: skip
    SHIPPED: Network("timm", "resnet18", {"channels": [32, 64, 128, 256], "stem_width": 32}, image_size=64, epochs=4,
                     title="timm ResNet-18 at half width (the bundled one)", float16=True),  # fmt: skip
}


def _run(command: list[str]) -> None:
    print("$", " ".join(command), flush=True)
    subprocess.run(command, cwd=ROOT, check=True)


def _same_class_pairs(predictions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Every pair ``(i, j)`` of inputs with one predicted class, as two index tensors; None where there is none."""
    pairs = [(i, j) for c in predictions.unique() for i, j in combinations((predictions == c).nonzero().flatten(), 2)]
    return None if not pairs else tuple(torch.stack(v) for v in zip(*pairs))


def pair_shares(drops: torch.Tensor, predictions: torch.Tensor) -> dict:
    """Over every pair of inputs with one predicted class: how many pairs, and the share whose ``(N, U)`` drops
    differ by more than a constant (``std`` over units of the difference above ``PAIR_STD``)."""
    if (pairs := _same_class_pairs(predictions)) is None:
        return {"pairs": 0, "differ": 0}
    i, j = pairs
    differ = (drops[i] - drops[j]).std(dim=1, unbiased=False) > PAIR_STD
    return {"pairs": len(i), "differ": int(differ.sum())}


def shared_bars(drops: torch.Tensor, probability: torch.Tensor, predictions: torch.Tensor, keeps: list[bool]) -> dict:
    """Over every pair of inputs with one predicted class and every unit that keeps the input (``keeps``): how many
    bars the two inputs share, ``drop_u(x1) - drop_u(x2) = p(x1) - p(x2)`` to ``SHARED`` (what a unit whose whole
    output is replaced gives: the network after it predicts ``c(u, ŷ)`` for both)."""
    units = int(sum(keeps))
    if (pairs := _same_class_pairs(predictions)) is None:
        return {"pairs": 0, "units": units, "shared": 0}
    i, j = pairs
    gap = (drops[i] - drops[j] - (probability[i] - probability[j]).unsqueeze(1))[:, torch.tensor(keeps)]
    return {"pairs": len(i), "units": units, "shared": int((gap.abs() < SHARED).sum())}


def last_writers(network: torch.nn.Module, x: torch.Tensor, units: list[str]) -> dict[str, str]:
    """Unit -> the last module of one forward whose output is the unit's output tensor itself, the containers that
    hand it on aside: the unit, unless a later in-place module overwrites it (timm ResNet's ``bn1``, then ``act1 =
    ReLU(inplace=True)``). Grad-CAM reads a unit's output as the network goes on with it, so the package runs on
    that module (``pytorch_grad_cam`` keeps a view of the activations it hooked, overwritten in place on the CPU,
    while its gradient hook sees the tensor before the overwrite)."""
    from laya.model.hooks import Hooks

    names = {m: n for n, m in network.named_modules() if m is not network}
    ran: list[tuple[str, torch.Tensor]] = []

    def hook(module: torch.nn.Module, args: tuple, out: object) -> None:
        if isinstance(out, torch.Tensor):
            ran.append((names[module], out))

    with Hooks() as hooks, torch.no_grad():
        for m in names:
            hooks.after(m, hook)
        network(x)
    outputs = {name: out for name, out in ran}
    return {u: [n for n, out in ran if out is outputs[u] and not u.startswith(f"{n}.")][-1]  # no container of u
            for u in units}


def check(name: str) -> dict:
    """The checks of the module docstring on the attached network ``name``; returns what it writes."""
    from pytorch_grad_cam import GradCAM
    from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget

    from laya.analysis.block_ablation import block_ablation
    from laya.analysis.network.gradcam import unit_gradcam
    from laya.analysis.network.interventions import REFERENCES, reference_inputs
    from laya.analysis.network.lens import load_tuned_lens, unit_lens
    from laya.analysis.network.recording import as_network, prefix_tokens, spatial
    from laya.analysis.network.report_files import load_network_report
    from laya.analysis.network.report_record import REPORT_JSON
    from laya.analysis.sample import sample_indices
    from laya.data.datasets import batch_indices
    from laya.model.checkpoint import load_checkpoint

    network = NETWORKS[name]
    own = network.setting(name) / "own"
    checkpoint = load_checkpoint(own)
    model = checkpoint.model.eval()
    backbone = model.backbone
    report = load_network_report(own)
    test, train = checkpoint.load_data("test"), checkpoint.load_data("train")
    tuned = load_tuned_lens(own, backbone)

    def images(index: torch.Tensor) -> torch.Tensor:  # uint8, in memory or streamed alike
        return next(test.iter_batches([index]))

    def inputs(index: torch.Tensor) -> torch.Tensor:
        return checkpoint.preprocess(images(index))

    # same-class pairs: the report's interventions, and the old stage mean-ablation on the same inputs
    reference = checkpoint.preprocess(reference_inputs(train, REFERENCES, 0))
    old = []
    with torch.no_grad():
        for batch in batch_indices(len(report.indices), 32):
            old.append(block_ablation(model, inputs(report.indices[batch]), reference).drops)
    pairs = {report.method: pair_shares(report.drops, report.predictions),
             "stage mean-ablation": pair_shares(torch.cat(old).double(), report.predictions)}
    if report.skip_drops is not None:
        pairs["skip"] = pair_shares(report.skip_drops, report.predictions)

    # the tuned lens at the last unit, on the whole test split
    agree = total = 0
    with torch.no_grad():
        for batch in batch_indices(len(test), 500):
            lens = unit_lens(backbone, inputs(batch), report.units, tuned)
            agree += int((lens.log_q[:, -1].argmax(-1) == lens.log_p.argmax(-1)).sum())
            total += len(batch)

    # Grad-CAM at every unit against the package
    cam_index = sample_indices(test.labels, CAM_SAMPLE, 0)
    x = inputs(cam_index)
    ours = unit_gradcam(backbone, x, report.units)
    net = as_network(backbone)
    targets = [ClassifierOutputTarget(int(c)) for c in ours.classes]
    theirs = []
    writers = last_writers(net, x[:1], report.units)
    for unit in report.units:  # token outputs as the package's vit_reshape_transform lays them out
        cam = GradCAM(net, [net.get_submodule(writers[unit])],
                      reshape_transform=lambda t: spatial(t, prefix_tokens(net, t.shape[1]) if t.ndim == 3 else 0))
        theirs.append(torch.from_numpy(cam(x.clone().requires_grad_(True), targets)))  # the weights are frozen
        cam.activations_and_grads.release()
    cam_diff = float((ours.maps - torch.stack(theirs, 1)).abs().max())

    # one same-class pair for the figures: the class most often predicted right in the sample, its first two inputs
    right = report.predictions == report.labels
    top = int(report.predictions[right].mode().values)
    a, b = (right & (report.predictions == top)).nonzero().flatten()[:2].tolist()
    pair = report.indices[[a, b]]
    cams = unit_gradcam(backbone, inputs(pair), report.units)
    meta = json.loads((own / REPORT_JSON).read_text())
    own_report = json.loads((own / "report.json").read_text())
    out = {
        "name": name, "title": network.title, "family": network.family, "model": network.model,
        "model_kwargs": network.kwargs, "image_size": network.image_size,
        "train_command": " ".join(["python", *network.train_command(name)[1:]]),
        "attach_command": " ".join(["python", *network.attach_command(name)[1:]]),
        "accuracy": own_report["accuracy_ci"], "evaluated": own_report["dataset"]["n"], "test_n": len(test),
        "units": report.units, "residual": report.residual, "method": report.method,
        "sample": len(report.indices), "pairs": pairs,
        "shared": shared_bars(report.drops, report.probability, report.predictions, report.residual),
        "lens": {"agree": agree, "n": total, "fit": meta["lens"].get("fit")},
        "gradcam": {"max_abs_diff": cam_diff, "n": len(cam_index), "units": len(report.units)},
        "agreement": report.agreement.to_dict(orient="records"),
        "network_report": {k: meta.get(k) for k in ("units", "residual", "lesion", "gradcam")},  # as stored
        "example": {
            "class": report.classes[top], "indices": pair.tolist(),
            "drops": report.drops[[a, b]].tolist(), "old_drops": torch.cat(old)[[a, b]].tolist(),
            "lens_prob": report.lens_prob[[a, b]].tolist(), "lens_class": report.lens_class[[a, b]].tolist(),
            "prediction_depth": report.prediction_depth[[a, b]].tolist(),
            "images": images(pair).tolist(),
            "cams": [[[[round(v, 3) for v in row] for row in m] for m in maps] for maps in cams.maps.tolist()],
        },
        "classes": report.classes,
    }  # fmt: skip
    DOCS.mkdir(parents=True, exist_ok=True)
    (DOCS / f"{name}.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{name}: pairs {pairs}, lens {agree}/{total}, Grad-CAM max |diff| {cam_diff:.2e}", flush=True)
    return out


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole} ({part / whole:.1%})" if whole else "none"


def markdown(folder: Path = DOCS) -> str:
    """The table of every ``check`` result in ``folder``: what the issue's done-when asks, per network."""
    rows = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    lines = ["| network | test accuracy | units | same-class pairs whose profiles differ (resample · skip · stage "
             "mean-ablation) | tuned lens at the last unit = the network's class (its identity translator: by "
             "construction) | Grad-CAM vs `pytorch_grad_cam`, largest difference |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        pairs = r["pairs"]
        cells = " · ".join(_share(pairs[k]["differ"], pairs[k]["pairs"]) if k in pairs else "n/a"
                           for k in ("resample", "skip", "stage mean-ablation"))  # fmt: skip
        accuracy = r["accuracy"]
        lens = r["lens"]
        lines.append(f"| {r['title']} | {accuracy['estimate']:.4f} [{accuracy['low']:.4f}, {accuracy['high']:.4f}] "
                     f"on {r['evaluated']} | {len(r['units'])} ({sum(r['residual'])} residual) | {cells} | "
                     f"{_share(lens['agree'], lens['n'])} | {r['gradcam']['max_abs_diff']:.1e} over "
                     f"{r['gradcam']['units']} units × {r['gradcam']['n']} inputs |")  # fmt: skip
    return "\n".join(lines) + "\n"


def agreement_markdown(name: str, folder: Path = DOCS) -> str:
    """Which cheap per-unit score ranks the units as the interventions do, on network ``name``: the report's
    agreement table (mean per-input Spearman over the units that keep the input, 95 % bootstrap CI over inputs),
    the two baselines of structure alone, and per score its margin over the better one ("–" in a check from before
    the baselines)."""
    r = json.loads((folder / f"{name}.json").read_text())

    def interval(m: float | None, low: float | None, high: float | None) -> str:
        return "–" if m is None else f"{m:.3f} [{low:.3f}, {high:.3f}]"

    lines = ["| intervention | score | Spearman with the drops [95 % CI] | units per input | inputs | over the better "
             "baseline [95 % CI] | trusted |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for a in r["agreement"]:
        baseline = a.get("kind") == "baseline"
        margin = "baseline" if baseline else interval(a.get("vs_baseline"), a.get("vs_low"), a.get("vs_high"))
        trusted = "baseline" if baseline else "–" if a.get("trusted") is None else "yes" if a["trusted"] else "no"
        lines.append(f"| {a['intervention']} | {a['score']} | {interval(a['spearman_mean'], a['ci_low'], a['ci_high'])}"
                     f" | {a.get('units', '–')} | {a['n']} | {margin} | {trusted} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def _half(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.half() if v.is_floating_point() else v for k, v in state.items()}


def rounded(source: Path, dest: Path) -> None:
    """``source``'s state dict with every floating tensor in float16 (the network attached and shipped)."""
    from safetensors.torch import load_file, save_file

    save_file(_half(load_file(source)), dest)


def ship(name: str = SHIPPED) -> Path:
    """Copy the attached setting of ``name`` into ``models/`` without the files the bundled settings leave out
    (``per_input.safetensors``), the frozen network stored in float16: lossless, since it was attached from its
    float16 weights, so the heads' sha256 pins (of the loaded weights) and every recorded output stay valid."""
    from safetensors.torch import load_file, save_file

    source, dest = NETWORKS[name].setting(name), ROOT / "models" / NETWORKS[name].setting(name).name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("per_input.safetensors"))
    backbone = load_file(dest / "backbone.safetensors")
    half = _half(backbone)
    if any(not torch.equal(half[k].to(v.dtype), v) for k, v in backbone.items()):
        raise ValueError(f"{name}'s backbone is not exactly float16; attach it from {NETWORKS[name].attached_weights(name)}")
    save_file(half, dest / "backbone.safetensors", metadata={"format": "laya-backbone"})
    return dest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=list(NETWORKS), choices=list(NETWORKS))
    parser.add_argument("--steps", nargs="*", default=["train", "attach", "check"], choices=["train", "attach", "check"])
    parser.add_argument("--force", action="store_true", help="rerun steps whose output exists")
    parser.add_argument("--ship", action="store_true", help=f"copy the attached {SHIPPED} into models/")
    args = parser.parse_args(argv)
    if args.ship:
        print(f"wrote {ship()}")
        return
    for name in args.only:
        network = NETWORKS[name]
        if "train" in args.steps and (args.force or not network.weights(name).exists()):
            _run(network.train_command(name))
        if "train" in args.steps and network.float16 and (args.force or not network.attached_weights(name).exists()):
            rounded(network.weights(name), network.attached_weights(name))
        if "attach" in args.steps and (args.force or not (network.setting(name) / "own" / "network.json").exists()):
            _run([*network.attach_command(name), *(["--overwrite"] if network.setting(name).exists() else [])])
        if "check" in args.steps:
            check(name)


if __name__ == "__main__":
    main()
