"""The docs' figures, drawn from the committed reports (matplotlib PNGs under docs/figures/).

    python scripts/doc_figures.py [--out docs/figures] [NAME ...]

Each figure is one function ``(root) -> Figure`` in ``FIGURES`` reading only committed result files:
``models/<setting>/<head>/{depth.json, exits.json, lens.csv, layer_profile.csv}``, ``models/<setting>/summary.csv``
and ``docs/spatial_maps/*.csv`` (``python benchmarks/spatial_maps.py``). Rerun it after any of those changes; the
page under each figure names this command. ``tests/docs/test_figures.py`` redraws every figure.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"fashion-mnist-mlp": "Fashion-MNIST MLP", "cifar10-cnn": "CIFAR-10 CNN",
            "cifar10-efficientnet-lite0": "EfficientNet-Lite0", "cifar10-vit": "CIFAR-10 ViT",
            "cifar10-resnet18-half": "attached ResNet-18", "cifar10-resnet20": "ResNet-20"}  # fmt: skip
#: heads in plotting order; an attached network's own classifier (``own``) sits where LastLayer does
HEADS = {"laya": "LAYA", "scalarmix": "ScalarMix", "concat": "Concat", "lastlayer": "LastLayer",
         "own": "own classifier"}  # fmt: skip
COLOURS = {"laya": "#1f77b4", "scalarmix": "#ff7f0e", "concat": "#2ca02c", "lastlayer": "#7f7f7f", "own": "#8c564b"}
SUMMARY_HEADS = {"own classifier": "own"}  # summary.csv's head label -> head folder, where they differ
METHOD_COLOURS = {"exact": "#d62728", "Grad-CAM": "#1f77b4", "HiResCAM": "#2ca02c", "LayerCAM": "#9467bd",
                  "occlusion": "#ff7f0e", "random": "#7f7f7f"}  # fmt: skip


def _reports(root: Path, name: str) -> dict[tuple[str, str], dict]:
    """``(setting, head) -> report`` of every ``models/<setting>/<head>/<name>`` (JSON), settings in SETTINGS order."""
    found = {(p.parent.parent.name, p.parent.name): json.loads(p.read_text())
             for p in sorted((root / "models").glob(f"*/*/{name}"))}  # fmt: skip
    order = list(SETTINGS)
    return dict(sorted(found.items(), key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order else 99, kv[0][1])))


def _grid(n: int, width: float = 3.4, height: float = 2.8) -> tuple[Figure, list]:
    cols = min(n, 4)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _labelled(ax, title: str, ylabel: str, xlabel: str | None = None, legend: dict | None = None) -> Figure:
    """Label a single-axis figure's axis (and its legend, with ``legend``'s keywords); the figure."""
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    if legend is not None:
        ax.legend(**legend)
    return ax.figure


def _slot(head: str) -> float:
    """A head's x offset within its setting: LAYA, ScalarMix, Concat, then LastLayer or the own classifier."""
    return 0.18 * (min(list(HEADS).index(head), 3) - 1.5)


def _errorbar(ax, x, value, low, high, **kwargs) -> None:
    ax.errorbar(x, value, yerr=[[value - low], [high - value]], fmt="o", capsize=3, **kwargs)


def prediction_depth(root: Path) -> Figure:
    """Prediction depth (fitted probes, mean with 95 % CI) over L, per setting and head."""
    reports = _reports(root, "depth.json")
    fig, ax = plt.subplots(figsize=(8, 3.2))
    settings = list(dict.fromkeys(s for s, _ in reports))
    labelled: set[str] = set()  # heads already in the legend
    for (setting, head), r in reports.items():
        rows = r.get("prediction_depth_probes") or r["prediction_depth"]
        row = next(x for x in rows if x["class"] == "all")
        layers = len(r["layer_names"])
        _errorbar(ax, settings.index(setting) + _slot(head), row["prediction_depth"] / layers,
                  row["prediction_depth_low"] / layers, row["prediction_depth_high"] / layers, color=COLOURS[head],
                  label=None if head in labelled else HEADS[head])  # fmt: skip
        labelled.add(head)
    ax.set_xticks(range(len(settings)), [SETTINGS.get(s, s) for s in settings])
    ax.set_ylim(0, 1.05)
    return _labelled(ax, "Where decisions settle: prediction depth through fitted probes (95 % CI)",
                     "prediction depth / L", legend={"ncol": 4, "fontsize": 8, "loc": "lower right"})


