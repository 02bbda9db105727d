"""The verdict sentences of the pixel benchmark, computed from its CSVs (``python benchmarks/spatial_maps.py``).

    python scripts/spatial_facts.py [docs/spatial_maps] [sample|headline|cost|verdicts|training|weights] [CHECKPOINT-GLOB]

A metric judges nothing on a checkpoint where it does not discriminate there (``spatial_maps.discriminating``: the
occlusion reference is not better than a random map with its paired CI excluding 0) or where its CSV has no such
check: it is stated as such, and none of its comparisons is counted or worded. Every other word that judges (wins,
ties, loses) is the paired-bootstrap verdict of exact minus that map, Holm-corrected over one checkpoint's pooled
comparisons on the metrics that discriminate there (``claims.spatial.holm_words``: a tie where the CI covers 0 or
the adjusted p exceeds 0.05; the per-checkpoint tally uses the same family), so rewriting the CSVs and running
``python scripts/prose_claims.py --write`` rewrites the sentences, whatever the new files say. A CSV that states no
class-balanced sample or has no per-class rows is named in a warning instead of being read as general.
"""

from __future__ import annotations

import csv
import fnmatch
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))
from claims.spatial import holm_words  # noqa: E402
from laya.analysis.statistics import format_diff  # noqa: E402
from spatial_maps import (  # noqa: E402
    ALL, ANCHORS, CHECK, METRICS, NEGLIGIBLE, NOT_DISCRIMINATING, RANDOM, REFERENCE, SHARE, TIE_BREAK, discriminating)

WORD = {"better": "wins", "tie": "ties", "worse": "loses"}
METRIC_NAMES = {"deletion": "deletion", "insertion": "insertion", "road": "ROAD"}


def _rows(folder: Path, pattern: str = "*") -> dict[str, list[dict]]:
    """Checkpoint name -> its CSV rows, for the CSVs in ``folder`` whose checkpoint matches ``pattern``; each pooled
    comparison row on a metric that discriminates there gets ``"holm"``, its Holm-corrected word
    (:func:`claims.spatial.holm_words`), the others ``""``; the check rows are kept under ``"check"``."""
    out: dict[str, list[dict]] = {}
    for path in sorted(Path(folder).glob("*.csv")):
        for row in csv.DictReader(path.open()):
            if fnmatch.fnmatch(row["checkpoint"], pattern):
                out.setdefault(row["checkpoint"], []).append({**row, "holm": ""})
    for rows in out.values():
        works = discriminating(rows)
        family = [r for r in _pooled(rows) if r.get("diff") and works.get((r["checkpoint"], r["metric"]))]
        for r, word in zip(family, holm_words(family)):
            r["holm"] = word
    return out


def _pooled(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["metric"] in METRICS and not r.get("class") and r["method"] != CHECK]


def _works(rows: list[dict]) -> dict[str, bool]:
    """Metric -> whether it discriminates on this checkpoint (absent: no check in its CSV)."""
    return {metric: ok for (_, metric), ok in discriminating(rows).items()}


def _silent(works: dict[str, bool], metric: str) -> str:
    """How a metric without verdicts is named: it does not discriminate here, or its CSV has no check."""
    return f"{METRIC_NAMES[metric]} {NOT_DISCRIMINATING if metric in works else 'not checked'}"


def _balanced(rows: list[dict]) -> bool:
    pooled = _pooled(rows)
    return bool(pooled) and all(r.get("sample", "").startswith("balanced") for r in pooled) and \
        any(r.get("class") for r in rows)  # fmt: skip


def _sample(rows: list[dict]) -> str:
    first = _pooled(rows)[0]
    if first.get("sample", "").startswith("balanced"):
        return f"{first['n']} test images, class-balanced random sample, seed {first['sample'].split(' seed ')[1]}"
    return f"{first['n']} test images, the first of the test split (no sample stated)"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _diff(row: dict) -> str:
    """The row's exact − map difference with its CI (:func:`laya.analysis.statistics.format_diff`), true minus."""
    return format_diff(float(row["diff"]), float(row["diff_low"]), float(row["diff_high"])).replace("-", "−")


def sample(folder: Path) -> str:
    """The sample and tie-break of every CSV, and a warning naming those that are not class-balanced."""
    every = _rows(folder)
    if not every:
        return ""
    lines = [f"Measured on: {'; '.join(f'{name}, {_sample(rows)}' for name, rows in every.items())}. "
             f"Ties in a map's ranking: {TIE_BREAK}.", ""]  # fmt: skip
    stale = [name for name, rows in every.items() if not _balanced(rows)]
    if stale:
        lines += ['!!! warning "Not a class-balanced measurement"',
                  f"    The CSVs of {', '.join(stale)} state no class-balanced sample or hold no per-class rows: they "
                  "measured the first test images (in CIFAR-10's class-sorted test split, one class) and summed the "
                  "all-layer map in float32. Their verdicts below describe that sample only; the rerun command "
                  "below replaces them.", ""]  # fmt: skip
    return "\n".join(lines)


