"""Exact per-layer spatial maps against Grad-CAM, HiResCAM and LayerCAM (pytorch-grad-cam): pixel faithfulness and cost.

    python benchmarks/spatial_maps.py [--checkpoints models/cifar10-cnn/laya ...] [--n 500] [--seed 0] [--resume]

With no ``--checkpoints``: every head of every bundled setting with spatial maps (``models/<setting>/<head>``,
Concat and ScalarMix included). ``--resume`` skips a checkpoint whose CSV in ``--out`` already holds the same
sample (n and seed), so an interrupted run continues where it stopped.

For each checkpoint, on a class-balanced random sample of its test images (``laya.analysis.sample.sample_indices``,
seeded with ``--seed``, stated in the output; default n = 500 for a model input of at most 32 px, else 100) and
the predicted class, per layer and for the all-layer map:

* maps: **exact** (``laya.analysis.head.spatial``: layer i's logit term over positions, one forward; all-layer = the
  sum of the layers' density maps in float64, i.e. the logit minus the position-free parts) and Grad-CAM / HiResCAM /
  LayerCAM of ``pytorch_grad_cam`` on the same layer modules with target = the predicted class's logit
  (all-layer: the package's own multi-layer aggregate, the mean of the per-layer scaled maps). Every map is
  resampled to the image's source frame (32 x 32 for CIFAR-10), where the pixels are perturbed; the model
  sees the perturbed image through its own preprocessing (EfficientNet: resized to 128).
* metrics (``laya.analysis.pixel_faithfulness``): deletion AUC (pixels replaced by the image's mean colour,
  ``--steps`` steps; pixels of equal value are ordered by one seeded permutation shared by every map,
  ``pixel_faithfulness.pixel_order``), insertion AUC (from a Gaussian blur, sigma 2 px, kernel 9), ROAD combined (noisy linear
  imputation at ``--fractions``), all on the predicted class's softmax probability; mean with a 95 %
  bootstrap CI over images, and exact minus each anchor with a paired bootstrap (same resamples), a tie
  where its CI covers 0; and per true class, each method's mean with its CI (rows with ``class`` set).
* reference (``--occlusion-patch``, default 2 px): the model's own **occlusion** map (each patch of the frame
  replaced by the image's mean colour, the drop of the predicted class's probability; one forward per patch),
  and a seeded uniform **random** map, both on the all-layer row. Per metric, occlusion minus random with a
  paired bootstrap (row ``occlusion vs random``): a metric on which the reference is not better than random
  with its CI excluding 0 is marked ``does not discriminate here`` and no verdict of it is counted
  (``discriminating``).
* layer shares: each layer's share of the all-layer exact map's absolute mass (rows ``layer_share``), and
  whether its map varies over the frame (a 1x1 grid does not): the pixel order comes from the varying layers.
* cost: seconds for one batch relative to one forward of that batch (1 thread, interleaved rounds, one
  run): exact maps of all layers (one call), an anchor's map of one layer (one forward + backward), and of
  every layer (one call per layer, the package's API).

Writes one CSV per checkpoint into ``--out`` and prints the markdown tables generated from them (``markdown_tables``).
"""

from __future__ import annotations

import csv
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, interleaved_seconds, parser

from laya.analysis.pixel_faithfulness import to_frame

HEADS = ("laya", "lastlayer", "concat", "scalarmix")
ANCHORS = ("Grad-CAM", "HiResCAM", "LayerCAM")
METRICS = {"deletion": "lower", "insertion": "higher", "road": "higher"}  # which direction is better
FIELDS = ["checkpoint", "sample", "layer", "grid", "method", "metric", "class", "n", "mean", "low", "high",
          "diff", "diff_low", "diff_high", "p", "verdict"]  # fmt: skip
TIE_BREAK = "pixels of equal map value in one seeded random order (seed 0), the same for every map"
ALL = "all layers"
RANDOM = "random"
REFERENCE = "occlusion"  # the known-good reference a metric must rank above RANDOM (pixel_faithfulness.occlusion_map)
CHECK = "occlusion vs random"  # that test's row: diff = occlusion - random, verdict DISCRIMINATES or NOT_DISCRIMINATING
DISCRIMINATES, NOT_DISCRIMINATING = "discriminates", "does not discriminate here"
SHARE = "layer_share"  # rows: each layer's share of the all-layer exact map's absolute mass (mean over images)
NEGLIGIBLE = 1e-3  # layers that order the pixels but carry less than this share of the map: a generated note says so


