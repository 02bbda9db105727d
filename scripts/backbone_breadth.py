"""Breadth check of the ``timm`` backbone family: LAYA on many architectures, at a small and the native size.

For each architecture (random initialisation, the smallest variant, shrunk with ``model_kwargs``
where timm allows it) and each of two input sides, this builds the backbone through
:func:`laya.model.backbones.build_backbone` (the input size reaches timm as ``img_size`` where the
model takes one), puts a LAYA head on it, runs a forward pass of one image and leave-one-layer-out.
Nothing is trained or downloaded. ``tests/model/backbones/test_timm_breadth.py`` runs it; this script also
writes the result file whose table ``docs/backbones.md`` shows (a generated block, ``scripts/prose_claims.py``)::

    python scripts/backbone_breadth.py --out docs/backbone-breadth.json && python scripts/prose_claims.py --write
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from laya.analysis.head.ablation import leave_one_out
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.backbones.timm import native_size
from laya.model.classifier import LayerwiseClassifier
from laya.model.heads import HeadConfig, build_head

SMALL = 64
# family -> (timm model, model_kwargs that shrink it, small side). The first 19 families are the list.
ARCHITECTURES: dict[str, tuple[str, dict, int]] = {
    "resnet": ("resnet10t", {}, SMALL),
    "convnext": ("convnext_atto", {}, SMALL),
    "efficientnet": ("efficientnet_b0", {}, SMALL),
    "mobilenetv3": ("mobilenetv3_small_050", {}, SMALL),
    "regnet": ("regnetx_002", {}, SMALL),
    "densenet": ("densenet121", {}, SMALL),
    "inception": ("inception_v3", {}, 96),  # 64 is refused: the stem's valid convolutions need >= 75 px
    "vit": ("vit_tiny_patch16_224", {"depth": 2}, SMALL),
    "deit": ("deit_tiny_patch16_224", {"depth": 2}, SMALL),
    "swin": ("swin_tiny_patch4_window7_224", {"embed_dim": 24}, SMALL),
    "beit": ("beit_base_patch16_224", {"depth": 2, "embed_dim": 64, "num_heads": 4}, SMALL),
    "eva": ("eva02_tiny_patch14_224", {"depth": 2}, SMALL),
    "mixer": ("mixer_s32_224", {}, SMALL),
    "levit": ("levit_128s", {}, SMALL),
    "coatnet": ("coatnet_nano_rw_224", {}, SMALL),
    "maxvit": ("maxvit_nano_rw_256", {}, SMALL),
    "poolformer": ("poolformer_s12", {}, SMALL),
    "fastvit": ("fastvit_t8", {}, SMALL),
    "edgenext": ("edgenext_xx_small", {}, SMALL),
    "cait": ("cait_xxs24_224", {"depth": 2}, SMALL),
    "xcit": ("xcit_nano_12_p16_224", {"depth": 2}, SMALL),
    "mobilevit": ("mobilevit_xxs", {}, SMALL),
    "efficientvit": ("efficientvit_b0", {}, SMALL),
    "pvt-v2": ("pvt_v2_b0", {}, SMALL),
    "tinyvit": ("tiny_vit_5m_224", {}, SMALL),
    "ghostnet": ("ghostnet_050", {}, SMALL),
    "hgnet-v2": ("hgnetv2_b0", {}, SMALL),
    "starnet": ("starnet_s1", {}, SMALL),
    "efficientformer-v2": ("efficientformerv2_s0", {}, SMALL),
    "mambaout": ("mambaout_femto", {}, SMALL),
}


@dataclass
class Result:
    """One architecture at one input side."""

    family: str
    model: str
    kwargs: dict
    size: int
    layers: int
    params: int
    seconds: float
    loo_finite: bool


def check(family: str, size: int) -> Result:
    """Build LAYA on ``family``'s model at ``size``, forward one image, leave each layer out."""
    model, kwargs, _ = ARCHITECTURES[family]
    start = time.perf_counter()
    torch.manual_seed(0)
    config = BackboneConfig(name="timm", model=model, in_channels=3, input_size=size, model_kwargs=kwargs)
    backbone = build_backbone(config).eval()
    head = build_head(HeadConfig(d_star=16, scorer_hidden=16), backbone.layer_dims, 3)
    net = LayerwiseClassifier(backbone, head).eval()
    with torch.inference_mode():
        out = net(torch.rand(1, 3, size, size))
        loo = leave_one_out(net.head, out.hidden)
    return Result(
        family=family, model=model, kwargs=kwargs, size=size, layers=len(backbone.layer_dims),
        params=sum(p.numel() for p in backbone.parameters()), seconds=time.perf_counter() - start,
        loo_finite=bool(torch.isfinite(loo.drops).all()) and loo.drops.shape == (1, len(backbone.layer_dims)),
    )  # fmt: skip