def detection(root: Path) -> Figure:
    """AUROC of max softmax against multi-layer Mahalanobis, misclassification and other-dataset OOD."""
    reports = _reports(root, "depth.json")
    tasks = {"misclassification": "misclassification", "OOD": "OOD: other dataset"}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True)
    names = [f"{SETTINGS.get(s, s)} {HEADS.get(h, h)}" for s, h in reports]
    for ax, (prefix, title) in zip(axes, tasks.items()):
        for i, r in enumerate(reports.values()):
            table = [row for row in r["detection"]["table"]
                     if row["task"].startswith(prefix) and "noise" not in row["task"]]  # fmt: skip
            for score, colour, offset in (("msp", "#7f7f7f", -0.15), ("mahalanobis", "#d62728", 0.15)):
                row = next((x for x in table if x["score"] == score and x["auroc"] is not None), None)
                if row:
                    ax.errorbar(row["auroc"], i + offset, xerr=[[row["auroc"] - row["auroc_low"]],
                                [row["auroc_high"] - row["auroc"]]], fmt="o", color=colour, capsize=2,
                                label={"msp": "max softmax", "mahalanobis": "Mahalanobis"}[score] if i == 0 else None)  # fmt: skip
        ax.set_title(title)
        ax.set_xlabel("AUROC (95 % CI)")
        ax.axvline(0.5, color="black", lw=0.5, ls=":")
    axes[0].set_yticks(range(len(names)), names, fontsize=7)
    axes[0].invert_yaxis()
    axes[0].legend(fontsize=8, loc="lower left")
    return fig


def early_exit(root: Path) -> Figure:
    """Accuracy change against MACs saved, one measured run per threshold, per setting, head and exit kind."""
    reports = _reports(root, "exits.json")
    settings = list(dict.fromkeys(s for s, _ in reports))
    fig, axes = _grid(len(settings))
    for ax, setting in zip(axes, settings):
        for (s, head), r in reports.items():
            if s != setting:
                continue
            runs = [x for x in r["runs"] if x["policy"].startswith("confidence")]
            full = next(x["accuracy"] for x in r["runs"] if x["policy"] == "full model")
            for kind in dict.fromkeys(x["exits"] for x in runs):
                points = sorted((x["macs_saved"], x["accuracy"] - full) for x in runs if x["exits"] == kind)
                ax.plot([100 * p for p, _ in points], [100 * a for _, a in points], marker=".",
                        ls="-" if kind.startswith("trained") else "--", color=COLOURS[head], lw=1,
                        label=f"{HEADS[head]}, {kind}")  # fmt: skip
        ax.axhline(-1, color="black", lw=0.6, ls=":")
        ax.set_title(SETTINGS.get(setting, setting), fontsize=10)
        ax.set_xlabel("MACs saved (%)")
        ax.set_ylabel("accuracy − full model (points)")
        ax.set_ylim(-30, 3)
    handles = {h: plt.Line2D([], [], color=COLOURS[h], label=HEADS[h]) for h in dict.fromkeys(h for _, h in reports)}
    fig.legend(handles=list(handles.values()), loc="lower center", ncol=len(handles), fontsize=8)
    fig.suptitle("Early exit, measured runs: trained exits (solid), readouts or probes (dashed); dotted: 1 point lost")
    return fig


def pruning(root: Path) -> Figure:
    """LAYA's accuracy against layers kept, by pruning criterion (as pruned), per setting."""
    reports = {k: v for k, v in _reports(root, "depth.json").items() if k[1] == "laya"}
    fig, axes = _grid(len(reports))
    styles = {"head weight": "#1f77b4", "LOO drop": "#ff7f0e", "random": "#7f7f7f"}
    for ax, ((setting, _), r) in zip(axes, reports.items()):
        for criterion, colour in styles.items():
            rows = sorted((x["layers_kept"], x["accuracy"]) for x in r["pruning"] if x["criterion"] == criterion)
            ax.plot([k for k, _ in rows], [a for _, a in rows], marker="o", color=colour, label=criterion)
        ax.set_title(f"{SETTINGS.get(setting, setting)}, LAYA", fontsize=10)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlabel("layers kept")
        ax.set_ylabel("accuracy (as pruned)")
        ax.legend(fontsize=7)
    fig.suptitle("Pruning the head's layers: by the head's weight, by LOO drop, at random (mean of orders)")
    return fig