class Logits(nn.Module):
    """Source-frame images in [0, 1] ``(B, C, S, S)`` -> the checkpoint's logits, through its preprocessing."""

    def __init__(self, model: nn.Module, preprocess: nn.Module) -> None:
        super().__init__()
        self.model, self.preprocess = model, preprocess

    def forward(self, x: Tensor) -> Tensor:
        return self.model(self.preprocess(x * 255.0)).logits


def cam_modules(backbone: nn.Module) -> list[nn.Module | None]:
    """The module whose output is each layer's pre-pool map (``patching.layer_modules``), and for a timm
    pre-logits layer the module whose output is the final feature map ``forward_head`` pools."""
    from laya.analysis.patching import layer_modules

    modules = layer_modules(backbone)
    if modules and modules[-1] is None and getattr(backbone.config, "pre_logits", False):
        model, found = backbone.model, {}
        handles = [m.register_forward_hook(lambda m, a, out: found.__setitem__(id(out), (m, out)))
                   for m in model.modules() if m is not model]  # fmt: skip
        try:
            c, s = backbone.config.in_channels, backbone.config.input_size
            with torch.no_grad():
                final, _ = backbone._intermediates(torch.zeros(1, c, s, s), backbone.config.indices)
            modules[-1] = found.get(id(final), (None,))[0]
        finally:
            for h in handles:
                h.remove()
    return modules


def token_reshape(prefix: int):
    """pytorch-grad-cam ``reshape_transform`` for token blocks: ``(B, prefix + h*w, D) -> (B, D, h, w)``."""

    def reshape(tokens: Tensor) -> Tensor:
        patches = tokens[:, prefix:]
        side = math.isqrt(patches.shape[1])
        return patches.transpose(1, 2).reshape(patches.shape[0], -1, side, side)

    return reshape


def exact_maps(model: nn.Module, x: Tensor, target: Tensor, size: int) -> dict[str, Tensor]:
    """Layer name -> ``(B, size, size)`` exact map of the target class (layers with a nonzero map), and ALL."""
    from laya.analysis.head.spatial import spatial_attribution
    from laya.analysis.pixel_faithfulness import sum_maps

    _, spatial = spatial_attribution(model, x, classes=target.view(-1, 1))
    out = {}
    for i, m in enumerate(spatial.maps):
        if m is None or not bool(m.abs().gt(0).any()):  # no exact map, or LastLayer's zero layers
            continue
        density = to_frame(m[:, 0], size) * (m.shape[-2] * m.shape[-1] / size**2)  # frame pixels sum to the map's sum
        out[model.layer_names[i]] = density  # float64, as decomposed
    if out:  # the logit minus the position-free parts, over the frame's pixels: summed in float64, since the
        out[ALL] = sum_maps(list(out.values()))  # small layers' terms are a float32 rounding step of the largest
    return out


def default_checkpoints(models: Path) -> list[Path]:
    """Every head folder (``HEADS``) of every bundled setting in ``models`` whose backbone has spatial maps."""
    found = []
    for setting in sorted(p for p in Path(models).iterdir() if p.is_dir()):
        for head in HEADS:
            path = setting / head
            if (path / "model.json").exists() and _has_maps(path):
                found.append(path)
    return found


def _has_maps(path: Path) -> bool:
    """Whether the checkpoint's backbone gives an exact map at some layer (CNNs, avg-pooled ViTs)."""
    from laya.analysis.head.spatial import spatial_attribution
    from laya.model.checkpoint import load_checkpoint

    ck = load_checkpoint(path)
    spec = ck.meta.input
    x = ck.preprocess(torch.zeros(1, spec.channels, spec.source_size, spec.source_size, dtype=torch.uint8))
    _, spatial = spatial_attribution(ck.model.eval(), x, top_k=1)
    return any(m is not None for m in spatial.maps)


