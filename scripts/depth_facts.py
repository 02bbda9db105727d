"""The numbers of the Depth analytics page's "What the numbers say", computed from the bundled reports.

    python scripts/depth_facts.py [models] [detection depth exits truncation]

Reads every ``models/<setting>/<head>/depth.json`` (``python -m laya depth``) and ``exits.json``
(``python -m laya exits``) and prints the bullet list the page embeds as a generated block (checked by
``scripts/prose_claims.py``): ranges are min–max over the checkpoints named, verdicts are the paired bootstraps
stored in the reports (a CI covering 0 is a tie), savings are measured runs, each counted against its own
timing noise (:func:`laya.analysis.depth.measured.saving_noise` of its exit kind's or truncation's timings): a
wall-clock saving or speed-up no larger than the noise is stated as "within the noise"
(:func:`laya.analysis.statistics.saving_verdict`), never as a figure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python scripts/...` from a checkout
from laya.analysis.depth.measured import best_exit, saving_noise, saving_text
from laya.analysis.statistics import holm, holm_verdict, saving_verdict

NAMES = {"fashion-mnist-mlp": "Fashion-MNIST MLP", "cifar10-cnn": "CNN", "cifar10-vit": "ViT",
         "cifar10-efficientnet-lite0": "EfficientNet", "cifar10-resnet18-half": "attached ResNet-18",
         "cifar10-resnet20": "ResNet-20"}  # fmt: skip
HEADS = {"laya": "LAYA", "scalarmix": "ScalarMix", "concat": "Concat", "lastlayer": "LastLayer",
         "own": "own classifier"}  # fmt: skip


def _range(values, spec: str = ".2f", unit: str = "") -> str:
    low, high = min(values), max(values)
    return f"{low:{spec}}{unit}" if f"{low:{spec}}" == f"{high:{spec}}" else f"{low:{spec}}–{high:{spec}}{unit}"


def _saved_range(values) -> str:
    """Signed percentages (savings; negative = slower) with a true minus sign; one that rounds to 0 is +0%, never
    −0% (a negative zero of the rounding)."""
    return _range(values, "+.0%").replace("-0%", "+0%").replace("-", "−")


def _pct_range(values) -> str:
    return _range([100 * v for v in values], ".0f", " %")


def _load(models: Path, name: str) -> dict[tuple[str, str], dict]:
    return {(p.parent.parent.name, p.parent.name): json.loads(p.read_text()) for p in sorted(models.glob(f"*/*/{name}"))}


def _holm_better(rows: list[pd.Series]) -> list[bool]:
    """Whether each row's score beats max softmax (AUROC higher), Holm-corrected over the rows stated together
    (``vs_msp_p``: the paired bootstrap's two-sided p)."""
    adjusted = holm([float(r["vs_msp_p"]) for r in rows])
    return [holm_verdict(float(r["vs_msp_low"]), float(r["vs_msp_high"]), p) == "higher" for r, p in zip(rows, adjusted)]


def detection_facts(depth: dict) -> list[str]:
    """Each line is one family of comparisons against max softmax, Holm-corrected over that line's comparisons."""
    mis, other, noise = [], [], []  # (setting, row) of every comparison a line states
    for (setting, head), report in depth.items():
        table = pd.DataFrame(report["detection"]["table"])
        signals = table[~table["score"].isin(["msp"]) & table["vs_msp_p"].notna()]
        mis += [((setting, head), r) for _, r in signals[signals["task"] == "misclassification"].iterrows()]
        for task, part in signals[signals["task"].str.startswith("OOD")].groupby("task"):
            maha = part[part["score"] == "mahalanobis"]
            if not maha.empty:
                (noise if "noise" in task else other).append((setting, maha.iloc[0]))
    lines = []
    better = _holm_better([r for _, r in mis])
    checkpoints = list(dict.fromkeys(c for c, _ in mis))
    none = sum(not any(b for (c2, _), b in zip(mis, better) if c2 == c) for c in checkpoints)
    lines.append(f"misclassification: on {none} of {len(checkpoints)} checkpoints no score beats max softmax "
                 f"(paired bootstrap, Holm-corrected over the {len(mis)} comparisons)")  # fmt: skip
    better = _holm_better([r for _, r in other])
    cells = []
    for s in dict.fromkeys(s for s, _ in other):
        mine = [r for s2, r in other if s2 == s]
        cells.append(f"{NAMES.get(s, s)} {_range([r['auroc'] for r in mine])} vs "
                     f"{_range([r['auroc'] - r['vs_msp'] for r in mine])}")  # fmt: skip
    lines.append(f"OOD, other dataset: multi-layer Mahalanobis beats max softmax on {sum(better)} of {len(other)} "
                 f"checkpoints (Holm-corrected; AUROC, Mahalanobis vs MSP: {'; '.join(cells)})")  # fmt: skip
    better = _holm_better([r for _, r in noise])
    cells = [f"{NAMES.get(s, s)} {sum(b for (s2, _), b in zip(noise, better) if s2 == s)} of "
             f"{sum(s2 == s for s2, _ in noise)}" for s in dict.fromkeys(s for s, _ in noise)]  # fmt: skip
    lines.append(f"OOD, uniform and Gaussian noise: Mahalanobis beats max softmax on {'; '.join(cells)} (checkpoint × "
                 f"noise, Holm-corrected over the {len(noise)})")  # fmt: skip
    return lines


def depth_facts_lines(depth: dict) -> list[str]:
    by_setting: dict[str, list] = {}
    over = []
    for (setting, head), report in depth.items():
        overall = next(r for r in report["prediction_depth"] if r["class"] == "all")
        by_setting.setdefault(setting, []).append((head, overall["prediction_depth"], len(report["layer_names"])))
        if overall["overthought_errors"] == overall["overthought_errors"]:  # not NaN
            over.append((overall["overthought_errors"], setting, head))
    cells = [f"{NAMES.get(s, s)} {_range([d for _, d, _ in v], '.1f')} of {v[0][2]}" for s, v in by_setting.items()]
    low, high = min(over), max(over)
    lines = [f"prediction depth (mean over test inputs, range over heads): {'; '.join(cells)}",
             f"overthought errors (an error some layer's readout got right): {_pct_range([o for o, _, _ in over])} of "
             f"errors over the {len(over)} checkpoints; lowest {NAMES.get(low[1], low[1])} {HEADS.get(low[2], low[2])} "
             f"({low[0]:.0%}), highest {NAMES.get(high[1], high[1])} {HEADS.get(high[2], high[2])} ({high[0]:.0%})"]  # fmt: skip
    laya = depth.get(("fashion-mnist-mlp", "laya"))
    if laya:
        readouts = " / ".join(f"{r['estimate']:.0%}" for r in laya["readout_accuracy"])
        lines.append(f"Fashion-MNIST LAYA's own readouts alone: {readouts} accuracy on its {len(laya['layer_names'])} "
                     f"blocks vs {laya['accuracy']:.0%} for the head")  # fmt: skip
    return lines


def _noise(values) -> str:
    return "±" + _range(values, ".0%").replace("%–", "–")


def _timed(values: list[tuple[str, float, float]]) -> str:
    """``(head, saving, noise)`` of the checkpoints stated together: each saving that exceeds its own timing noise
    by head (:func:`saving_verdict`), the others only counted as within the noise; then the noise range."""
    beyond = [(head, saving) for head, saving, noise in values if saving_verdict(saving, noise) != "within the noise"]
    rest = len(values) - len(beyond)
    cells = [f"{HEADS.get(h, h)} {_saved_range([v])}" for h, v in beyond]
    if rest:
        cells.append("within the noise" if not beyond else f"{rest} within the noise")
    return f"{', '.join(cells)} (noise {_noise([n for _, _, n in values])})"


def _beyond(values: list[tuple[float, float]]) -> str:
    """``(saving, noise)`` pairs (:func:`saving_noise`): how many savings exceed their noise, and the noise range."""
    beyond = sum(saving_verdict(effect, noise) != "within the noise" for effect, noise in values)
    return f"{beyond} of {len(values)} beyond their noise {_noise([n for _, n in values])}"


def exit_facts(exits: dict) -> list[str]:
    lines = []
    groups: dict[tuple[str, str], list] = {}
    batches = sorted({int(k.split("_b")[1]) for r in exits.values() for k in r["runs"][0] if k.startswith("saved_b")})
    for (setting, head), report in exits.items():
        runs = pd.DataFrame(report["runs"])
        for kind, part in runs.groupby("exits", sort=False):
            row, within = best_exit(part)
            noise = {b: saving_noise(part, b) for b in batches}  # this exit kind's own timings
            groups.setdefault((setting, kind), []).append((head, row, within, noise))
    for (setting, kind), items in groups.items():
        ok = [(h, r, n) for h, r, w, n in items if w]
        none = [HEADS.get(h, h) for h, _, w, _ in items if not w]
        text = f"{NAMES.get(setting, setting)}, {kind} exits: "
        if ok:
            times = ", ".join(f"batch {b:,} {_timed([(h, r[f'saved_b{b}'], n[b]) for h, r, n in ok])}" for b in batches)
            text += (f"within 1 point for {', '.join(HEADS.get(h, h) for h, _, _ in ok)}: MACs saved "
                     f"{_saved_range([r['macs_saved'] for _, r, _ in ok])}, wall clock saved {times}")  # fmt: skip
        if none:
            text += ("; " if ok else "") + f"no threshold within 1 point for {', '.join(none)}"
        lines.append(text)
    return lines


def exit_summary(exits: dict) -> list[str]:
    """One line: per exit kind, the checkpoints with a threshold within 1 point, their MACs saved, and how many of
    their wall-clock savings exceed the report's timing noise."""
    kinds: dict[str, list] = {}
    for report in exits.values():
        runs = pd.DataFrame(report["runs"])
        batches = sorted(int(c.split("_b")[1]) for c in runs.columns if c.startswith("saved_b"))
        for kind, part in runs.groupby("exits", sort=False):
            row, within = best_exit(part)
            kinds.setdefault(kind, []).append((row, within, [(row[f"saved_b{b}"], saving_noise(part, b)) for b in batches]))
    cells = []
    for kind, items in kinds.items():
        ok = [(row, times) for row, within, times in items if within]
        text = f"{kind} exits on {len(ok)} of {len(items)} checkpoints"
        if ok:
            text += (f" (MACs saved {_saved_range([row['macs_saved'] for row, _ in ok])}; wall-clock changes, all batch sizes: "
                     f"{_beyond([t for _, times in ok for t in times])})")  # fmt: skip
        cells.append(text)
    return ["within 1 point of the full model's accuracy: " + "; ".join(cells)]


def truncation_facts(exits: dict) -> list[str]:
    within, lost = [], []
    for (setting, head), report in exits.items():
        if not report.get("truncation"):
            continue
        full = pd.DataFrame(report["truncation"])
        table = full[full["accuracy"] >= full["full_accuracy"] - 0.01]
        name = f"{NAMES.get(setting, setting)} {HEADS.get(head, head)}"
        if table.empty:
            lost.append(name)
            continue
        row = table.loc[table["macs_speedup"].idxmax()]
        batches = [int(k.split("_b")[1]) for k in row.index if k.startswith("speedup_b")]
        noise = {b: saving_noise(full, b, "full_ms") for b in batches}
        times = ", ".join(f"{saving_text(row[f'speedup_b{b}'] - 1, noise[b], speedup=True)} at batch {b:,} "
                          f"(noise {_noise([noise[b]])})" for b in batches)  # fmt: skip
        within.append(f"{name} ({int(row['layers_kept'])} of {len(report['layer_names'])} layers, {row['variant']}, "
                      f"{row['accuracy']:.3f} vs {row['full_accuracy']:.3f}: {row['macs_speedup']:.2f}× by MACs, {times})")  # fmt: skip
    lines = [f"truncation within 1 point of the full model: {'; '.join(within) or 'none'}"]
    if lost:
        lines.append(f"every truncation loses more than 1 point: {', '.join(lost)}")
    return lines


def depth_inputs(models: Path) -> str:
    """One line: the test / training inputs each setting's depth analytics used (from ``depth.json``)."""
    sizes: dict[tuple[int, int], list[str]] = {}
    for (setting, _), report in _load(models, "depth.json").items():
        names = sizes.setdefault((report["n_test"], report["n_train"]), [])
        if NAMES.get(setting, setting) not in names:
            names.append(NAMES.get(setting, setting))
    cells = [f"{' and '.join(names)} on {n:,} test and {t:,} training inputs" for (n, t), names in sizes.items()]
    return "Inputs per setting (from each `depth.json`): " + "; ".join(cells) + ".\n"


#: topic -> (report file, its facts); the docs' pages each embed their topic's
FACTS = {"detection": ("depth.json", detection_facts), "depth": ("depth.json", depth_facts_lines),
         "exits": ("exits.json", exit_facts), "exit-summary": ("exits.json", exit_summary), "truncation": ("exits.json", truncation_facts)}  # fmt: skip


def depth_facts(models: Path, topics: str = "") -> str:
    """The bullet list of the facts of ``topics`` (space-separated keys of :data:`FACTS`; empty: all)."""
    names = topics.split() or [name for name in FACTS if name != "exit-summary"]
    unknown = sorted(set(names) - set(FACTS))
    if unknown:
        raise ValueError(f"unknown depth-facts topic(s) {unknown}; expected some of {list(FACTS)}")
    lines = [line for name in names for line in FACTS[name][1](_load(models, FACTS[name][0]))]
    return "".join(f"* {line}\n" for line in lines)


if __name__ == "__main__":
    print(depth_facts(Path(sys.argv[1] if len(sys.argv) > 1 else "models"), " ".join(sys.argv[2:])), end="")
