"""Every dashboard page's model time: its default view against one plain forward, for every bundled setting.

    python benchmarks/page_costs.py [--threads 1] [--rounds 30] [--out docs/speed/page_costs.json]

Per setting, on its first bundled example, the model work each page's default view asks
``pages/common/loading.py`` for (Streamlit's caches left out: the first view of an input), timed against one
plain forward, all in one run: the fastest of ``--rounds`` alternating calls, so that load changes affect every
call alike. Both sides start from the decoded image: decoding the upload (``decode_ms``, timed alongside) is the
same for a plain prediction of it. The setting's default head is LAYA (the sidebar's first).

* Inspect: ``explain(approximate=False, ood=...)`` (prediction, scores, LOO, exact maps, the
  uncertainty and OOD scores its status shows, ``depth_views.shown_ood_scores``, from one backbone pass) and the metrics; with its approximate maps opened
  (CLS-token models): ``explain`` with them, on top.
* Inspect's explanation for each head, without the OOD scores (``benchmarks/inspect_speed.py``'s figure, the
  one the 1.5x target is set for), each against its own checkpoint's forward.
* Compare heads: ``explain`` of every head of the setting (approximate maps deferred, as on Inspect; opened:
  each head's explanation with them, on top). Depth analytics: ``input_depth``.
  Activation patching: ``patch_images`` of the first example with layers of the second, at the head.
* Class-wise, Faithfulness, Test-set browser: no model work (they read the bundled reports and sample).
* An attached network's own classifier (a setting with ``own/``): the view its Inspect page leads with,
  ``network_bytes`` (unit profile by resample, K = 8, the lens and Grad-CAM at every unit), against the own
  classifier's forward; the references drawn and recorded once per model, as the dashboard keeps them.

``--out`` writes the JSON that ``docs/speed.md``'s tables are generated from (``markdown_tables``, through
``scripts/prose_claims.py --write``), with the load average before and after the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch
from common import ROOT, inspect_ood, interleaved_seconds, parser

from laya.analysis.depth.fit import DepthFit
from laya.analysis.depth.input_depth import input_depth
from laya.analysis.head.attribution import intrinsic_method
from laya.analysis.head.explain import explain
from laya.analysis.network.explain import network_bytes
from laya.analysis.patching import patch_images
from laya.app.catalog import example_images, find_checkpoints
from laya.data.images import load_image_tensor
from laya.model.checkpoint import Checkpoint, load_checkpoint
from laya.model.own_head import OWN

HEADS = ("laya", "scalarmix", "lastlayer", "concat")
OWN_PAGE = "Inspect, own classifier (the network's units)"
PAGES = {  # page -> what its default view costs beyond one forward, said where it exceeds LIMIT
    "Inspect": "a fixed per-input cost (the float64 head under L + 1 masks, the metrics, the OOD scores in float64) "
    "that a backbone this fast does not hide",
    "Inspect, approximate maps opened": "one more forward and a backward pass per CLS-token layer",
    "Compare heads": "one explanation per head of the setting (one checkpoint each)",
    "Compare heads, approximate maps opened": "one more forward and a backward pass per CLS-token layer, per head",
    "Depth analytics": "every readout, detection score and logit term of the input in float64, a fixed cost that "
    "a backbone this fast does not hide",
    "Activation patching": "both inputs through the backbone, then the head under every patch",
    OWN_PAGE: "the unit profile (K = 8 resampled rows per unit, run from that unit on), the lens and Grad-CAM at "
    "every unit",
    "Class-wise": "",
    "Faithfulness": "",
    "Test-set browser": "",
}
LIMIT = 3.0  # a page whose default view costs more than this many forwards is named, with its reason


def _inspect(ck: Checkpoint, image: torch.Tensor, fit: DepthFit | None, ood: bool | tuple[str, ...] = False) -> object:
    """What Inspect's default view asks for: the explanation (maps deferred; ``ood``: with the uncertainty and OOD
    scores) and the per-input metrics of the scores shown first."""
    e = explain(ck, image, approximate=False, ood=ood, fit=fit)
    return e, e.metrics(e.primary)


def setting_costs(setting: Path, rounds: int) -> dict:
    """One setting's page and per-head Inspect costs (ms and ratios to one forward), measured in one run."""
    cks = {h: load_checkpoint(setting / h) for h in HEADS if (setting / h / "model.json").is_file()}
    ck = cks["laya"]
    first_bytes, second_bytes = (p.read_bytes() for p in example_images(ck.path)[:2])
    spec = ck.meta.input

    def decode(data: bytes = first_bytes) -> torch.Tensor:
        return load_image_tensor(data, spec.channels, spec.source_size)

    first, second = decode(first_bytes), decode(second_bytes)
    image = first
    fit = DepthFit.load(ck.path)

    def forward(c: Checkpoint) -> Callable[[], object]:
        def run() -> object:
            with torch.inference_mode():
                return c.model(c.preprocess(image.unsqueeze(0)))

        return run

    calls: dict[str, Callable[[], object]] = {f"forward {h}": forward(c) for h, c in cks.items()}
    calls |= {f"inspect {h}": (lambda c=c: _inspect(c, first, None, ood=False)) for h, c in cks.items()}
    shown = inspect_ood(ck, fit)  # Inspect's status shows max softmax and the report's best OOD score
    calls["Inspect"] = lambda: _inspect(ck, first, fit, shown)
    deferred = explain(ck, first, approximate=False).spatial
    if deferred is not None and any(deferred.deferred):
        calls["Inspect, approximate maps opened"] = lambda: (_inspect(ck, first, fit, shown), explain(ck, first))
    calls["Compare heads"] = lambda: [explain(c, first, approximate=False) for c in cks.values()]
    if deferred is not None and any(deferred.deferred):
        calls["Compare heads, approximate maps opened"] = lambda: [
            (explain(c, first, approximate=False), explain(c, first)) for c in cks.values()
        ]
    calls["Depth analytics"] = lambda: input_depth(ck, first, fit)
    calls["Activation patching"] = lambda: patch_images(ck, first, second, where="head")
    calls["decode"] = decode
    own = load_checkpoint(setting / OWN) if (setting / OWN / "model.json").is_file() else None
    if own is not None:
        examples = [p.read_bytes() for p in example_images(own.path)]
        calls["forward own"] = forward(own)
        calls[OWN_PAGE] = lambda: network_bytes(own, first_bytes, examples=examples)
    best = interleaved_seconds(calls, rounds)
    plain = best["forward laya"]
    pages = {page: {"ms": best[page] * 1e3, "ratio": best[page] / (best["forward own"] if page == OWN_PAGE else plain)}
             for page in PAGES if page in best}  # fmt: skip
    pages |= {page: {"ms": 0.0, "ratio": 0.0} for page in PAGES if page not in best and not PAGES[page]}
    heads = {h: {"forward_ms": best[f"forward {h}"] * 1e3, "inspect_ms": best[f"inspect {h}"] * 1e3,
                 "ratio": best[f"inspect {h}"] / best[f"forward {h}"],
                 "scores": "intrinsic" if intrinsic_method(c.model.head) else "IG-32"}
             for h, c in cks.items()}  # fmt: skip
    return {"forward_ms": plain * 1e3, "decode_ms": best["decode"] * 1e3, "pages": pages, "heads": heads}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--out", type=Path, default=None, help="write the results as JSON to this file")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    load_start, started = os.getloadavg(), time.time()
    settings = sorted({e.path.parent for e in find_checkpoints(args.models) if e.head == "laya"})
    results = {}
    for setting in settings:
        results[setting.name] = costs = setting_costs(setting, args.rounds)
        line = ", ".join(f"{page} {c['ratio']:.2f}x" for page, c in costs["pages"].items() if c["ms"])
        heads = ", ".join(f"{h} {c['ratio']:.2f}x" for h, c in costs["heads"].items())
        print(f"{setting.name}: forward {costs['forward_ms']:.2f} ms (decoding the upload {costs['decode_ms']:.2f} ms, "
              f"left out of both sides); pages: {line}; Inspect per head: {heads}")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)), "commit": commit.stdout.strip(),
           "threads": torch.get_num_threads(), "rounds": args.rounds, "cpus": os.cpu_count(),
           "load_average": {"start": load_start, "end": os.getloadavg()}, "settings": results}  # fmt: skip
    print(f"load average {load_start[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end ({os.cpu_count()} CPUs)")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")