def balanced_images(checkpoint, n: int, seed: int) -> tuple[Tensor, Tensor | None, str]:
    """``(images uint8 (n, C, S, S), labels (n,) or None, description)``: a seeded class-balanced sample of
    the test split (``sample_indices``), or seeded random images when the dataset is absent."""
    from laya.analysis.sample import sample_indices
    from laya.data.datasets import DatasetNotFoundError

    try:
        data = checkpoint.load_data("test")
    except DatasetNotFoundError:
        spec = checkpoint.meta.input
        shape = (n, spec.channels, spec.source_size, spec.source_size)
        images = torch.randint(0, 256, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)
        return images, None, f"{n} random images, seed {seed} (dataset absent)"
    index = sample_indices(data.labels, n, seed)
    return data.images[index], data.labels[index], f"{len(index)} test images, class-balanced, seed {seed}"


def anchor_maps(method: str, net: Logits, modules: Sequence[nn.Module], names: Sequence[str], images: Tensor,
                target: Tensor, reshape=None, batch: int = 50, rows: Sequence[str] | None = None) -> dict[str, Tensor]:  # fmt: skip
    """Layer name -> ``(B, S, S)`` map of ``method`` (pytorch-grad-cam, ReLU'd and min-max scaled as it ships),
    one call per layer in ``rows`` (default all) and one on all layers (its multi-layer aggregate), in chunks
    of ``batch`` images."""
    out = {}
    per_layer = [(n, [m]) for n, m in zip(names, modules) if rows is None or n in rows]
    for name, layers in [*per_layer, (ALL, list(modules))]:
        parts = [cam_call(method, net, layers, images[i : i + batch], target[i : i + batch], reshape)
                 for i in range(0, len(images), batch)]  # fmt: skip
        out[name] = torch.from_numpy(np.concatenate(parts)).float()
    return out


def check_row(values: dict[str, Tensor], better: str, resamples: int) -> dict:
    """Whether a metric discriminates on these images: ``REFERENCE`` minus ``RANDOM`` with a paired bootstrap; the
    metric discriminates where the difference is in the metric's better direction (``better``: ``"lower"`` or
    ``"higher"``) with its 95 % CI excluding 0. A CSV row (``method`` = ``CHECK``)."""
    from laya.analysis.statistics import paired_bootstrap

    d = paired_bootstrap(values[REFERENCE], values[RANDOM], resamples=resamples)
    low, high = d.difference.low, d.difference.high
    good = high < 0 if better == "lower" else low > 0
    return {"method": CHECK, "n": len(values[REFERENCE]), "diff": d.difference.estimate, "diff_low": low,
            "diff_high": high, "p": d.p_value, "verdict": DISCRIMINATES if good else NOT_DISCRIMINATING}  # fmt: skip


def discriminating(rows: Sequence[dict]) -> dict[tuple[str, str], bool]:
    """``(checkpoint, metric) -> whether the metric discriminates there``, from the pooled ``CHECK`` rows of CSV
    ``rows``; a pair with no such row (a CSV written before the check) is absent: it is not known to discriminate."""
    return {(r["checkpoint"], r["metric"]): r["verdict"] == DISCRIMINATES
            for r in rows if r["method"] == CHECK and not r.get("class")}  # fmt: skip


def layer_shares(exact: dict[str, Tensor]) -> dict[str, tuple[float, bool]]:
    """Layer -> ``(share, varies)``: the mean over images of the layer's share of the summed absolute mass of all
    layers' exact maps ``(B, S, S)`` (``exact`` without ``ALL``), and whether its map varies over the frame in some
    image beyond rounding (a constant map adds the same to every pixel and orders none)."""
    layers = {k: v.double() for k, v in exact.items() if k != ALL}
    mass = {k: v.abs().sum((1, 2)) for k, v in layers.items()}
    total = sum(mass.values()).clamp_min(1e-300)
    def varies(v: Tensor) -> bool:  # beyond the rounding of resampling a 1x1 map (about 1e-16 relative)
        return bool((v.amax((1, 2)) - v.amin((1, 2)) > 1e-12 * v.abs().amax((1, 2))).any())

    return {k: (float((mass[k] / total).mean()), varies(v)) for k, v in layers.items()}