def lens(root: Path) -> Figure:
    """KL(final || readout) per layer of the CIFAR-10 CNN: LAYA's own classifier against Concat's fitted probes."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for head in ("laya", "concat"):
        rows = [r for r in csv.DictReader((root / "models" / "cifar10-cnn" / head / "lens.csv").open())
                if r["class"] == "all"]  # fmt: skip
        x = [int(r["layer_index"]) for r in rows]
        y = [float(r["kl"]) for r in rows]
        err = [[v - float(r["kl_low"]) for v, r in zip(y, rows)], [float(r["kl_high"]) - v for v, r in zip(y, rows)]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, color=COLOURS[head],
                    label=f"{HEADS[head]} ({rows[0]['readout']})")  # fmt: skip
    return _labelled(ax, "Per-layer lens, CIFAR-10 CNN (95 % CI)", "KL(final || readout), nats", "block",
                     {"fontsize": 8})


def alpha(root: Path) -> Figure:
    """LAYA's mean layer weight α per layer of the CIFAR-10 CNN (log scale), from ``layer_profile.csv``."""
    rows = [r for r in csv.DictReader((root / "models" / "cifar10-cnn" / "laya" / "layer_profile.csv").open())
            if r["method"] == "laya_alpha"]  # fmt: skip
    fig, ax = plt.subplots(figsize=(6, 3.0))
    ax.bar([r["layer"] for r in rows], [float(r["mean"]) for r in rows], color=COLOURS["laya"])
    ax.set_yscale("log")
    return _labelled(ax, "Where LAYA's head on the CIFAR-10 CNN puts its weight", "mean α (log scale)")


def _spatial_rows(root: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for path in sorted((root / "docs" / "spatial_maps").glob("*.csv")):
        for row in csv.DictReader(path.open()):
            out.setdefault(row["checkpoint"], []).append(row)
    return out


def spatial_layers(root: Path) -> Figure:
    """ROAD (higher is better) per layer, exact against the anchors, one panel per benchmarked checkpoint."""
    every = _spatial_rows(root)
    fig, axes = _grid(max(len(every), 1))
    for ax, (name, rows) in zip(axes, every.items()):
        rows = [r for r in rows if r["metric"] == "road" and not r.get("class")]
        layers = list(dict.fromkeys(r["layer"] for r in rows))
        for method, colour in METHOD_COLOURS.items():
            mine = {r["layer"]: r for r in rows if r["method"] == method}
            for i, layer in enumerate(layers):
                if layer in mine:
                    r = mine[layer]
                    _errorbar(ax, i + 0.1 * (list(METHOD_COLOURS).index(method) - 2.5), float(r["mean"]),
                              float(r["low"]), float(r["high"]), color=colour, ms=3,
                              label=method if i == len(layers) - 1 else None)  # fmt: skip
        ax.set_xticks(range(len(layers)), [x.replace(" layers", "").replace("block ", "b") for x in layers], fontsize=7)
        ax.axhline(0, color="black", lw=0.5)
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("ROAD (95 % CI)")
        ax.legend(fontsize=6)
    fig.suptitle("Pixel faithfulness per layer (ROAD, higher is better), docs/spatial_maps/*.csv")
    return fig


def spatial_differences(root: Path) -> Figure:
    """The all-layer map: exact minus each anchor, the occlusion and the random map, paired 95 % CI, per metric and
    checkpoint."""
    every = _spatial_rows(root)
    others = [m for m in METHOD_COLOURS if m != "exact"]
    k = len(others)
    metrics = {"deletion": "deletion (negative: exact better)", "insertion": "insertion (positive: exact better)",
               "road": "ROAD (positive: exact better)"}  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=(12, 0.5 + 0.32 * max(len(every), 1) * k), sharey=True)
    labels = []
    for i, (name, rows) in enumerate(every.items()):
        for j, method in enumerate(others):
            labels.append(f"{name} − {method}")
            y = k * i + j
            for ax, metric in zip(axes, metrics):
                r = next((r for r in rows if r["layer"] == "all layers" and r["method"] == method
                          and r["metric"] == metric and not r.get("class") and r["diff"]), None)  # fmt: skip
                if r:
                    d, low, high = float(r["diff"]), float(r["diff_low"]), float(r["diff_high"])
                    ax.errorbar(d, y, xerr=[[d - low], [high - d]], fmt="o", capsize=2, color=METHOD_COLOURS[method])
    for ax, title in zip(axes, metrics.values()):
        ax.axvline(0, color="black", lw=0.6)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("exact − that map")
    axes[0].set_yticks(range(len(labels)), labels, fontsize=6)
    axes[0].invert_yaxis()
    fig.suptitle("All-layer exact map against each anchor, the occlusion and a random map (paired bootstrap, 95 % CI)")
    return fig


