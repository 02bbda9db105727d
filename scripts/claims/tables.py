"""The results tables of a setting: multi-seed summary, seed-0 heads, every method on the LAYA head."""

from __future__ import annotations

from claims.common import ROOT


def summary_table(arg: str) -> str:
    """``models/<setting>/summary.csv`` cut to the results page's columns (``scripts/readme_tables.py``)."""
    from readme_tables import readme_table

    return readme_table(ROOT / arg) + "\n"


def bundled_table(arg: str) -> str:
    """Seed 0's bundled heads (``scripts/bundled_tables.py``), bootstrap CIs over test inputs."""
    from bundled_tables import bundled_table as table

    return table(ROOT / arg) + "\n"


def laya_methods(arg: str) -> str:
    """Every method on the LAYA head of seed 0 (``scripts/bundled_tables.py``)."""
    from bundled_tables import laya_methods as table

    return table(ROOT / arg) + "\n"


def training_time(arg: str) -> str:
    """One line: per setting, the training runs in ``models/<setting>/results.csv`` (an attached network's own
    classifier, never trained, has no ``train_seconds`` and is no run) and the sum of their ``train_seconds`` in
    minutes (the machine's load varied between runs; the file keeps each run's own)."""
    import pandas as pd

    parts = []
    for path in sorted((ROOT / arg).glob("*/results.csv")):
        runs = pd.read_csv(path).drop_duplicates(["head", "seed"]).dropna(subset=["train_seconds"])  # own: not trained
        parts.append(f"{path.parent.name} {runs['train_seconds'].sum() / 60:.0f} min over {len(runs)} run{'s' if len(runs) != 1 else ''}")
    return "Training time, the sum of `train_seconds` in each `results.csv`: " + "; ".join(parts) + ".\n"


CLAIMS = {"summary-table": summary_table, "bundled-table": bundled_table, "laya-methods": laya_methods,
          "training-time": training_time}  # fmt: skip
