"""What the network's own lens, all-unit Grad-CAM and Captum's layer IG cost, as multiples of one forward.

    python benchmarks/network_lens_speed.py [--threads 1] [--rounds 20] [--captum-rounds 2] [--out docs/speed]

One input, on the CPU, random weights (the cost does not depend on them): the torchvision ResNet-18 and the timm
ViT that ``scripts/own_networks.py`` trains on the CIFAR-10 copy, at their 32 px (units ``layer1.0`` ...
``layer4.1``; ``blocks.0`` ... ``blocks.5``), and a timm ``vit_tiny_patch16_224`` at 224 px (``blocks.0`` ...
``blocks.11``). ``forward``: the network's own forward without gradients; ``lens``: the tuned lens of every unit
(``unit_lens``, one recorded forward + one batched read-out; the ViT's logit lens too); ``gradcam``: Grad-CAM at
every unit (``unit_gradcam``, one forward + one backward). Measured in one run: the fastest of ``--rounds``
alternating calls of each, so that load changes affect all alike. Budgets: lens <= 1.2x, Grad-CAM <= 3x.

Beside them, Captum's ``LayerIntegratedGradients`` on the same units (``n_steps=50``, zero baseline, the predicted
class), the way a user would call it: first every unit in one call (``layer=[...]``, as its docs offer for several
layers; they also say the layers may not feed each other, and units in sequence do), and where Captum refuses, its
error is the outcome and the loop a user falls back to, one call per unit, is timed against the forward in a
second interleaved run: the fastest of ``--captum-rounds`` Captum calls (each is some hundred forwards and
backwards), and of the ``--rounds`` forwards between them in each of those rounds.

``--out DIR`` writes ``DIR/network_lens_speed.json`` (the rows, the command line, the commit, the machine, the
threads and the load average), which ``docs/speed.md``'s ``network-speed`` block is generated from.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import timm
import torch
import torchvision
from captum.attr import LayerIntegratedGradients
from common import ROOT, interleaved_seconds, parser, run_facts, write_result

from laya.analysis.network.gradcam import unit_gradcam
from laya.analysis.network.lens import TunedLens, TunedLensConfig, own_readout, unit_lens

sys.path.insert(0, str(ROOT / "scripts"))
from own_networks import NETWORKS as TRAINED  # noqa: E402  (the networks trained on the CIFAR-10 copy)

BUDGETS = {"lens": 1.2, "gradcam": 3.0}  # the lens view (tuned or logit) and all-unit Grad-CAM, in forwards
STEPS = 50  # Captum's default n_steps


def networks() -> list[tuple[str, torch.nn.Module, int, list[str]]]:
    cnn, small = TRAINED["resnet18"], TRAINED["vit"]
    resnet = torchvision.models.resnet18(num_classes=10).eval()
    trained_vit = timm.create_model(small.model, **small.kwargs, num_classes=10).eval()
    vit = timm.create_model("vit_tiny_patch16_224", num_classes=10).eval()
    return [
        (cnn.title, resnet, cnn.image_size, [f"layer{s}.{b}" for s in range(1, 5) for b in range(2)]),
        (small.title, trained_vit, small.image_size, [f"blocks.{i}" for i in range(small.kwargs["depth"])]),
        ("timm vit_tiny_patch16_224", vit, 224, [f"blocks.{i}" for i in range(12)]),
    ]


def tuned_lens(network: torch.nn.Module, x: torch.Tensor, units: list[str]) -> TunedLens:
    """A tuned lens of the right shape (identity-initialised: fitting does not change its cost)."""
    from laya.analysis.network.recording import run_units

    readout = own_readout(network)
    with torch.no_grad():
        dims = [readout.pooled(network, out).shape[1] for out in run_units(network, x, units).outputs]
    return TunedLens(TunedLensConfig(units, dims, readout.width, 10, readout.space)).eval()


def captum_call(network: torch.nn.Module, x: torch.Tensor, units: list[str]) -> tuple[Callable[[], object], dict]:
    """Captum's layer IG over every unit as a user calls it (the predicted class as target), and what happened: the
    call with ``layer=[every unit]`` where Captum accepts it, else (``refused``: its error) one call per unit."""

    def attribute(layer: torch.nn.Module | list[torch.nn.Module]) -> object:
        with torch.no_grad():
            target = network(x).argmax(-1)
        lig = LayerIntegratedGradients(network, layer, multiply_by_inputs=True)
        return lig.attribute(x, target=target, n_steps=STEPS)

    modules = [network.get_submodule(u) for u in units]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            attribute(modules)
        except Exception as error:  # noqa: BLE001  (whatever Captum raises is the outcome recorded)
            refused = f"{type(error).__name__}: {error}"
        else:
            refused = ""
    said = [str(w.message) for w in caught if "layer" in str(w.message).lower()]
    outcome = {"all_in_one_call": {"refused": refused, "warnings": said}, "steps": STEPS}
    if refused:
        return lambda: [attribute(m) for m in modules], {**outcome, "timed": "one call per unit"}
    return lambda: attribute(modules), {**outcome, "timed": "every unit in one call"}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--captum-rounds", type=int, default=2, help="rounds of the Captum comparison (slow)")
    p.add_argument("--out", type=Path, default=None, help="write network_lens_speed.json into this folder")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    facts, rows = run_facts("cpu"), []
    print(f"torch threads {torch.get_num_threads()}, fastest of {args.rounds} alternating calls, one input "
          f"(Captum: fastest of {args.captum_rounds})")  # fmt: skip
    print(f"{'network':<28} {'forward ms':>10} {'lens x':>7} {'logit lens x':>12} {'Grad-CAM x':>10} {'Captum x':>9}")
    for name, network, size, units in networks():
        x = torch.randn(1, 3, size, size)
        tuned = tuned_lens(network, x, units)
        calls = {
            "forward": lambda: torch.no_grad()(network)(x),
            "lens": lambda: unit_lens(network, x, units, tuned),
            "gradcam": lambda: unit_gradcam(network, x, units),
        }
        if own_readout(network).space == "residual":
            calls["logit"] = lambda: unit_lens(network, x, units)
        t = interleaved_seconds(calls, rounds=args.rounds)
        captum, outcome = captum_call(network, x, units)
        c = interleaved_seconds({"forward": calls["forward"], "captum": captum}, rounds=args.captum_rounds,
                                repeats={"forward": args.rounds})  # fmt: skip
        logit = f"{t['logit'] / t['forward']:.2f}" if "logit" in t else "n/a"
        print(f"{name + f' {size}px':<28} {t['forward'] * 1e3:>10.2f} {t['lens'] / t['forward']:>7.2f} {logit:>12} "
              f"{t['gradcam'] / t['forward']:>10.2f} {c['captum'] / c['forward']:>9.0f}")  # fmt: skip
        if outcome["all_in_one_call"]["refused"]:
            print(f"  Captum, every unit in one call: {outcome['all_in_one_call']['refused']}")
        common = {"network": name, "size": size, "units": len(units), "baseline": "one forward"}
        views = [("lens", "tuned lens", "lens"), ("lens", "logit lens", "logit"), ("gradcam", "Grad-CAM", "gradcam")]
        rows += [{"kind": kind, "view": view, **common, "ms": t[key] * 1e3, "baseline_ms": t["forward"] * 1e3,
                  "ratio": t[key] / t["forward"], "budget": BUDGETS[kind]}
                 for kind, view, key in views if key in t]  # fmt: skip
        rows.append({"kind": "captum", "view": f"Captum LayerIntegratedGradients, {outcome['timed']}", **common,
                     **outcome, "ms": c["captum"] * 1e3, "baseline_ms": c["forward"] * 1e3,
                     "ratio": c["captum"] / c["forward"], "budget": None})  # fmt: skip
    if args.out:
        result = write_result(args.out, "network_lens_speed", facts, rounds=args.rounds,
                              captum_rounds=args.captum_rounds, captum_forward_repeats=args.rounds, rows=rows)
        print(f"wrote {result}")


if __name__ == "__main__":
    main()
