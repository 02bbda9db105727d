"""Train and evaluate every head of a setting over several seeds; summarise as a paper-style table.

Every step is resumable: a finished training run (``model.json`` present) or evaluation
(``report.json`` present) is skipped, an interrupted training run resumes from its state.
Layout: ``RUNS/<setting>/<head>/seed<k>/{model.*, report.json, per_input.safetensors, *.csv}``.

Tables: every figure is mean ± sample std over seeds with a 95% t-interval over seeds, or, for a
single seed, the value with its 95% bootstrap CI over test inputs. Comparisons between heads and
between methods are paired: a paired t-test over seeds and a paired bootstrap over the test inputs
of the first seed (from the runs' per-input arrays); a CI covering 0 is a tie.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from safetensors.torch import load_file
from tqdm.auto import tqdm

from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.head.attribution import DEFAULT_REDUCTION, METHOD_LABELS, POSTHOC_METHODS, ig_description
from laya.analysis.head.faithfulness import HEADLINE_METRIC, METRIC_LABELS, NOT_APPLICABLE, REPORTED_METRICS
from laya.analysis.report import PER_INPUT_FILE, REPORT_FILE, Report, write_report
from laya.analysis.statistics import paired_bootstrap, paired_over_seeds, seed_interval, verdict
from laya.data.datasets import load_dataset
from laya.model.checkpoint import load_checkpoint
from laya.model.heads import DEFAULT_MODE
from laya.model.heads import HEAD_LABELS as LAYER_HEADS
from laya.model.own_head import OWN, is_own_head
from laya.training.settings import Setting
from laya.training.train import train

HEAD_LABELS = {OWN: "Own classifier", **LAYER_HEADS}  # an attached network's own head first


def run_suite(
    setting: Setting,
    runs: str | Path = "runs",
    seeds: Sequence[int] | None = None,
    heads: Sequence[str] | None = None,
    options: EvalOptions | None = None,
    device: str | None = None,
    stream: bool | None = None,
) -> list[Path]:
    """Train (or resume) and evaluate each (head, seed) run; returns the run directories.

    ``device`` (default auto) and ``options.precision`` apply to training and evaluation; ``stream``: see
    :func:`~laya.data.datasets.load_dataset`. Neither changes the runs' directories.
    """
    seeds = tuple(seeds if seeds is not None else setting.seeds)
    heads = tuple(heads or setting.heads)
    options = options or EvalOptions(limit=setting.eval_limit)
    jobs = [(head, seed) for seed in seeds for head in heads]
    done = []
    test = None
    for head, seed in tqdm(jobs, desc=f"{setting.name}: runs", unit="run"):
        config = setting.config(head, seed, Path(runs))
        out = Path(config.out)
        if not (out / "model.json").is_file():
            tqdm.write(f"training {setting.name} / {head} / seed {seed} -> {out}")
            train(replace(config, resume=True, device=device or "auto", precision=options.precision, stream=stream))
        if not (out / REPORT_FILE).is_file():
            test = test or load_dataset(config.dataset, "test", config.image_size, stream=stream)
            tqdm.write(f"evaluating {out}")
            per_input: dict = {}
            checkpoint = load_checkpoint(out, map_location=device or "auto")
            write_report(evaluate(checkpoint, test, options, per_input=per_input), out, per_input)
        done.append(out)
    return done


def results_table(run_dirs: Sequence[Path]) -> pd.DataFrame:
    """One row per (run, mode, reduction, method): accuracy with its CI, status, and every faithfulness
    metric with its 95% bootstrap CI over inputs (``<metric>``, ``<metric>_low``, ``<metric>_high``)."""
    frames = []
    for run in run_dirs:
        report = Report.load(run)
        info = report.data["checkpoint"]
        accuracy, macro_f1 = report.interval("accuracy"), report.interval("macro_f1")
        table = report.faithfulness_table()
        table.insert(0, "run", str(run))
        table.insert(1, "head", OWN if _own(run) else info["head"])
        table.insert(2, "seed", info["seed"])
        table["primary"] = table["method"] == report.primary_method
        table = table.assign(
            accuracy=accuracy["estimate"], accuracy_low=accuracy["low"], accuracy_high=accuracy["high"],
            macro_f1=macro_f1["estimate"], macro_f1_low=macro_f1["low"], macro_f1_high=macro_f1["high"],
            train_seconds=info["train_metrics"].get("train_seconds"), epochs=info["train_metrics"].get("epochs"),
        )  # fmt: skip
        frames.append(table)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _own(run: Path) -> bool:
    """Whether the run is an attached network's own classifier (its ``model.json`` says so)."""
    meta = Path(run) / "model.json"
    return meta.is_file() and is_own_head(json.loads(meta.read_text()).get("train") or {})


