"""Sanity check of every map method of the pixel benchmark: the cascading model-parameter randomisation test
(Adebayo et al., 2018; ``laya.analysis.sanity``).

    python benchmarks/map_sanity.py [--checkpoints models/cifar10-cnn/laya ...] [--n 500] [--seed 0] [--resume]

For each checkpoint, on the pixel benchmark's class-balanced random sample of test images
(``spatial_maps.balanced_images``, seeded with ``--seed``; default n as there: 500 at a model input of at most
32 px, else 100) and the trained network's predicted class, kept fixed: the network is re-initialised group by
group from the top down (the head, then each layer the head reads, last layer first; then, where parameters are
left, the whole backbone), and after each step every method's map is compared with its map on the trained
network by Spearman's rank correlation over the frame's pixels, mean over images with a 95 % bootstrap CI.

Methods: the **exact** maps (``laya.analysis.head.spatial``: each layer's, and the all-layer sum), **Grad-CAM**,
**HiResCAM** and **LayerCAM** (pytorch-grad-cam's multi-layer aggregate on all layers, as in the benchmark) and
**unit Grad-CAM** (``laya.analysis.network.gradcam.unit_gradcam``) at each layer's module. An attached network's own
classifier (``<setting>/own``) is checked as the network itself, by its units (``network_units``): its final linear
layer, then each unit from the last down, then the rest of the network; the maps are unit Grad-CAM at every unit
(the per-unit maps of the network's own views; its head's exact map is one pooled layer). A (method, layer) whose
maps are constant on the trained network for every image (a 1x1 grid) has no ranking and no row. A method
**barely changes** where the CI of its mean Spearman after the last step reaches ``laya.analysis.sanity.THRESHOLD``.

Writes one CSV per checkpoint into ``--out`` and prints the markdown tables generated from them (``markdown``).
"""

from __future__ import annotations

import csv
import sys
import time
from functools import partial
from pathlib import Path

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, parser
from spatial_maps import (
    ALL,
    ANCHORS,
    Logits,
    anchor_maps,
    balanced_images,
    cam_modules,
    default_n,
    exact_maps,
    to_frame,
    token_reshape,
    write_rows,
)

FIELDS = ["checkpoint", "sample", "step", "method", "layer", "n", "mean", "low", "high", "flag"]
EXACT, UNIT = "exact", "unit Grad-CAM"
TRAINED = "trained"
FLAGGED, CHANGES = "barely changes", "changes"


def groups(model: nn.Module) -> list[tuple[str, list[str]]]:
    """``(label, module names)`` from the top down: the head, each layer module the head reads (last first), and
    ``"rest of the backbone"`` (the whole backbone re-drawn) where parameters outside those remain."""
    names = {id(m): n for n, m in model.named_modules()}
    layers = [(name, names[id(m)]) for name, m in zip(model.layer_names, cam_modules(model.backbone))
              if m is not None and id(m) in names]  # fmt: skip
    out = [("head", ["head"]), *[(label, [module]) for label, module in reversed(layers)]]
    covered = {id(p) for _, group in out for n in group for p in model.get_submodule(n).parameters()}
    if any(id(p) not in covered for p in model.parameters()):
        out.append(("rest of the backbone", ["backbone"]))
    return out


def unit_names(model: nn.Module) -> dict[str, str]:
    """Layer name -> the module name ``unit_gradcam`` hooks for it (layers with a module only)."""
    names = {id(m): n for n, m in model.named_modules()}
    return {layer: names[id(m)] for layer, m in zip(model.layer_names, cam_modules(model.backbone))
            if m is not None and id(m) in names}  # fmt: skip


def network_groups(network: nn.Module, units: list[str]) -> list[tuple[str, list[str]]]:
    """``(label, module names)`` of an attached network from the top down: its final linear layer, each unit (last
    first), and ``"rest of the network"`` (all of it re-drawn) where parameters outside those remain."""
    from laya.model.backbones.pre_logits import final_linear

    linear = final_linear(network)
    out = [(linear, [linear]), *[(u, [u]) for u in reversed(units)]]
    covered = {id(p) for _, group in out for n in group for p in network.get_submodule(n).parameters()}
    if any(id(p) not in covered for p in network.parameters()):
        out.append(("rest of the network", [""]))
    return out