def row_stats(values: dict[str, Tensor], better: str, resamples: int) -> dict[str, dict]:
    """Per method: mean and CI over images; for anchors, exact minus anchor with a paired bootstrap."""
    from laya.analysis.statistics import bootstrap_ci, paired_bootstrap

    rows = {}
    for method, v in values.items():
        ci = bootstrap_ci(v, resamples=resamples)
        row = {"n": len(v), "mean": ci.estimate, "low": ci.low, "high": ci.high}
        if method != "exact" and "exact" in values:
            d = paired_bootstrap(values["exact"], v, resamples=resamples)
            good = d.difference.estimate < 0 if better == "lower" else d.difference.estimate > 0
            row.update(diff=d.difference.estimate, diff_low=d.difference.low, diff_high=d.difference.high,
                       p=d.p_value, verdict="tie" if d.tie else ("exact better" if good else "exact worse"))  # fmt: skip
        rows[method] = row
    return rows


def class_stats(values: dict[str, Tensor], labels: Tensor, classes: Sequence[str], resamples: int) -> list[dict]:
    """Per true class and method: ``{"method", "class", "n", "mean", "low", "high"}``, a bootstrap CI over
    that class's images (``values``: method -> ``(B,)``, ``labels (B,)``)."""
    from laya.analysis.statistics import bootstrap_ci

    rows = []
    for c in labels.unique().tolist():
        mask = labels == c
        for method, v in values.items():
            ci = bootstrap_ci(v[mask], resamples=resamples)
            rows.append({"method": method, "class": classes[c] if c < len(classes) else str(c),
                         "n": int(mask.sum()), "mean": ci.estimate, "low": ci.low, "high": ci.high})  # fmt: skip
    return rows


