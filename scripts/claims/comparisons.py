"""Head against head and method against method, per setting, from ``models/<setting>/comparisons.csv``.

``comparisons models/<setting>``: every comparison the file holds, over seeds (paired t-test) and over seed 0's
inputs (paired bootstrap), each family Holm-corrected over its members.
"""

from __future__ import annotations

import re

import pandas as pd

from claims.common import ROOT, family, holm, holm_verdict

TOPICS = {"Spearman (informative layers) (primary scores)": "faithfulness, each head's own scores",
          "Spearman (informative layers) on LAYA": "faithfulness on the LAYA heads"}
DELTA = re.compile(r"Δ ([+-]?\d+\.\d+) \[([+-]?\d+\.\d+), ([+-]?\d+\.\d+)\]")


def _rows(table: pd.DataFrame, column: str, p_column: str) -> list[tuple]:
    out = []
    for _, r in table.iterrows():
        match = DELTA.search(str(r[column]))
        if match and pd.notna(r[p_column]):
            out.append((f"{TOPICS.get(r['comparison'], r['comparison'])}: {r['A']}", r["B"], *map(float, match.groups()),
                        float(r[p_column])))  # fmt: skip
    return out


def comparisons(arg: str) -> str:
    """Two paragraphs: the comparisons over seeds, then over seed 0's inputs, each a Holm-corrected family."""
    table = pd.read_csv(ROOT / arg / "comparisons.csv")
    seeds = int(table["seeds"].max())
    text = []
    for column, p_column, what in (("over seeds", "p (seeds)", f"paired t-test over {seeds} seeds"),
                                   ("over inputs (seed 0)", "p (inputs)", "paired bootstrap over seed 0's test inputs")):  # fmt: skip
        rows = _rows(table, column, p_column)
        if rows:
            text.append(f"**{what.capitalize()}** (A − B [95 % CI]; faithfulness as Spearman over informative layers; "
                        f"Holm-corrected over these {len(rows)} comparisons, a tie where the CI covers 0, "
                        f"significant before correction, not after, where only the unadjusted CI excludes 0):\n\n" + "\n".join(f"* {line}" for line in family(rows)))  # fmt: skip
    return "\n\n".join(text) + "\n"


def comparisons_summary(arg: str) -> str:
    """One line: per setting, how many of its comparisons keep a direction after Holm, over seeds and over inputs."""
    parts = []
    for path in sorted((ROOT / arg).glob("*/comparisons.csv")):
        table = pd.read_csv(path)
        counts = []
        for column, p_column, what in (("over seeds", "p (seeds)", "over seeds"),
                                       ("over inputs (seed 0)", "p (inputs)", "over seed 0's inputs")):  # fmt: skip
            rows = _rows(table, column, p_column)
            held = sum(holm_verdict(r[3], r[4], p) != "tie" for r, p in zip(rows, holm([r[5] for r in rows])))
            counts.append(f"{held} of {len(rows)} {what}")
        parts.append(f"{path.parent.name} {', '.join(counts)}")
    return "Comparisons with a direction after Holm (the rest read as ties): " + "; ".join(parts) + ".\n"


CLAIMS = {"comparisons": comparisons, "comparisons-summary": comparisons_summary}