def _pm(rows: pd.DataFrame, column: str, digits: int = 3) -> str:
    """``mean ± std [t-interval over seeds]`` over the rows (one per seed), or, for one seed,
    ``value [bootstrap CI over inputs]``; the status where the metric is not applicable."""
    if rows.empty:
        return "–"
    if column in REPORTED_METRICS and (rows["status"] == NOT_APPLICABLE).all():
        return NOT_APPLICABLE
    values = rows[column].dropna().astype(float)
    if values.empty:
        return "–"
    if len(values) == 1:
        row = rows.loc[values.index[0]]
        low, high = row.get(f"{column}_low"), row.get(f"{column}_high")
        interval = f" [{low:.{digits}f}, {high:.{digits}f}]" if low is not None and pd.notna(low) else ""
        return f"{values.iloc[0]:.{digits}f}{interval}"
    ci = seed_interval(values.tolist())
    return f"{ci.estimate:.{digits}f} ± {values.std(ddof=1):.{digits}f} [{ci.low:.{digits}f}, {ci.high:.{digits}f}]"


def _part(results: pd.DataFrame, mode: str, reduction: str) -> pd.DataFrame:
    return results[(results["mode"] == mode) & (results["reduction"] == reduction)]


def summary_table(results: pd.DataFrame, mode: str = DEFAULT_MODE, reduction: str = DEFAULT_REDUCTION) -> pd.DataFrame:
    """Paper-style table, one row per head, under one intervention ``mode`` and score ``reduction``.

    Faithfulness is for the head's primary method (its intrinsic scores; IG for heads without them)
    and for Integrated Gradients: Spearman over informative layers, top-1 agreement, Deletion@1 / oracle
    (mean and its robust companion, the median), and the paper's Spearman over all layers.
    """
    rows = []
    part = _part(results, mode, reduction)
    for head in [h for h in HEAD_LABELS if h in set(part["head"])]:
        mine = part[part["head"] == head]
        primary, ig = mine[mine["primary"]], mine[mine["method"] == "integrated_gradients"]
        per_seed = mine.drop_duplicates("seed")
        rows.append(
            {
                "head": HEAD_LABELS[head],
                "seeds": int(per_seed["seed"].nunique()),
                "accuracy": _pm(per_seed, "accuracy", 4),
                "macro-F1": _pm(per_seed, "macro_f1", 4),
                "layer scores": METHOD_LABELS.get(primary["method"].iloc[0], "–") if len(primary) else "–",
                **{
                    METRIC_LABELS[m]: _pm(primary, m)
                    for m in ("spearman_eps", "top1", "deletion_at_1_norm", "deletion_at_1_norm_median",
                              "deletion_at_1_norm_trimmed", "spearman")
                    if m in primary
                },
                f"IG {METRIC_LABELS[HEADLINE_METRIC]}": _pm(ig, HEADLINE_METRIC),
                # the median: one run trained beside other jobs on a shared machine must not set the figure
                "train min/run (median)": f"{per_seed['train_seconds'].median() / 60:.1f}",
            }
        )
    return pd.DataFrame(rows)