def headline(folder: Path) -> str:
    """One line: the all-layer exact map's wins / ties / losses against every anchor, per metric."""
    every = _rows(folder)
    if not every:
        return ""
    cells = []
    for metric in METRICS:
        where = [rows for rows in every.values() if _works(rows).get(metric)]
        verdicts = [r["holm"] for rows in where for r in _pooled(rows)
                    if r["layer"] == ALL and r["metric"] == metric and r["method"] in ANCHORS]  # fmt: skip
        counts = " / ".join(str(verdicts.count(v)) for v in WORD) if where else "no verdicts"
        on = f"discriminates on {len(where)} of {_count(len(every), 'checkpoint')}"
        cells.append(f"{METRIC_NAMES[metric]} {counts} ({on})")
    stale = [name for name, rows in every.items() if not _balanced(rows)]
    caveat = f" Not a class-balanced sample: {', '.join(stale)} (the first test images)." if stale else ""
    unchecked = [name for name, rows in every.items() if not _works(rows)]
    if unchecked:
        caveat += (f" No metric check in the CSVs of {', '.join(unchecked)} (written before it): no verdict of theirs "
                   "is counted.")
    return (f"**Verdict:** the all-layer exact map against Grad-CAM, HiResCAM and LayerCAM, wins / ties / losses "
            f"on the checkpoints where the metric discriminates (the occlusion reference beats a random map, paired "
            f"bootstrap, its CI excluding 0), × {len(ANCHORS)} anchors: {'; '.join(cells)} (paired bootstrap, 95 %, "
            f"Holm-corrected over each checkpoint's comparisons on those metrics).{caveat}\n")  # fmt: skip


def cost(folder: Path) -> str:
    """One line: the exact maps' cost against the anchors', in plain forwards, over every CSV."""
    ratios: dict[str, list[float]] = {}
    for rows in _rows(folder).values():
        for r in rows:
            if r["metric"] == "cost_x_forward":
                kind = "exact" if r["method"] == "exact" else r["method"].split(" ", 1)[1]
                ratios.setdefault(kind, []).append(float(r["mean"]))
    if not ratios:
        return ""

    def span(kind: str) -> str:
        low, high = min(ratios[kind]), max(ratios[kind])
        return f"{low:.1f}×" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}–{high:.1f}×"

    return (f"**Verdict:** the exact maps of every layer cost {span('exact')} a plain forward; one anchor map of one "
            f"layer costs {span('one layer')} and an anchor's maps of every layer {span('every layer')} (one timed "
            f"run per checkpoint, {_count(len(_rows(folder)), 'checkpoint')}, `docs/spatial_maps/*.csv`).\n")  # fmt: skip


def _per_class(rows: list[dict], works: dict[str, bool]) -> str:
    """Per metric that discriminates, in how many classes the all-layer exact map has the best mean of the maps
    compared (the references, occlusion and random, are no competitors)."""
    rows = [r for r in rows if r.get("class") and r["layer"] == ALL and r["method"] not in (RANDOM, REFERENCE)]
    if not rows or not any(works.values()):
        return ""
    cells = []
    for metric, better in METRICS.items():
        if not works.get(metric):
            continue
        best: dict[str, tuple[float, str]] = {}
        for r in (r for r in rows if r["metric"] == metric):
            value = float(r["mean"]) if better == "higher" else -float(r["mean"])
            if r["class"] not in best or value > best[r["class"]][0]:
                best[r["class"]] = (value, r["method"])
        cells.append(f"{METRIC_NAMES[metric]} {sum(m == 'exact' for _, m in best.values())} of {len(best)}")
    return f" Per true class, the all-layer exact map has the best mean in: {', '.join(cells)} classes."


