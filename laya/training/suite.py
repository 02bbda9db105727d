"""Train and evaluate every head of a setting over several seeds; summarise as a paper-style table.

Every step is resumable: a finished training run (``model.json`` present) or evaluation
(``report.json`` present) is skipped, an interrupted training run resumes from its state.
Layout: ``RUNS/<setting>/<head>/seed<k>/{model.*, report.json, *.csv}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.report import REPORT_FILE, Report, write_report
from laya.data.datasets import load_dataset
from laya.model.checkpoint import load_checkpoint
from laya.model.heads import HEAD_LABELS
from laya.training.settings import Setting
from laya.training.train import train


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
            write_report(evaluate(load_checkpoint(out, map_location=device or "auto"), test, options), out)
        done.append(out)
    return done


def results_table(run_dirs: Sequence[Path]) -> pd.DataFrame:
    """One row per (run, ablation mode, method): accuracy, macro-F1, faithfulness, Deletion@1."""
    rows = []
    for run in run_dirs:
        report = Report.load(run)
        info = report.data["checkpoint"]
        for _, r in report.faithfulness_table().iterrows():
            rows.append(
                {
                    "head": info["head"],
                    "seed": info["seed"],
                    "accuracy": report.accuracy,
                    "macro_f1": report.data["macro_f1"],
                    "mode": r["mode"],
                    "method": r["method"],
                    "primary": r["method"] == report.primary_method,
                    "faithfulness": r["spearman_mean"],
                    "deletion_at_1": r["deletion_at_1"],
                    "n_excluded": r["n_excluded"],
                    "train_seconds": info["train_metrics"].get("train_seconds"),
                    "epochs": info["train_metrics"].get("epochs"),
                }
            )
    return pd.DataFrame(rows)


def _pm(values: pd.Series, digits: int = 4) -> str:
    values = values.dropna()
    if values.empty:
        return "–"
    if len(values) == 1:
        return f"{values.iloc[0]:.{digits}f}"
    return f"{values.mean():.{digits}f} ± {values.std(ddof=1):.{digits}f}"


def summary_table(results: pd.DataFrame, mode: str = "zero") -> pd.DataFrame:
    """Paper-style table, one row per head: mean ± std over seeds (sample std, ddof=1).

    Faithfulness and Deletion@1 are for the head's primary method (its intrinsic scores; IG for
    heads without them) and for Integrated Gradients, under ablation ``mode``.
    """
    rows = []
    order = [h for h in HEAD_LABELS if h in set(results["head"])]
    for head in order:
        part = results[(results["head"] == head) & (results["mode"] == mode)]
        primary = part[part["primary"]]
        ig = part[part["method"] == "integrated_gradients"]
        per_seed = part.drop_duplicates("seed")
        rows.append(
            {
                "head": HEAD_LABELS[head],
                "seeds": int(per_seed["seed"].nunique()),
                "accuracy": _pm(per_seed["accuracy"]),
                "macro-F1": _pm(per_seed["macro_f1"]),
                "layer scores": primary["method"].iloc[0] if len(primary) else "–",
                "faithfulness": _pm(primary["faithfulness"]),
                "Deletion@1": _pm(primary["deletion_at_1"]),
                "IG faithfulness": _pm(ig["faithfulness"]),
                "IG Deletion@1": _pm(ig["deletion_at_1"]),
                "train min/run": f"{per_seed['train_seconds'].mean() / 60:.1f}",
            }
        )
    return pd.DataFrame(rows)


def modes_table(results: pd.DataFrame) -> pd.DataFrame:
    """Faithfulness (mean ± std over seeds) of every method under every ablation mode, per head."""
    rows = []
    for (head, mode, method), part in results.groupby(["head", "mode", "method"], sort=False):
        rows.append({"head": HEAD_LABELS.get(head, head), "mode": mode, "method": method,
                     "faithfulness": _pm(part["faithfulness"]), "Deletion@1": _pm(part["deletion_at_1"])})  # fmt: skip
    return pd.DataFrame(rows)


def write_summary(results: pd.DataFrame, out: str | Path, title: str) -> Path:
    """``results.csv`` (every number), ``summary.csv`` and ``summary.md`` (the tables)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results.to_csv(out / "results.csv", index=False)
    summary = summary_table(results)
    summary.to_csv(out / "summary.csv", index=False)
    modes = modes_table(results)
    text = [
        f"# {title}",
        "",
        "Mean ± sample std over seeds; faithfulness = mean per-input Spearman(layer scores, leave-one-layer-out drops);",
        "Deletion@1 = drop in p(predicted class) after removing the top-ranked layer. Ablation mode `zero`.",
        "",
        summary.to_markdown(index=False),
        "",
        "## Every method under every ablation mode",
        "",
        modes.to_markdown(index=False),
        "",
    ]
    (out / "summary.md").write_text("\n".join(text))
    return out


__all__ = ["modes_table", "results_table", "run_suite", "summary_table", "write_summary"]