def modes_table(results: pd.DataFrame) -> pd.DataFrame:
    """Every method under every intervention and reduction, per head: each metric over seeds."""
    rows = []
    for (head, mode, reduction, method), part in results.groupby(["head", "mode", "reduction", "method"], sort=False):
        rows.append({"head": HEAD_LABELS.get(head, head), "intervention": mode, "reduction": reduction,
                     "method": METHOD_LABELS.get(method, method),
                     **{METRIC_LABELS[m]: _pm(part, m) for m in REPORTED_METRICS if m in part}})  # fmt: skip
    return pd.DataFrame(rows)


def _per_input(run: str, key: str):
    path = Path(run) / PER_INPUT_FILE
    return load_file(path)[key] if path.is_file() else None


def comparisons_table(
    results: pd.DataFrame, mode: str = DEFAULT_MODE, reduction: str = DEFAULT_REDUCTION, metric: str = HEADLINE_METRIC
) -> pd.DataFrame:
    """The paired comparisons the results docs state: LAYA vs every other head (accuracy; faithfulness of
    the primary method) and, on LAYA, α vs every post-hoc method. Each: a paired t-test over seeds and a
    paired bootstrap over the test inputs of the first seed; ``verdict`` says "tie" where the CI covers 0.
    A run set without LAYA (``benchmark --heads lastlayer,concat``) has no comparisons: an empty table."""
    part = _part(results, mode, reduction)
    rows = []

    def add(what: str, a_rows: pd.DataFrame, b_rows: pd.DataFrame, column: str, key_a: str, key_b: str, a: str, b: str):
        both = a_rows.set_index("seed")[[column, "run"]].join(b_rows.set_index("seed")[[column, "run"]], rsuffix="_b")
        both = both.dropna(subset=[column, f"{column}_b"])
        if both.empty:
            return
        seeds = paired_over_seeds(both[column].tolist(), both[f"{column}_b"].tolist())
        first = both.index.min()
        x, y = _per_input(both.loc[first, "run"], key_a), _per_input(both.loc[first, "run_b"], key_b)
        inputs = paired_bootstrap(x, y) if x is not None and y is not None else None
        rows.append({
            "comparison": what, "A": a, "B": b, "seeds": len(both),
            "over seeds": verdict(seeds, a, b) if len(both) > 1 else "one seed",
            f"over inputs (seed {first})": verdict(inputs, a, b) if inputs is not None else "no per-input arrays",
            "p (seeds)": seeds.p_value, "p (inputs)": inputs.p_value if inputs is not None else np.nan,
        })  # fmt: skip

    prefix = f"faithfulness/{mode}/{reduction}"
    laya = part[part["head"] == "laya"]
    if laya.empty:
        return pd.DataFrame(rows)
    for other in [h for h in HEAD_LABELS if h != "laya" and h in set(part["head"])]:
        theirs = part[part["head"] == other]
        add("accuracy", laya.drop_duplicates("seed"), theirs.drop_duplicates("seed"), "accuracy", "correct", "correct",
            "LAYA", HEAD_LABELS[other])  # fmt: skip
        a, b = laya[laya["primary"]], theirs[theirs["primary"]]
        if len(b) and (b["status"] != NOT_APPLICABLE).any():
            add(f"{METRIC_LABELS[metric]} (primary scores)", a, b, metric,
                f"{prefix}/{a['method'].iloc[0]}/{metric}", f"{prefix}/{b['method'].iloc[0]}/{metric}",
                "LAYA α", f"{HEAD_LABELS[other]} {METHOD_LABELS[b['method'].iloc[0]]}")  # fmt: skip
    alpha = laya[laya["method"] == "laya_alpha"]
    for method in POSTHOC_METHODS:
        other = laya[laya["method"] == method]
        add(f"{METRIC_LABELS[metric]} on LAYA", alpha, other, metric, f"{prefix}/laya_alpha/{metric}",
            f"{prefix}/{method}/{metric}", "α", METHOD_LABELS[method])  # fmt: skip
    return pd.DataFrame(rows)