def verdicts(folder: Path, pattern: str = "*") -> str:
    """One bullet per checkpoint matching ``pattern``: the all-layer map against each anchor and random, the
    per-layer tallies and the per-class breakdown; empty when no CSV matches."""
    lines = []
    for name, rows in _rows(folder, pattern or "*").items():
        pooled, works = _pooled(rows), _works(rows)
        silent = [_silent(works, m) for m in METRICS if not works.get(m)]
        against = []
        for method in (*ANCHORS, REFERENCE, RANDOM):
            cells = [f"{METRIC_NAMES[r['metric']]} {WORD[r['holm']]} ({_diff(r)})" for r in pooled
                     if r["layer"] == ALL and r["method"] == method and r["holm"]]  # fmt: skip
            if cells:
                against.append(f"against {method}: {', '.join(cells)}")
        tallies = []
        for metric in METRICS:
            if works.get(metric):
                v = [r["holm"] for r in pooled if r["layer"] != ALL and r["metric"] == metric and r["holm"]]
                tallies.append(f"{METRIC_NAMES[metric]} {' / '.join(str(v.count(w)) for w in WORD)}")
        layers = len({r["layer"] for r in pooled if r["layer"] != ALL})
        check = [r for r in rows if r["method"] == CHECK and not r.get("class")]
        words = "; ".join(f"{METRIC_NAMES[r['metric']]} {_diff(r)}, {r['verdict']}" for r in check)
        text = f"* **{name}** ({_sample(rows)}). "
        text += (f"Metric check (occlusion − random, paired bootstrap): {words}. " if check else
                 "No metric check in its CSV (written before the occlusion reference): no verdict is stated. ")  # fmt: skip
        if against:
            text += f"All-layer map (Δ = exact − that map) {'; '.join(against)}. "
        if tallies:
            text += f"Per layer ({_count(layers, 'layer')} × anchors), wins / ties / losses: {'; '.join(tallies)}."
        if silent and check:
            text += f" No verdicts: {', '.join(silent)}."
        lines.append(text.rstrip() + _per_class(rows, works))
    return "".join(f"{line}\n" for line in lines)


def training(folder: Path) -> str:
    """One line per ``*-train.json`` in ``folder``: how a checkpoint trained for the benchmark alone was made."""
    import json

    lines = []
    for path in sorted(Path(folder).glob("*-train.json")):
        info = json.loads(path.read_text())
        metrics = info["metrics"]
        lines.append(f"`{info['checkpoint']}`: {metrics['epochs']} epochs, test accuracy {metrics['test_accuracy']:.3f} "
                     f"(`{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}`, written by "
                     f"`{info['written_by'].split(' (')[0]}`).")  # fmt: skip
    return "".join(f"{line}\n" for line in lines)


def weights(folder: Path) -> str:
    """One bullet per checkpoint whose all-layer exact map orders pixels by layers carrying less than ``NEGLIGIBLE``
    of its absolute mass (the ``layer_share`` rows), and a line naming the checkpoints measured otherwise."""
    notes, fine, unmeasured = [], [], []
    for name, rows in _rows(folder).items():
        shares = [r for r in rows if r["metric"] == SHARE]
        if not shares:
            unmeasured.append(name)
            continue
        ordering = [r for r in shares if r["verdict"] == "orders pixels"]
        flat = [r for r in shares if r["verdict"] != "orders pixels"]
        part = sum(float(r["mean"]) for r in ordering)
        if not ordering:
            grids = ", ".join(f"{r['layer']} {r['grid']}" for r in flat)
            notes.append(f"* **{name}**: every layer's exact map is constant over the frame "
                         f"({grids}), so the all-layer map orders no "
                         "pixel: its ranking is the shared seeded order of equal values, the same as a random map's.")
        elif part < NEGLIGIBLE:
            constant = ", ".join(f"{r['layer']} ({r['grid']} grid)" for r in flat)
            verb = "carries" if len(flat) == 1 else "carry"
            rest = f"{constant}, constant over the frame, {verb} the rest. " if flat else ""
            notes.append(f"* **{name}**: the all-layer exact map's pixel order comes from "
                         f"{', '.join(r['layer'] for r in ordering)}, whose terms carry {part:.1g} of its absolute "
                         f"mass together (mean share over the images); {rest}Its rankings are those of terms the "
                         "head weights near zero.")  # fmt: skip
        else:
            fine.append(f"{name} {part:.2g}")
    lines = notes or ([f"* No all-layer exact map measured orders its pixels by layers carrying less than "
                       f"{NEGLIGIBLE:g} of its mass."] if fine else [])  # fmt: skip
    if fine:
        lines.append(f"* The layers that order the pixels carry at least {NEGLIGIBLE:g} of the map's mass on: "
                     f"{'; '.join(fine)}.")
    if unmeasured:
        lines.append(f"* Not measured (no `layer_share` rows, CSV written before them): {', '.join(unmeasured)}.")
    return "".join(f"{line}\n" for line in lines)


FACTS = {"sample": sample, "headline": headline, "cost": cost, "verdicts": verdicts, "training": training,
         "weights": weights}


def spatial_facts(folder: Path, topic: str, pattern: str = "") -> str:
    if topic not in FACTS:
        raise ValueError(f"unknown spatial-facts topic {topic!r}; expected one of {list(FACTS)}")
    return verdicts(folder, pattern) if topic == "verdicts" else FACTS[topic](folder)


if __name__ == "__main__":
    args = sys.argv[1:]
    print(spatial_facts(Path(args[0] if args else ROOT / "docs" / "spatial_maps"), *(args[1:] or ["verdicts"])), end="")