def benchmark(checkpoint: Path, n: int, steps: int, fractions: Sequence[float], batch: int, cost_batch: int,
              resamples: int, methods: Sequence[str] = ANCHORS, layers: Sequence[str] | None = None,
              cost_rounds: int = 2, seed: int = 0, patch: int = 2,
              ) -> tuple[list[dict], dict]:  # fmt: skip
    """CSV rows (faithfulness, pooled and per class) and the cost ratios of one checkpoint on a class-balanced
    sample of ``n`` test images (``seed``); ``layers``: the per-layer rows (default all; the all-layer maps
    always use every layer)."""
    from torchvision.transforms.functional import gaussian_blur
    from tqdm.auto import tqdm

    from laya.analysis.pixel_faithfulness import deletion_auc, insertion_auc, occlusion_map, road
    from laya.model.checkpoint import load_checkpoint

    ck = load_checkpoint(checkpoint)
    model, pre = ck.model.eval(), ck.preprocess
    for p in model.parameters():
        p.requires_grad_(False)
    net = Logits(model, pre).eval()
    raw, labels, source = balanced_images(ck, n, seed)
    images = raw.float() / 255.0
    size = images.shape[-1]
    name = f"{checkpoint.parent.name}/{checkpoint.name}"
    with torch.inference_mode():
        target = torch.cat([net(images[i : i + batch]).argmax(1) for i in range(0, len(images), batch)])
    print(f"\n== {name}: {source}, frame {size} px, model input {ck.meta.input.size} px; ties: {TIE_BREAK}", flush=True)

    def score(x: Tensor) -> Tensor:
        return torch.cat([net(x[i : i + batch]) for i in range(0, len(x), batch)])

    start = time.perf_counter()
    exact = {}
    for i in range(0, len(images), batch):
        part = exact_maps(model, pre(raw[i : i + batch]), target[i : i + batch], size)
        for k, v in part.items():
            exact.setdefault(k, []).append(v)
    exact = {k: torch.cat(v) for k, v in exact.items()}
    backbone = model.backbone
    modules = cam_modules(backbone)
    names = list(model.layer_names)
    keep = [i for i, m in enumerate(modules) if m is not None]
    reshape = token_reshape(backbone.model.num_prefix_tokens) if getattr(backbone, "tokens", False) else None
    if layers is not None and set(layers) - set(names):
        raise ValueError(f"unknown layers {sorted(set(layers) - set(names))}; {name} has {names}")
    anchors = {m: anchor_maps(m, net, [modules[i] for i in keep], [names[i] for i in keep], images, target, reshape,
                              batch, layers) for m in methods}  # fmt: skip
    print(f"maps: {time.perf_counter() - start:.0f} s", flush=True)
    with torch.inference_mode():  # each layer's grid (positions of its map), from one image
        grids = {names[i]: _grid(modules[i], net, images[:1], reshape) for i in keep}

    mean_colour = images.mean(dim=(2, 3), keepdim=True).expand_as(images)
    blurred = gaussian_blur(images, kernel_size=9, sigma=2.0)
    t0 = time.perf_counter()
    occlusion = to_frame(occlusion_map(score, images, target, mean_colour, patch, batch=512).float(), size)
    print(f"occlusion ({patch} px patches): {time.perf_counter() - t0:.0f} s", flush=True)
    rows = []
    shown = [
        n_
        for n_ in names
        if (layers is None or n_ in layers) and (n_ in exact or any(n_ in a for a in anchors.values()))
    ]
    classes = list(ck.meta.classes)
    sample = f"balanced seed {seed}" if labels is not None else f"random seed {seed}"
    for layer in tqdm([*shown, ALL], desc=f"{name} layers", unit="layer"):
        maps = ({"exact": exact[layer]} if layer in exact else {}) | {
            m: a[layer] for m, a in anchors.items() if layer in a
        }
        if layer == ALL:  # the known-good reference, and what every ranking must beat: uniform random maps (seeded)
            maps[REFERENCE] = occlusion
            maps[RANDOM] = torch.rand(images.shape[0], size, size, generator=torch.Generator().manual_seed(1))
        values = {metric: {} for metric in METRICS}
        t0 = time.perf_counter()
        for method, m in maps.items():
            values["deletion"][method] = deletion_auc(score, images, m, target, mean_colour, steps)
            values["insertion"][method] = insertion_auc(score, images, m, target, blurred, steps)
            values["road"][method] = road(score, images, m, target, fractions)[0]
        for metric, better in METRICS.items():
            base = {"checkpoint": name, "sample": sample, "layer": layer, "grid": grids.get(layer, ""), "metric": metric}
            for method, row in row_stats(values[metric], better, resamples).items():
                rows.append({**base, "method": method, **row})
            if layer == ALL:
                rows.append({**base, **check_row(values[metric], better, resamples)})
            if labels is not None:
                rows += [{**base, **row} for row in class_stats(values[metric], labels, classes, resamples)]
        tqdm.write(f"{layer}: {time.perf_counter() - t0:.0f} s")

    for layer, (share, varies) in layer_shares(exact).items():
        rows.append({"checkpoint": name, "sample": sample, "layer": layer, "grid": grids.get(layer, ""),
                     "method": "exact", "metric": SHARE, "n": len(images), "mean": share,
                     "verdict": "orders pixels" if varies else "constant over the frame"})  # fmt: skip

    # cost, one run, interleaved: one batch of cost_batch images, 1 thread
    xs, xr, xt = images[:cost_batch], raw[:cost_batch], target[:cost_batch]

    def forward():
        with torch.inference_mode():
            model(pre(xr))

    calls = {"forward": forward, "exact": lambda: exact_maps(model, pre(xr), xt, size)}
    last = [keep[-1]]
    for m in methods:
        calls[f"{m} one layer"] = lambda m=m: cam_call(m, net, [modules[i] for i in last], xs, xt, reshape)
        calls[f"{m} every layer"] = lambda m=m: [cam_call(m, net, [modules[i]], xs, xt, reshape) for i in keep]
    seconds = interleaved_seconds(calls, rounds=cost_rounds)
    cost = {k: v / seconds["forward"] for k, v in seconds.items()} | {"forward_s": seconds["forward"],
                                                                       "cost_batch": len(xs)}  # fmt: skip
    return rows, cost


