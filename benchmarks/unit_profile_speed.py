"""One input's profile over every unit: skip against U + 1 batch-1 forwards (budget <= 1), resample K=8 against its own
suffix work, K rows from each unit on (budget <= 1.25).

    python benchmarks/unit_profile_speed.py [--device cpu|cuda] [--sizes 32,224] [--threads 1] [--out docs/speed]

Two settings of each kind of network, random weights, their own classifiers as the head, as ``laya attach`` opens
them: at 32 px, the torchvision ResNet-18 and the timm ViT that ``scripts/own_networks.py`` trains on the CIFAR-10
copy and attaches (the networks of docs/your-classifier.md, built from its ``NETWORKS``); at 224 px, a torchvision
ResNet-18 and a timm ViT-S/16 at ImageNet's size. ``--sizes`` keeps the settings of the sizes named. Each profile is
one pass of the input, then one pass in which every unit's rows join the batch at their unit
(:func:`~laya.analysis.network.interventions.intervene`). Timed twice: a checkpoint's *first* input, which also
records the references (one pass of the K references, where the method needs them), and *each further input*, the
references recorded once beforehand (:func:`~laya.analysis.network.interventions.record_references`, as the
dashboard keeps them per model and the network report per run). The budget is the per-input cost; the first input's
is shown beside it. Each baseline is timed in the same run, the calls interleaved. Skip's is ``U + 1`` forwards of
the input alone. Resample's is the work it cannot avoid, ``K`` rows run from each unit on (:func:`suffix_passes`):
per unit one pass of the input whose batch becomes ``K`` rows at that unit's output, less the same pass stopped
there (the one-row prefix each such pass repeats, which the profile runs once). ``--out DIR`` writes ``DIR/unit_profile_speed.json`` (the rows, the command line, the commit, the
machine, the threads and the load average), which ``docs/speed.md``'s ``network-speed`` block is generated from.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from common import ROOT, interleaved_seconds, parser, run_facts, write_result

from laya.analysis.network import intervene, network_units, record_references
from laya.analysis.network.units import Unit
from laya.model.hooks import Hooks, layer_tensor, with_layer_tensor
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.classifier import LayerwiseClassifier
from laya.model.own_head import own_head

sys.path.insert(0, str(ROOT / "scripts"))
from own_networks import NETWORKS as TRAINED  # noqa: E402  (the networks trained on the CIFAR-10 copy)

BUDGET = {"skip": 1.0, "resample": 1.25}  # each input's profile against its baseline (module docstring)
METHODS = ("skip", "resample")
WHEN = {"first": "first input (references)", "recorded": "each further input"}


class _Stopped(Exception):
    """Raised by :func:`suffix_passes`'s hook to end a pass at a unit."""


def suffix_passes(model: torch.nn.Module, x: torch.Tensor, units: list[Unit], rows: int, stop: bool = False) -> None:
    """Per unit with a module, one forward of ``x`` ``(1, C, H, W)`` whose output at that unit becomes ``rows``
    copies, the rest of the network running on them (the rows a resample profile joins there; a layer the head
    reads from before the unit gives its one row to all, as in the profile); ``stop``: each pass ends at the unit
    instead (its prefix alone)."""

    def grow(module: torch.nn.Module, args: tuple, out: object) -> object:
        if stop:
            raise _Stopped
        value = layer_tensor(out)
        return with_layer_tensor(out, value.expand(rows, *value.shape[1:]).contiguous())

    def widen(module: torch.nn.Module, args: tuple) -> tuple:  # the head's hidden states, one batch size
        return ([h.expand(rows, *h.shape[1:]) for h in args[0]], *args[1:])

    with torch.inference_mode():
        for unit in units:
            if unit.block is None:
                continue
            with Hooks() as hooks:
                hooks.after(unit.block.module, grow)
                if isinstance(model, LayerwiseClassifier):
                    hooks.before(model.head, widen)
                try:
                    model(x)
                except _Stopped:
                    pass