def unit_maps(
    network: nn.Module, pre: nn.Module, raw: Tensor, target: Tensor, units: dict[str, str], batch: int
) -> dict[tuple[str, str], Tensor]:
    """``(UNIT, label) -> (B, S, S)`` unit Grad-CAM of ``network`` at every unit (``label -> module name``) on the
    source-frame images ``raw`` (uint8) for ``target``."""
    from laya.analysis.network.gradcam import unit_gradcam

    modules = list(units.values())
    cams = torch.cat([unit_gradcam(network, pre(raw[i : i + batch]), modules, target[i : i + batch]).maps
                      for i in range(0, len(raw), batch)])  # (B, U, H, W) at the model's input size  # fmt: skip
    return {(UNIT, label): to_frame(cams[:, k], raw.shape[-1]) for k, label in enumerate(units)}


def all_maps(model: nn.Module, pre: nn.Module, raw: Tensor, target: Tensor, methods, batch: int) -> dict:
    """``(method, layer) -> (B, S, S)`` maps of ``model`` on the source-frame images ``raw`` (uint8) for ``target``."""
    images, size = raw.float() / 255.0, raw.shape[-1]
    out: dict[tuple[str, str], list[Tensor]] = {}
    for i in range(0, len(raw), batch):
        for layer, m in exact_maps(model, pre(raw[i : i + batch]), target[i : i + batch], size).items():
            out.setdefault((EXACT, layer), []).append(m)
    maps = {k: torch.cat(v) for k, v in out.items()} | unit_maps(model, pre, raw, target, unit_names(model), batch)
    net = Logits(model, pre).eval()
    backbone = model.backbone
    modules = [m for m in cam_modules(backbone) if m is not None]
    reshape = token_reshape(backbone.model.num_prefix_tokens) if getattr(backbone, "tokens", False) else None
    for method in methods:
        maps[(method, ALL)] = anchor_maps(method, net, modules, ["_"] * len(modules), images, target, reshape,
                                          batch, rows=[])[ALL]  # fmt: skip
    return maps


def varies(maps: Tensor) -> bool:
    """Whether some map of ``maps (B, S, S)`` varies over the frame beyond rounding (a resampled 1x1 map wobbles
    about 1e-16 of its value)."""
    flat = maps.flatten(1).double()
    return bool((flat.amax(1) - flat.amin(1) > 1e-12 * flat.abs().amax(1)).any())


def sanity(checkpoint: Path, n: int, seed: int, batch: int, resamples: int, methods=ANCHORS) -> list[dict]:
    """CSV rows of one checkpoint: per randomisation step, method and layer, the mean Spearman with its CI."""
    from laya.analysis.network.recording import as_network
    from laya.analysis.network.units import network_units
    from laya.analysis.sanity import barely_changes, cascading_randomization, spearman
    from laya.model.checkpoint import load_checkpoint
    from laya.model.own_head import is_own_head

    ck = load_checkpoint(checkpoint)
    model, pre = ck.model.eval(), ck.preprocess
    for p in model.parameters():
        p.requires_grad_(False)
    raw, labels, source = balanced_images(ck, n, seed)
    name = f"{checkpoint.parent.name}/{checkpoint.name}"
    with torch.inference_mode():
        target = torch.cat([model(pre(raw[i : i + batch])).logits.argmax(1) for i in range(0, len(raw), batch)])
    target = target.clone()  # a normal tensor: unit_gradcam's backward saves it
    sample = f"balanced seed {seed}" if labels is not None else f"random seed {seed}"
    print(f"\n== {name}: {source}; the trained network's predicted class, kept fixed", flush=True)
    if is_own_head(ck.meta.train):  # the network itself, by its units
        subject = as_network(model.backbone)
        units = [u.name for u in network_units(model.backbone)]
        steps = network_groups(subject, units)
        maps_of = partial(unit_maps, pre=pre, raw=raw, target=target, units=dict(zip(units, units)), batch=batch)
    else:
        subject, steps = model, groups(model)
        maps_of = partial(all_maps, pre=pre, raw=raw, target=target, methods=methods, batch=batch)
    start = time.perf_counter()
    keep = {k: m for k, m in maps_of(subject).items() if varies(m)}
    rows = []
    for k, (label, net) in enumerate(cascading_randomization(subject, steps, seed)):
        maps = maps_of(net.eval())
        for (method, layer), before in keep.items():
            ci, flagged = barely_changes(spearman(before, maps[(method, layer)]), resamples=resamples)
            flag = (FLAGGED if flagged else CHANGES) if k == len(steps) - 1 else ""
            rows.append({"checkpoint": name, "sample": sample, "step": label, "method": method, "layer": layer,
                         "n": len(raw), "mean": ci.estimate, "low": ci.low, "high": ci.high, "flag": flag})  # fmt: skip
        print(f"randomised down to {label}: {time.perf_counter() - start:.0f} s", flush=True)
    return rows


