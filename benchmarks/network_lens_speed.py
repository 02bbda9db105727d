"""What the network's own lens and all-unit Grad-CAM cost, as multiples of one forward of the network.

    python benchmarks/network_lens_speed.py [--threads 1] [--rounds 20]

One input, on the CPU: a torchvision ResNet-18 at 32 px (units ``layer1.0`` ... ``layer4.1``) and a timm
``vit_tiny_patch16_224`` at 224 px (units ``blocks.0`` ... ``blocks.11``), random weights (the cost does not
depend on them). ``forward``: the network's own forward without gradients; ``lens``: the tuned lens of every unit
(``unit_lens``, one recorded forward + one batched read-out; the ViT's logit lens too); ``gradcam``: Grad-CAM at
every unit (``unit_gradcam``, one forward + one backward). Measured in one run: the fastest of ``--rounds``
alternating calls of each, so that load changes affect all alike. Budgets: lens <= 1.2x, Grad-CAM <= 3x.
"""

from __future__ import annotations

import timm
import torch
import torchvision
from common import interleaved_seconds, parser

from laya.analysis.network.gradcam import unit_gradcam
from laya.analysis.network.lens import TunedLens, TunedLensConfig, own_readout, unit_lens


def networks() -> list[tuple[str, torch.nn.Module, int, list[str]]]:
    resnet = torchvision.models.resnet18(num_classes=10).eval()
    vit = timm.create_model("vit_tiny_patch16_224", num_classes=10).eval()
    return [
        ("torchvision resnet18 32px", resnet, 32, [f"layer{s}.{b}" for s in range(1, 5) for b in range(2)]),
        ("timm vit_tiny_patch16_224", vit, 224, [f"blocks.{i}" for i in range(12)]),
    ]


def tuned_lens(network: torch.nn.Module, x: torch.Tensor, units: list[str]) -> TunedLens:
    """A tuned lens of the right shape (identity-initialised: fitting does not change its cost)."""
    from laya.analysis.network.recording import run_units

    readout = own_readout(network)
    with torch.no_grad():
        dims = [readout.pooled(network, out).shape[1] for out in run_units(network, x, units).outputs]
    return TunedLens(TunedLensConfig(units, dims, readout.width, 10, readout.space)).eval()


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch threads {torch.get_num_threads()}, fastest of {args.rounds} alternating calls, one input")
    print(f"{'network':<28} {'forward ms':>10} {'lens x':>7} {'logit lens x':>12} {'Grad-CAM x':>10}")
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
        logit = f"{t['logit'] / t['forward']:.2f}" if "logit" in t else "n/a"
        print(f"{name:<28} {t['forward'] * 1e3:>10.2f} {t['lens'] / t['forward']:>7.2f} {logit:>12} "
              f"{t['gradcam'] / t['forward']:>10.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