def spatial_cost(root: Path) -> Figure:
    """Seconds for one batch over one plain forward: exact maps of every layer against one and every anchor layer."""
    every = _spatial_rows(root)
    kinds = {"exact": "exact, every layer", "one layer": "an anchor, one layer", "every layer": "an anchor, every layer"}
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for i, (name, rows) in enumerate(every.items()):
        costs = [r for r in rows if r["metric"] == "cost_x_forward"]
        for j, (kind, label) in enumerate(kinds.items()):
            values = [float(r["mean"]) for r in costs
                      if (r["method"] == "exact") == (kind == "exact") and (kind == "exact" or r["method"].endswith(kind))]  # fmt: skip
            if values:
                ax.bar(i + 0.27 * (j - 1), max(values), width=0.25, color=["#d62728", "#1f77b4", "#9467bd"][j],
                       label=label if i == 0 else None)  # fmt: skip
    ax.set_xticks(range(len(every)), list(every), fontsize=7)
    ax.set_yscale("log")
    return _labelled(ax, "Cost of the maps (anchors: the slowest of the three)", "time / one forward (log)",
                     legend={"fontsize": 8})


def accuracy(root: Path) -> Figure:
    """Test accuracy per setting and head over seeds (mean with its 95 % CI), from ``models/<setting>/summary.csv``."""
    fig, ax = plt.subplots(figsize=(8, 3.2))
    settings = [s for s in SETTINGS if (root / "models" / s / "summary.csv").is_file()]
    labelled: set[str] = set()
    for i, setting in enumerate(settings):
        for row in csv.DictReader((root / "models" / setting / "summary.csv").open()):
            head = SUMMARY_HEADS.get(row["head"].lower(), row["head"].lower())
            mean, ci = row["accuracy"].split(" [")
            low, high = (float(v) for v in ci.rstrip("]").split(", "))
            value = float(mean.split(" ±")[0])
            _errorbar(ax, i + _slot(head), value, low, high, color=COLOURS[head],
                      label=None if head in labelled else HEADS[head])  # fmt: skip
            labelled.add(head)
    ax.set_xticks(range(len(settings)), [SETTINGS[s] for s in settings])
    return _labelled(ax, "Test accuracy over seeds (95 % CI), models/*/summary.csv", "test accuracy",
                     legend={"ncol": 4, "fontsize": 8})


def _short(label: str) -> str:
    """A comparison's label without its parentheses but for IG's baseline, Integrated Gradients as IG."""
    import re

    label = label.replace("(baseline: training mean)", "[mean baseline]").replace("(baseline: zero)", "[zero baseline]")
    return re.sub(r" \([^)]*\)", "", label).replace("Integrated Gradients", "IG")