def settings() -> list[tuple[str, BackboneConfig, int]]:
    """``(name, config, size)``: the networks of ``scripts/own_networks.py`` at the size they were trained at, then
    a ResNet-18 and a ViT-S/16 at ImageNet's 224 px."""
    trained = [(n.title, BackboneConfig(name=n.family, model=n.model, model_kwargs={**n.kwargs, "num_classes": 10}),
                n.image_size) for n in (TRAINED["resnet18"], TRAINED["vit"])]  # fmt: skip
    imagenet = [(f"{family} {model}", BackboneConfig(name=family, model=model, model_kwargs={"num_classes": 10}), 224)
                for family, model in (("torchvision", "resnet18"), ("timm", "vit_small_patch16_224"))]  # fmt: skip
    return trained + imagenet


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--sizes", default="32,224", help="the settings of these input sizes (comma-separated)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=None, help="write unit_profile_speed.json into this folder")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    facts, rows = run_facts(str(device)), []
    sizes = {int(s) for s in args.sizes.split(",")}
    for name, config, size in (s for s in settings() if s[2] in sizes):
        config.in_channels, config.input_size, config.pre_logits, config.freeze = 3, size, True, True
        torch.manual_seed(0)
        backbone = build_backbone(config)
        model = LayerwiseClassifier(backbone, own_head(backbone)).to(device).eval()
        g = torch.Generator().manual_seed(0)
        x, reference = (torch.randn(n, 3, size, size, generator=g).to(device) for n in (1, 8))
        units = network_units(model.backbone, x)
        U = len(units)

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize()

        def forwards() -> None:
            with torch.inference_mode():
                for _ in range(U + 1):
                    model(x)
            sync()

        def profile(method: str, recorded: bool):
            given = record_references(model, units, reference) if recorded else reference
            return lambda: (intervene(model, x, units, method, given), sync())

        K = len(reference)
        calls = {"forwards": forwards,
                 "suffixes": lambda: (suffix_passes(model, x, units, K), sync()),
                 "prefixes": lambda: (suffix_passes(model, x, units, K, stop=True), sync())} | {
                 f"{m} {r}": profile(m, r == "recorded") for m in METHODS for r in ("first", "recorded")}  # fmt: skip
        times = interleaved_seconds(calls, rounds=args.rounds)
        baselines = {"skip": (f"{U + 1} batch-1 forwards", times["forwards"]),
                     "resample": (f"its suffix work, {K} rows from each of the {U} units on",
                                  times["suffixes"] - times["prefixes"])}  # fmt: skip
        fallback = intervene(model, x, units, "skip", reference).methods.count("resample")
        print(f"{name} on {device} at {size}px: {U} units ({sum(u.residual for u in units)} residual), "
              f"skip falls back to resample on {fallback}")  # fmt: skip
        for method in METHODS:
            baseline, baseline_s = baselines[method]
            print(f"  {method} baseline: {baseline} {baseline_s * 1e3:9.1f} ms")
            for when, budget in (("first", None), ("recorded", BUDGET[method])):
                ratio = times[f"{method} {when}"] / baseline_s
                print(f"  {method:8s} profile, {WHEN[when]:24s} {times[f'{method} {when}'] * 1e3:9.1f} ms   ratio "
                      f"{ratio:.2f}" + (f"  (budget <= {budget:g})" if budget else ""))  # fmt: skip
                rows.append({"kind": "profile", "view": method, "network": name, "size": size, "units": U,
                             "fallback_units": fallback if method == "skip" else 0, "references": K,
                             "references_recorded": when == "recorded", "ms": times[f"{method} {when}"] * 1e3,
                             "baseline": baseline, "baseline_ms": baseline_s * 1e3, "ratio": ratio,
                             "budget": budget})  # fmt: skip
    if args.out:
        print(f"wrote {write_result(args.out, 'unit_profile_speed', facts, rounds=args.rounds, rows=rows)}")


if __name__ == "__main__":
    main()