def class_profiles_table(run_dirs: Sequence[Path]) -> pd.DataFrame:
    """Per-seed class x layer profiles (all inputs) of every run: the primary scores and the LOO drops,
    ``head, seed, values, class, class_index, layer, layer_index, mean, std, count``."""
    frames = []
    for run in run_dirs:
        report = Report.load(run)
        for kind in ("scores", "loo"):
            profile = report.class_layer_profile(kind)
            if profile.empty:
                continue
            profile = profile[profile["subset"] == "all"].drop(columns="subset")
            frames.append(profile.assign(head=report.data["checkpoint"]["head"], seed=report.data["checkpoint"]["seed"],
                                         values=kind))  # fmt: skip
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


CLASS_PROFILES_FILE = "class_profiles.csv"


def seed0_posthoc_shift(setting: str | Path) -> pd.Series | None:
    """How far re-evaluating seed 0 moved a multi-seed summary's post-hoc numbers: of every gradient method, head,
    intervention, reduction and faithfulness metric in both ``results.csv`` (seed-0 rows) and the bundled
    ``<head>/report.json`` (current), the row with the largest ``|current - summary|`` (``shift``, ``head``,
    ``mode``, ``reduction``, ``method``, ``metric``). None without both, or when nothing is comparable."""
    setting = Path(setting)
    reports = sorted(p.parent for p in setting.glob("*/report.json"))
    if not (setting / "results.csv").is_file() or not reports:
        return None
    keys = ["head", "mode", "reduction", "method"]
    old = pd.read_csv(setting / "results.csv")
    old = old[(old["seed"] == 0) & old["method"].isin(POSTHOC_METHODS)]
    both = old.merge(results_table(reports), on=keys, suffixes=("_summary", "_current"))
    rows = [both[keys].assign(metric=m, shift=(both[f"{m}_current"] - both[f"{m}_summary"]).abs())
            for m in REPORTED_METRICS if f"{m}_summary" in both and f"{m}_current" in both]  # fmt: skip
    shifts = pd.concat(rows, ignore_index=True).dropna(subset=["shift"]) if rows else pd.DataFrame()
    return shifts.loc[shifts["shift"].idxmax()] if len(shifts) else None


def write_summary(results: pd.DataFrame, out: str | Path, title: str, run_dirs: Sequence[Path] = ()) -> Path:
    """``results.csv`` (every number), ``summary.csv``/``summary.md`` (the tables, the paired comparisons)
    and, from ``run_dirs``, the per-seed class profiles :data:`CLASS_PROFILES_FILE`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results.to_csv(out / "results.csv", index=False)
    summary = summary_table(results)
    summary.to_csv(out / "summary.csv", index=False)
    comparisons = comparisons_table(results)
    comparisons.to_csv(out / "comparisons.csv", index=False)
    if run_dirs:
        class_profiles_table(run_dirs).to_csv(out / CLASS_PROFILES_FILE, index=False)
    text = [
        f"# {title}",
        "",
        (
            f"Intervention `{DEFAULT_MODE}` (h_i replaced by its training mean, the same for every head), signed "
            f"reduction of post-hoc scores. Per head: mean ± sample std over seeds [95% t-interval over seeds]; one "
            "seed: value [95% bootstrap CI over test inputs]. Spearman (informative layers): per-input rank correlation "
            "over layers whose LOO drop exceeds ε = 1e-3; top-1: the method's top layer is the largest-drop layer; "
            "Deletion@1 / oracle: the drop after removing the top layer over the largest drop (mean, and its median "
            "over the testable inputs beside it: a few inputs with a tiny largest drop can pull the mean far down). "
            f"{ig_description(32)}. `{NOT_APPLICABLE}`: the head's LOO drops are non-zero on one layer only, so no ranking can be tested."
        ),
        "",
        summary.to_markdown(index=False),
        "",
        "## Paired comparisons",
        "",
        comparisons.to_markdown(index=False) if not comparisons.empty else "(none)",
        "",
        "## Every method under every intervention and reduction",
        "",
        modes_table(results).to_markdown(index=False),
        "",
    ]
    (out / "summary.md").write_text("\n".join(text))
    return out


__all__ = [
    "CLASS_PROFILES_FILE",
    "class_profiles_table",
    "comparisons_table",
    "modes_table",
    "results_table",
    "run_suite",
    "seed0_posthoc_shift",
    "summary_table",
    "write_summary",
]