def write_csv(rows: list[dict], path: Path) -> None:
    write_rows(rows, FIELDS, path)


def done(path: Path, n: int, seed: int) -> bool:
    """Whether the CSV at ``path`` holds a finished run on the class-balanced sample of ``n`` images, ``seed``."""
    if not path.exists():
        return False
    rows = list(csv.DictReader(path.open()))
    return bool(rows) and all(r["sample"] == f"balanced seed {seed}" and r["n"] == str(n) for r in rows)


def _method(method: str, layer: str) -> str:
    return f"{method}, {layer}"


def markdown(folder: Path) -> str:
    """Per checkpoint, a table (method and layer) x (randomised down to ...) of the mean Spearman [95 % CI], the last
    column the flag; then one line naming the methods that barely change. Empty without CSVs."""
    from laya.analysis.sanity import THRESHOLD

    rows = [r for path in sorted(Path(folder).glob("*.csv")) for r in csv.DictReader(path.open())]
    out = []
    for name in dict.fromkeys(r["checkpoint"] for r in rows):
        mine = [r for r in rows if r["checkpoint"] == name]
        steps = list(dict.fromkeys(r["step"] for r in mine))
        kind, _, seed = mine[0]["sample"].partition(" seed ")
        drawn = "class-balanced random sample" if kind == "balanced" else "random images"
        out += [f"**{name}** ({mine[0]['n']} images, {drawn}, seed {seed}; Spearman of each map with its map on the "
                f"trained network, mean [95 % CI] over images; each column re-initialises one more group, from the "
                f"top down)\n", "| map | " + " | ".join(f"… {s}" for s in steps) + " | after all |",
                "|---|" + "---|" * (len(steps) + 1)]  # fmt: skip
        cells: dict[tuple[str, str], dict[str, str]] = {}
        flags: dict[tuple[str, str], str] = {}
        for r in mine:
            cells.setdefault((r["method"], r["layer"]), {})[r["step"]] = \
                f"{float(r['mean']):.2f} [{float(r['low']):.2f}, {float(r['high']):.2f}]"  # fmt: skip
            if r["flag"]:
                flags[(r["method"], r["layer"])] = r["flag"]
        for key, c in cells.items():
            out.append(f"| {_method(*key)} | " + " | ".join(c.get(s, "") for s in steps) + f" | {flags.get(key, '')} |")
        flagged = [_method(*k) for k, f in flags.items() if f == FLAGGED]
        out += ["", f"Barely change (the CI after the last step reaches {THRESHOLD}): "
                f"{'; '.join(flagged) if flagged else 'none'}; change: {len(flags) - len(flagged)} of {len(flags)} maps.", ""]  # fmt: skip
    return "\n".join(out) + ("\n" if out else "")


def main() -> None:
    from laya.model.checkpoint import load_checkpoint

    p = parser(__doc__.splitlines()[0])
    p.add_argument("--checkpoints", nargs="+", default=["models/cifar10-cnn/laya"], help="checkpoint folders")
    p.add_argument("--n", type=int, default=None, help="test images per checkpoint (default 500 at <= 32 px, else 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the class-balanced sample and of the re-draws")
    p.add_argument("--resume", action="store_true", help="skip checkpoints whose CSV in --out holds this sample")
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--methods", nargs="+", default=list(ANCHORS), choices=ANCHORS)
    p.add_argument("--out", default=str(ROOT / "docs" / "map_sanity"), help="folder: one <setting>-<head>.csv each")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for c in args.checkpoints:
        path = Path(c) if Path(c).is_absolute() else ROOT / c
        n = args.n or default_n(load_checkpoint(path))
        csv_path = Path(args.out) / f"{path.parent.name}-{path.name}.csv"
        if args.resume and done(csv_path, n, args.seed):
            print(f"{csv_path}: done ({n} images, seed {args.seed}), skipped")
            continue
        write_csv(sanity(path, n, args.seed, args.batch, args.resamples, args.methods), csv_path)
    print(f"\ntorch threads {torch.get_num_threads()}; wrote {args.out}\n")
    print(markdown(Path(args.out)))


if __name__ == "__main__":
    main()
