"""Print a setting's README results table and its stated comparisons, from its committed summary.

    python scripts/readme_tables.py models/cifar10-cnn [models/cifar10-vit ...]

The table is ``summary.csv`` (written by ``python -m laya reproduce``/``benchmark``) cut to the README's
columns; the comparisons are ``comparisons.csv``'s verdicts (paired t-test over seeds, paired bootstrap over
the first seed's inputs), so the README quotes the files rather than retyping numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

SCORES = {
    "Integrated Gradients": "IG (post-hoc)",
    "ScalarMix weights (intrinsic, global)": "global weights",
    "LAYA α (intrinsic)": "α (intrinsic)",
}
COLUMNS = {
    "head": "head",
    "seeds": "seeds",
    "accuracy": "accuracy",
    "layer scores": "layer scores",
    "Spearman (informative layers)": "**Spearman, informative layers**",
    "top-1 agreement": "top-1 agreement",
    "Deletion@1 / oracle": "Deletion@1 / oracle",
    "Spearman (all layers)": "Spearman, all layers (paper)",
}


def readme_table(setting: Path) -> str:
    summary = pd.read_csv(setting / "summary.csv")
    table = summary[list(COLUMNS)].rename(columns=COLUMNS)
    table["layer scores"] = table["layer scores"].map(lambda s: SCORES.get(s, s))
    return table.to_markdown(index=False)


def comparisons(setting: Path) -> str:
    rows = pd.read_csv(setting / "comparisons.csv")
    return "\n".join(f"* {r['comparison']}: {r['over seeds']}; over inputs: {r['over inputs (seed 0)']}"
                     for _, r in rows.iterrows())  # fmt: skip


def main() -> None:
    for setting in map(Path, sys.argv[1:]):
        print(f"## {setting.name}\n\n{readme_table(setting)}\n\n{comparisons(setting)}\n")


if __name__ == "__main__":
    main()