SETTING_TITLES = {
    "fashion-mnist-mlp": "Fashion-MNIST MLP",
    "cifar10-cnn": "CIFAR-10 CNN",
    "cifar10-efficientnet-lite0": "CIFAR-10 EfficientNet-Lite0",
    "cifar10-vit": "CIFAR-10 ViT",
    "cifar10-resnet18-half": "CIFAR-10 attached ResNet-18",
    "cifar10-resnet20": "CIFAR-10 ResNet-20",
}
HEAD_TITLES = {"laya": "LAYA", "scalarmix": "ScalarMix", "lastlayer": "LastLayer (IG-32)", "concat": "Concat (IG-32)"}


def _cell(ms: float, ratio: float) -> str:
    return "none (reads the reports)" if not ms else f"{ratio:.2f}× ({ms:.1f} ms)"


def markdown_tables(folder: Path) -> str:
    """The speed page's generated block: the per-head Inspect table, the per-page table, the pages over
    :data:`LIMIT` with their reasons, and the server CPU per interaction (``load_test.json``), from ``folder``."""
    run = json.loads((folder / "page_costs.json").read_text())
    settings = list(run["settings"])
    lines = [f"Measured {run['date']} at commit {run['commit']} ({run['threads']} torch thread, fastest of "
             f"{run['rounds']} alternating calls, load average {run['load_average']['start'][0]:.1f} → "
             f"{run['load_average']['end'][0]:.1f} on {run['cpus']} CPUs; no GPU).", "",
             "**Inspect's explanation, per head** (prediction, scores, LOO, metrics, the maps as first shown; model "
             "time against the head's own plain forward, both from the decoded image: decoding the upload, the same for "
             "a plain prediction of it, is left out of both and given in its own column):", "",
             "| setting | decoding the upload | forward | " + " | ".join(HEAD_TITLES.values()) + " |",
             "|---|---|---|" + "---|" * len(HEAD_TITLES)]  # fmt: skip
    for name in settings:
        heads = run["settings"][name]["heads"]
        cells = [f"{heads[h]['ratio']:.2f}×" if h in heads else "–" for h in HEAD_TITLES]
        decode = run["settings"][name].get("decode_ms")
        lines.append(f"| {SETTING_TITLES.get(name, name)} | {'–' if decode is None else f'{decode:.2f} ms'} | "
                     f"{heads['laya']['forward_ms']:.2f} ms | " + " | ".join(cells) + " |")
    lines += ["", "**Every page's default view** (LAYA head, model time against one plain forward; an attached "
              "network's own classifier against its own forward):", "",
              "| page | " + " | ".join(SETTING_TITLES.get(n, n) for n in settings) + " |",
              "|---|" + "---|" * len(settings)]  # fmt: skip
    over = []
    for page, reason in PAGES.items():
        cells = []
        for name in settings:
            cost = run["settings"][name]["pages"].get(page)
            cells.append("–" if cost is None else _cell(cost["ms"], cost["ratio"]))
            if cost is not None and cost["ratio"] > LIMIT:
                over.append((page, SETTING_TITLES.get(name, name), cost["ratio"], reason))
        lines.append(f"| {page} | " + " | ".join(cells) + " |")
    lines += ["", f"Over {LIMIT:g}× a forward:" if over else f"No page's default view costs more than {LIMIT:g}× a forward."]
    lines += [f"* {page} on {setting} ({ratio:.2f}×): {reason}." for page, setting, ratio, reason in over]
    load_file = folder / "load_test.json"
    if load_file.is_file():
        load = json.loads(load_file.read_text())
        lines += ["", f"**Server CPU per interaction** with {load['sessions']} sessions at once (`benchmarks/load_test.py`, "
                  f"AppTest, {load['date']}, load average {load['load_average']['start'][0]:.1f} → "
                  f"{load['load_average']['end'][0]:.1f}):", "",
                  "| interaction | CPU-s p50 | CPU-s p95 | wall s p50 | wall s p95 |", "|---|---|---|---|---|"]  # fmt: skip
        for step, r in load["concurrent"].items():
            lines.append(f"| {step} | {r['cpu_p50']:.2f} | {r['cpu_p95']:.2f} | {r['wall_p50']:.1f} | {r['wall_p95']:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