def sizes(family: str) -> tuple[int, int]:
    """The small side and the model's native side."""
    model, _, small = ARCHITECTURES[family]
    return small, native_size(model)


def table(results: list[Result]) -> str:
    """Markdown table: one row per architecture, both sizes."""
    rows = [
        "| family | timm model | model_kwargs | passed | small side: layers, s | native side: layers, s | parameters |",
        "|---|---|---|---|---|---|---|",
    ]
    by_family: dict[str, list[Result]] = {}
    for r in results:
        by_family.setdefault(r.family, []).append(r)
    for family, (small, native) in by_family.items():
        kwargs = ", ".join(f"{k}={v}" for k, v in small.kwargs.items()) or "—"
        ok = "✓" if small.loo_finite and native.loo_finite else "✗"
        rows.append(
            f"| {family} | `{small.model}` | {kwargs} | {ok} | {small.size} px: {small.layers}, {small.seconds:.2f} | "
            f"{native.size} px: {native.layers}, {native.seconds:.2f} | {small.params / 1e6:.2f} M |"
        )
    return "\n".join(rows)


def run_all() -> list[Result]:
    results = []
    for family in ARCHITECTURES:
        for size in sizes(family):
            results.append(check(family, size))
            print(f"{family:20s} {size:4d} px  {results[-1].seconds:6.2f} s", file=sys.stderr)
    return results


def markdown(path: Path) -> str:
    """The generated block of ``docs/backbones.md``: the table and the run's conditions, from the result file."""
    run = json.loads(path.read_text())
    return (
        f"{table([Result(**r) for r in run['results']])}\n\n{run['architectures']} architectures, "
        f"{len(run['results'])} builds, {run['seconds']:.0f} s in all on one CPU thread, load average "
        f"{run['load_average']:.0f} on {run['cpus']} cores (torch {run['torch']}; "
        "`python scripts/backbone_breadth.py --out docs/backbone-breadth.json`).\n"
    )


def summary(path: Path) -> str:
    """The page's verdict line: how many builds of the result file read every layer with a finite LOO."""
    run = json.loads(path.read_text())
    ok = sum(bool(r["loo_finite"]) for r in run["results"])
    families = len({r["family"] for r in run["results"]})
    return (f"**Verdict:** {ok} of {len(run['results'])} timm builds ({run['architectures']} architectures, "
            f"{families} families) return every layer and a finite leave-one-layer-out under a LAYA head "
            "(`docs/backbone-breadth.json`).\n")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="JSON result file to write (docs/backbone-breadth.json)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    results = run_all()
    run = {"architectures": len(ARCHITECTURES), "seconds": time.perf_counter() - start,
           "load_average": os.getloadavg()[0], "cpus": os.cpu_count(), "torch": torch.__version__,
           "results": [asdict(r) for r in results]}  # fmt: skip
    print(table(results))
    if args.out:
        args.out.write_text(json.dumps(run, indent=1) + "\n")


if __name__ == "__main__":
    main()
