"""Print a setting's seed-0 results from its bundled reports (``models/<setting>/<head>/report.json``).

    python scripts/bundled_tables.py models/fashion-mnist-mlp [models/cifar10-cnn ...]

``python -m laya bundle models/<setting>`` rewrites these reports with the committed code, but keeps a
multi-seed ``summary.md`` (only ``reproduce`` rebuilds it); this script quotes the current seed-0 reports: the
results table (intervention ``mean``, signed post-hoc scores, 95 % bootstrap CIs over test inputs) with
Deletion@1 / oracle's median beside its mean, and on the LAYA head every method's faithfulness, so the docs'
seed-0 numbers come from the files rather than being retyped.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python scripts/...` from a checkout
from laya.analysis.head.attribution import METHOD_LABELS
from laya.analysis.report import Report
from laya.training.suite import results_table, summary_table

COLUMNS = ["head", "accuracy", "layer scores", "Spearman (informative layers)", "top-1 agreement",
           "Deletion@1 / oracle", "Deletion@1 / oracle (median)", "Deletion@1 / oracle (5%-trimmed mean)",
           "Spearman (all layers)"]  # fmt: skip


def _ci(entry: dict | None) -> str:
    return "–" if not entry else f"{entry['estimate']:.3f} [{entry['low']:.3f}, {entry['high']:.3f}]"


def bundled_table(setting: Path) -> str:
    """Seed-0 table of every bundled head (the multi-seed summary's columns, one seed: bootstrap CIs)."""
    heads = sorted(p.parent for p in setting.glob("*/report.json"))
    if not heads:
        raise FileNotFoundError(f"{setting}: no bundled reports (*/report.json); run `python -m laya bundle {setting}`")
    table = summary_table(results_table(heads))
    return table[[c for c in COLUMNS if c in table.columns]].to_markdown(index=False)


def laya_methods(setting: Path, mode: str = "mean", reduction: str = "signed") -> str:
    """On the LAYA head: each method's Spearman (informative and all layers) and Deletion@1 / oracle (mean, median,
    5 %-trimmed mean)."""
    report = Report.load(setting / "laya")
    rows = []
    for method in report.data["methods"]:
        entry = report.faithfulness_entry(method, mode, reduction)
        status = entry["status"]
        rows.append({
            "method": METHOD_LABELS.get(method, method),
            "Spearman (informative layers)": status or _ci(entry["spearman_eps"]),
            "Spearman (all layers)": status or _ci(entry["spearman"]),
            "Deletion@1 / oracle": status or _ci(entry["deletion_at_1_norm"]),
            "Deletion@1 / oracle (median)": status or _ci(entry.get("deletion_at_1_norm_median")),
            "Deletion@1 / oracle (5%-trimmed mean)": status or _ci(entry.get("deletion_at_1_norm_trimmed")),
        })  # fmt: skip
    return pd.DataFrame(rows).to_markdown(index=False)


def main() -> None:
    for setting in map(Path, sys.argv[1:]):
        try:
            table = bundled_table(setting)
        except FileNotFoundError as error:
            sys.exit(str(error))
        print(f"## {setting.name}, seed 0 (bundled reports)\n\n{table}\n")
        if (setting / "laya" / "report.json").is_file():
            print(f"On the LAYA head (intervention `mean`, signed):\n\n{laya_methods(setting)}\n")


if __name__ == "__main__":
    main()