def _grid(module: nn.Module, net: Logits, x: Tensor, reshape=None) -> str:
    """The grid ``"HxW"`` of ``module``'s output on ``x`` (tokens: through ``reshape``, the patches' grid)."""
    seen = []
    handle = module.register_forward_hook(lambda m, a, out: seen.append(out) and None)
    try:
        net(x)
    finally:
        handle.remove()
    out = reshape(seen[0]) if reshape is not None else seen[0]
    return "x".join(map(str, out.shape[-2:]))


def cam_call(method: str, net: Logits, layers: list[nn.Module], x: Tensor, target: Tensor, reshape):
    """One call of pytorch-grad-cam's ``method`` on ``layers`` for images ``x`` and classes ``target``:
    ``(B, S, S)`` numpy maps (ReLU'd, min-max scaled, resized to the input, as the package ships them)."""
    import pytorch_grad_cam as gc  # dev dependency, lazily
    from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget

    cls = {"Grad-CAM": gc.GradCAM, "HiResCAM": gc.HiResCAM, "LayerCAM": gc.LayerCAM}[method]
    with cls(model=net, target_layers=layers, reshape_transform=reshape) as cam:
        return cam(x.clone().requires_grad_(True), targets=[ClassifierOutputTarget(int(c)) for c in target])


def write_csv(rows: list[dict], costs: dict[str, dict], path: Path) -> None:
    for name, cost in costs.items():
        for key, value in cost.items():
            if key not in ("forward", "forward_s", "cost_batch"):
                rows.append({"checkpoint": name, "layer": ALL, "method": key, "metric": "cost_x_forward",
                             "n": cost["cost_batch"], "mean": value})  # fmt: skip
        rows.append({"checkpoint": name, "layer": ALL, "method": "forward", "metric": "forward_seconds",
                     "n": cost["cost_batch"], "mean": cost["forward_s"]})  # fmt: skip
    write_rows(rows, FIELDS, path)