def comparisons(root: Path) -> Figure:
    """Each setting's comparisons over seeds (``models/<setting>/comparisons.csv``): A − B with its 95 % CI, filled
    where it keeps a direction after Holm over that setting's family (:func:`claims.comparisons._rows`, the family
    ``docs/comparisons.md`` states), hollow where it reads as a tie."""
    import pandas as pd

    sys.path.insert(0, str(ROOT / "scripts"))
    from claims.comparisons import _rows

    from laya.analysis.statistics import holm, holm_verdict

    settings = [s for s in SETTINGS if (root / "models" / s / "comparisons.csv").is_file()]
    fig, axes = plt.subplots(2, (len(settings) + 1) // 2, figsize=(11, 6.4), squeeze=False)
    for ax in axes.flat[len(settings):]:
        ax.set_visible(False)
    for ax, setting in zip(axes.flat, settings):
        rows = _rows(pd.read_csv(root / "models" / setting / "comparisons.csv"), "over seeds", "p (seeds)")
        for y, ((a, b, d, low, high, _), adj) in enumerate(zip(rows, holm([r[5] for r in rows]))):
            kept = holm_verdict(low, high, adj) != "tie"
            ax.errorbar([d], [y], xerr=[[d - low], [high - d]], fmt="o", color="#1f77b4", capsize=2,
                        markerfacecolor="#1f77b4" if kept else "white")  # fmt: skip
        ax.axvline(0, color="#7f7f7f", lw=0.8)
        ax.set_yticks(range(len(rows)), [_short(f"{a.split(': ')[-1]} − {b}") for a, b, *_ in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(SETTINGS[setting], fontsize=9)
        ax.set_xlabel("A − B (95 % CI)", fontsize=8)
    fig.suptitle("Comparisons over seeds; filled: a direction after Holm, hollow: a tie", fontsize=9)
    return fig


def _own_networks(root: Path) -> list[dict]:
    """The checks of ``python scripts/own_networks.py`` (``docs/own-networks/*.json``), the bundled network last."""
    rows = [json.loads(p.read_text()) for p in sorted((root / "docs" / "own-networks").glob("*.json"))]
    return sorted(rows, key=lambda r: "bundled" in r["title"])


def own_profiles(root: Path) -> Figure:
    """Two test inputs of one predicted class, per network: the drop in p(ŷ) per unit that keeps the input under
    resample (the default; a unit without a shortcut named apart, as Inspect draws it apart), and per stage under the
    stage mean-ablation the pages showed before (its bars differ by one constant)."""
    rows = _own_networks(root)
    fig, axes = plt.subplots(len(rows), 2, figsize=(11, 2.9 * len(rows)), squeeze=False)
    for (left, right), r in zip(axes, rows):
        example = r["example"]
        keeps = [u for u, kept in enumerate(r["residual"]) if kept]  # a unit that replaces its output: apart, as on Inspect
        for k, (drops, old) in enumerate(zip(example["drops"], example["old_drops"])):
            shift = (k - 0.5) * 0.38
            left.bar([i + shift for i in range(len(keeps))], [drops[u] for u in keeps], width=0.38,
                     label=f"test input {example['indices'][k]}")  # fmt: skip
            right.bar([i + shift for i in range(len(old))], old, width=0.38, label=f"test input {example['indices'][k]}")
        left.set_xticks(range(len(keeps)), [r["units"][u] for u in keeps], rotation=45, ha="right", fontsize=7)
        apart = [unit for unit, kept in zip(r["units"], r["residual"]) if not kept]
        if apart:
            left.set_xlabel(f"not drawn: {', '.join(apart)} (no shortcut: its whole output replaced)", fontsize=7)
        right.set_xticks(range(len(example["old_drops"][0])), [f"stage {i + 1}" for i in range(len(example["old_drops"][0]))],
                         fontsize=7)  # fmt: skip
        left.set_title(f"{r['title']}: resample, per unit (both predicted {example['class']})", fontsize=9)
        right.set_title("before: stage mean-ablation, per stage", fontsize=9)
        left.set_ylabel("drop in p(ŷ)")
        left.legend(fontsize=7)
    return fig


def own_lens(root: Path) -> Figure:
    """The tuned lens per unit for the same two inputs: p of the network's final class read at each unit."""
    rows = _own_networks(root)
    fig, axes = _grid(len(rows), 4.2, 3.0)
    for ax, r in zip(axes, rows):
        example = r["example"]
        for k, probs in enumerate(example["lens_prob"]):
            depth = example["prediction_depth"][k]
            ax.plot(range(1, len(probs) + 1), probs, marker="o", label=f"input {example['indices'][k]} (depth {depth})")
        ax.set_xticks(range(1, len(r["units"]) + 1), r["units"], rotation=45, ha="right", fontsize=7)
        ax.set_ylim(0, 1.02)
        _labelled(ax, r["title"], "lens p(final class)", legend={"fontsize": 7})
    return fig


def own_gradcam(root: Path) -> Figure:
    """Grad-CAM of the predicted class at every unit, first input of the pair, per network, over the image."""
    import numpy as np

    rows = _own_networks(root)
    cols = 1 + max(len(r["units"]) for r in rows)
    fig, axes = plt.subplots(len(rows), cols, figsize=(1.3 * cols, 1.5 * len(rows)), squeeze=False)
    for line, r in zip(axes, rows):
        image = np.asarray(r["example"]["images"][0], dtype=np.uint8).transpose(1, 2, 0)
        line[0].imshow(image)
        line[0].set_title(f"predicted {r['example']['class']}", fontsize=7)
        for ax, unit, cam in zip(line[1:], r["units"], r["example"]["cams"][0]):
            ax.imshow(image, extent=(0, 1, 0, 1))
            ax.imshow(np.asarray(cam), cmap="jet", alpha=0.5, extent=(0, 1, 0, 1), vmin=0, vmax=1)
            ax.set_title(unit, fontsize=7)
        for ax in line:
            ax.axis("off")
        line[0].text(-0.1, 0.5, r["name"], transform=line[0].transAxes, rotation=90, va="center", ha="right", fontsize=8)
    return fig


def _lesioned(root: Path) -> list[dict]:
    """The networks trained here whose check keeps a lesion study: ``docs/own-networks/*.json`` (the bundled network
    last; the study under ``network_report``), then the Veit study's ``docs/veit/*.json``."""
    veit = [json.loads(p.read_text()) for p in sorted((root / "docs" / "veit").glob("*.json"), reverse=True)]
    own = [r | r["network_report"] for r in _own_networks(root) if "network_report" in r]
    return [r for r in [*own, *veit] if r.get("lesion")]


def lesion(root: Path) -> Figure:
    """Per network, its lesion study: accuracy with each unit skipped alone and resampled alone (95 % bootstrap CI;
    hatched where a unit got the resample fallback) against the intact network's, and accuracy over ``k`` units
    skipped at once (mean and range over the draws)."""
    import numpy as np

    rows = _lesioned(root)
    fig, axes = plt.subplots(2, len(rows), figsize=(3.6 * len(rows), 5.6), squeeze=False)
    for (top, bottom), r in zip(axes.T, rows):
        study, units = r["lesion"], r["units"]
        estimate, low, high = study["intact"]
        top.axhspan(low, high, color="#7f7f7f", alpha=0.25, lw=0)
        top.axhline(estimate, color="#7f7f7f", ls="--", lw=1, label="intact")
        for k, (kind, colour) in enumerate((("skip", "#d62728"), ("resample", "#1f77b4"))):
            got = {row["unit"]: row for row in study["single"] if row["intervention"] == kind}
            x = np.arange(len(units)) + (k - 0.5) * 0.38
            value = np.array([got[u]["accuracy"] for u in units])
            error = [value - [got[u]["low"] for u in units], [got[u]["high"] for u in units] - value]
            bars = top.bar(x, value, width=0.38, color=colour, alpha=0.8, label=kind, yerr=error, capsize=2,
                           error_kw={"lw": 0.8})  # fmt: skip
            for bar, u in zip(bars, units):  # a unit that got another intervention (a fallback): hatched
                bar.set_hatch(None if got[u]["method"].startswith(kind) else "///")  # "skip: its input passed on" too
        top.set_xticks(range(len(units)), units, rotation=60, ha="right", fontsize=6)
        top.set_ylim(0, 1.2)
        _labelled(top, r["title"].split(" (")[0], "test accuracy", legend={"fontsize": 6, "loc": "upper center",
                                                                            "ncol": 3})  # fmt: skip
        top.title.set_fontsize(8)
        curve = study["curve"]
        ks = [c["k"] for c in curve]
        bottom.fill_between(ks, [c["min"] for c in curve], [c["max"] for c in curve], color="#d62728", alpha=0.2, lw=0)
        bottom.plot(ks, [c["mean"] for c in curve], marker="o", ms=3, color="#d62728")
        bottom.set_ylim(0, 1)
        _labelled(bottom, "k units skipped at once", "test accuracy", "k")
        bottom.title.set_fontsize(8)
    return fig


FIGURES: dict[str, Callable[[Path], Figure]] = {
    "accuracy": accuracy,
    "comparisons": comparisons,
    "prediction-depth": prediction_depth,
    "detection": detection,
    "early-exit": early_exit,
    "pruning": pruning,
    "lens": lens,
    "alpha": alpha,
    "spatial-layers": spatial_layers,
    "spatial-differences": spatial_differences,
    "spatial-cost": spatial_cost,
    "own-profiles": own_profiles,
    "own-lens": own_lens,
    "own-gradcam": own_gradcam,
    "lesion": lesion,
}


def write(out: Path, names: list[str] | None = None, root: Path = ROOT) -> list[Path]:
    """Draw the figures ``names`` (default all) from the files under ``root`` into ``out``; the PNGs written."""
    unknown = sorted(set(names or []) - set(FIGURES))
    if unknown:
        raise ValueError(f"unknown figure(s) {unknown}; expected some of {sorted(FIGURES)}")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or FIGURES:
        fig = FIGURES[name](root)
        fig.tight_layout(rect=(0, 0.1 if fig.legends else 0, 1, 1))  # room for a figure-level legend
        path = out / f"{name}.png"
        fig.savefig(path, dpi=80, metadata={"Software": None})
        plt.close(fig)
        written.append(path)
    return written


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help=f"figures to draw (default all: {', '.join(FIGURES)})")
    p.add_argument("--out", default=str(ROOT / "docs" / "figures"))
    args = p.parse_args()
    for path in write(Path(args.out), args.names or None):
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    sys.exit(main())