def write_rows(rows: Sequence[dict], fields: Sequence[str], path: Path) -> None:
    """``rows`` as a CSV of columns ``fields`` (floats to 6 significant digits), written whole, then renamed into
    ``path``: ``--resume`` never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".csv.part")
    with part.open("w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        for row in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    part.replace(path)


def done(path: Path, n: int, seed: int) -> bool:
    """Whether the CSV at ``path`` holds a finished run on the class-balanced sample of ``n`` images, ``seed``, with
    the metric check (a CSV written before the occlusion reference is rerun)."""
    if not path.exists():
        return False
    rows = [r for r in csv.DictReader(path.open()) if r.get("metric") in METRICS and not r.get("class")]
    checked = {r["metric"] for r in rows if r["method"] == CHECK} == set(METRICS)
    return checked and all(r.get("sample") == f"balanced seed {seed}" and r["n"] == str(n) for r in rows)


def default_n(checkpoint) -> int:
    """500 test images for a model input of at most 32 px (the CNN, the ViTs), else 100 (EfficientNet's 128)."""
    return 500 if checkpoint.meta.input.size <= 32 else 100


def markdown_tables(folder: Path) -> str:
    """The markdown tables of the results CSVs in ``folder``: per checkpoint, rows (layer, method) x metrics ``mean [CI]``,
    each anchor's cell with the paired verdict of exact against it (none on a metric that does not discriminate
    there: ``discriminating``); then the metric check, the wins/ties/losses and the costs."""
    every = [r for path in sorted(Path(folder).glob("*.csv")) for r in csv.DictReader(path.open())]
    rows = [r for r in every if not r.get("class")]  # pooled; per-class rows (newer files) below
    sym = {"exact better": "exact wins", "exact worse": "exact loses", "tie": "tie"}
    works = discriminating(rows)
    out = []
    for name in dict.fromkeys(r["checkpoint"] for r in rows):
        checks = {r["metric"]: r for r in rows if r["checkpoint"] == name and r["method"] == CHECK}
        mine = [r for r in rows if r["checkpoint"] == name and r["metric"] in METRICS and r["method"] != CHECK]
        n = mine[0]["n"] if mine else "?"
        drawn = f", {_sample_words(mine[0]['sample'])}" if mine and mine[0].get("sample") else ""
        out += [f"**{name}** ({n} images{drawn}; deletion ↓, insertion ↑, ROAD ↑; anchor cells: exact vs that anchor, paired bootstrap)\n",
                "| layer | method | deletion AUC | insertion AUC | ROAD |", "|---|---|---|---|---|"]  # fmt: skip
        cells: dict[tuple[str, str], dict[str, str]] = {}
        for r in mine:
            text = f"{float(r['mean']):.3f} [{float(r['low']):.3f}, {float(r['high']):.3f}]"
            if r["verdict"]:
                ok = works.get((name, r["metric"]))
                text += f" · {sym[r['verdict']] if ok else _unchecked(works, name, r['metric'])}"
            layer = f"{r['layer']} ({r['grid']})" if r.get("grid") else r["layer"]
            cells.setdefault((layer, r["method"]), {})[r["metric"]] = text
        for (layer, method), c in cells.items():
            out.append(f"| {layer} | {method} | " + " | ".join(c.get(m, "") for m in METRICS) + " |")
        out.append("")
        out += [_check_line(checks), ""]
        out += _class_table(name, [r for r in every if r["checkpoint"] == name and r.get("class")])
    out += ["**Exact against each anchor**, every layer and the all-layer map, and against the occlusion and random maps (all-layer row only; wins / ties / losses of exact, on the metrics that discriminate on that checkpoint):\n",
            "| checkpoint | anchor | deletion | insertion | ROAD |", "|---|---|---|---|---|"]  # fmt: skip
    for name in dict.fromkeys(r["checkpoint"] for r in rows):
        for anchor in (*ANCHORS, REFERENCE, RANDOM):
            tally, seen = [], False
            for metric in METRICS:
                if not works.get((name, metric)):
                    seen = seen or any(r["checkpoint"] == name and r["method"] == anchor for r in rows)
                    tally.append(_unchecked(works, name, metric))
                    continue
                v = [
                    r["verdict"]
                    for r in rows
                    if r["checkpoint"] == name and r["method"] == anchor and r["metric"] == metric
                ]
                tally.append(f"{v.count('exact better')} / {v.count('tie')} / {v.count('exact worse')}")
            if seen or any(t != "0 / 0 / 0" and "/" in t for t in tally):
                out.append(f"| {name} | {anchor} | " + " | ".join(tally) + " |")
    out += ["", "**Cost** (seconds for one batch / one forward of that batch, 1 thread, one run):\n",
            "| checkpoint | batch | forward (s) | exact, all layers | " + " | ".join(f"{a} one layer | {a} every layer" for a in ANCHORS) + " |",
            "|---|---|---|---|" + "---|" * 2 * len(ANCHORS)]  # fmt: skip
    for name in dict.fromkeys(r["checkpoint"] for r in rows):
        c = {
            r["method"]: r
            for r in rows
            if r["checkpoint"] == name and r["metric"] in ("cost_x_forward", "forward_seconds")
        }
        if "forward" not in c:
            continue
        ratios = [f"{float(c[k]['mean']):.1f}x" if k in c else "" for k in
                  ["exact", *(f"{a} {w}" for a in ANCHORS for w in ("one layer", "every layer"))]]  # fmt: skip
        out.append(f"| {name} | {c['forward']['n']} | {float(c['forward']['mean']):.3f} | " + " | ".join(ratios) + " |")
    return "\n".join(out) + "\n"


def _unchecked(works: dict[tuple[str, str], bool], name: str, metric: str) -> str:
    """The words for a metric with no verdicts on checkpoint ``name``: it failed the check, or was never checked."""
    return NOT_DISCRIMINATING if (name, metric) in works else "no metric check"


def _check_line(checks: dict[str, dict]) -> str:
    """One line: per metric, occlusion minus random with its paired CI and whether the metric discriminates."""
    if not checks:
        return ("Metric check: none in this CSV (written before the occlusion reference); no verdict of it is "
                "counted.")  # fmt: skip
    cells = [f"{m} {float(c['diff']):+.3f} [{float(c['diff_low']):+.3f}, {float(c['diff_high']):+.3f}]: {c['verdict']}"
             for m, c in checks.items()]  # fmt: skip
    return (f"Metric check (occlusion − random, paired bootstrap, 95 %; a metric discriminates where occlusion is "
            f"better with the CI excluding 0): {'; '.join(cells)}.")


def _sample_words(sample: str) -> str:
    """``"balanced seed 0"`` -> ``"class-balanced random sample, seed 0"`` (the CSV's ``sample`` column)."""
    kind, _, seed = sample.partition(" seed ")
    return f"{'class-balanced random sample' if kind == 'balanced' else 'random images'}, seed {seed}; ties: {TIE_BREAK}"


def _class_table(name: str, rows: list[dict]) -> list[str]:
    """Markdown lines: the all-layer row's per-class mean [CI] of every method (empty without per-class rows)."""
    rows = [r for r in rows if r["layer"] == ALL]
    if not rows:
        return []
    cells: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in rows:
        text = f"{float(r['mean']):.3f} [{float(r['low']):.3f}, {float(r['high']):.3f}]"
        cells.setdefault((r["class"], r["n"], r["method"]), {})[r["metric"]] = text
    out = [f"**{name}, all-layer maps per true class** (mean [95 % CI] over that class's images)\n",
           "| class | n | method | deletion AUC | insertion AUC | ROAD |", "|---|---|---|---|---|---|"]  # fmt: skip
    for (cls, n, method), c in cells.items():
        out.append(f"| {cls} | {n} | {method} | " + " | ".join(c.get(m, "") for m in METRICS) + " |")
    return [*out, ""]


def main() -> None:
    from tqdm.auto import tqdm

    from laya.model.checkpoint import load_checkpoint

    p = parser(__doc__.splitlines()[0])
    p.add_argument("--checkpoints", nargs="+", default=None,
                   help="checkpoint folders (default: every head of every bundled setting with spatial maps)")  # fmt: skip
    p.add_argument("--n", type=int, default=None, help="test images per checkpoint (default 500 at <= 32 px, else 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the class-balanced sample")
    p.add_argument("--resume", action="store_true", help="skip checkpoints whose CSV in --out holds this sample")
    p.add_argument("--steps", type=int, default=16, help="deletion / insertion steps")
    p.add_argument("--fractions", type=float, nargs="+", default=[0.2, 0.4, 0.6, 0.8], help="ROAD removed fractions")
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--cost-batch", type=int, default=32)
    p.add_argument("--cost-rounds", type=int, default=2, help="timed rounds (fastest kept) after one warm-up")
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--occlusion-patch", type=int, default=2,
                   help="side in frame pixels of the occlusion reference's patches")  # fmt: skip
    p.add_argument("--methods", nargs="+", default=list(ANCHORS), choices=ANCHORS)
    p.add_argument("--layers", nargs="+", default=None, help="layer names of the per-layer rows (default: all)")
    p.add_argument("--out", default=str(ROOT / "docs" / "spatial_maps"), help="folder: one <setting>-<head>.csv each")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    paths = [Path(c) if Path(c).is_absolute() else ROOT / c for c in args.checkpoints or []]
    paths = paths or default_checkpoints(Path(args.models))
    for path in tqdm(paths, desc="checkpoints", unit="checkpoint"):
        n = args.n or default_n(load_checkpoint(path))
        csv_path = Path(args.out) / f"{path.parent.name}-{path.name}.csv"
        if args.resume and done(csv_path, n, args.seed):
            tqdm.write(f"{csv_path}: done ({n} images, seed {args.seed}), skipped")
            continue
        rows, cost = benchmark(path, n, args.steps, args.fractions, args.batch, args.cost_batch, args.resamples,
                               args.methods, args.layers, args.cost_rounds, args.seed, args.occlusion_patch)  # fmt: skip
        write_csv(rows, {f"{path.parent.name}/{path.name}": cost}, csv_path)
    print(f"\ntorch threads {torch.get_num_threads()}; wrote {args.out}\n")
    print(markdown_tables(Path(args.out)))


if __name__ == "__main__":
    main()
