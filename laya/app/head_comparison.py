"""Heads side by side on one input, as the Compare page shows them: pure.

One row per head with its prediction, its layer ranking on this input and its dataset-level metrics from its
report; the subplot titles of the side-by-side figure; the ablation modes every head supports.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from laya.analysis.head.explain import Explanation
from laya.analysis.head.faithfulness import HEADLINE_METRIC, METRIC_LABELS
from laya.analysis.report import Report
from laya.app.faithfulness_views import headline_text
from laya.app.labels import head_title, method_label
from laya.app.numbers import ci_text, count_of, number_text, percent


def compare_titles(heads: Sequence[str], explanations: Sequence[Explanation]) -> list[str]:
    """Subplot titles, one line each: the head (its method is in the legend), then empty titles for the
    LOO-drop row."""
    return [head_title(h) for h in heads] + [""] * len(heads)


def compare_table(
    heads: Sequence[str], explanations: Sequence[Explanation], reports: Sequence[Report | None]
) -> pd.DataFrame:
    """One row per head on one input, with the head's dataset-level metrics from its report."""
    rows = []
    for head, e, report in zip(heads, explanations, reports):
        drops = e.drops
        rows.append(
            {
                "head": head_title(head),
                "prediction": e.label,
                "confidence": percent(e.confidence),
                "layer scores": method_label(e.primary),
                "top-scored layer": e.layer_names[int(e.scores[e.primary].argmax())],
                "largest LOO drop": e.layer_names[int(drops.argmax())],
                "max LOO drop": number_text(float(drops.max())),
                "label flips": count_of(int(e.loo.flipped[0].sum()), len(e.layer_names)),
                "Spearman ρ on this input": e.status or f"{number_text(e.spearman(e.primary))} over {len(e.layer_names)} layers",
                "test accuracy [95% CI]": ci_text(report.interval("accuracy"), 4) if report else "–",
                "macro-F1": number_text(report.data.get("macro_f1")) if report else "–",
                f"test {METRIC_LABELS[HEADLINE_METRIC]} (mean, signed)": headline_text(report),
            }
        )
    return pd.DataFrame(rows)


def common_modes(mode_sets: Sequence[Sequence[str]]) -> list[str]:
    """Ablation modes every head supports, in the first head's order."""
    if not mode_sets:
        return []
    return [m for m in mode_sets[0] if all(m in modes for modes in mode_sets[1:])]


__all__ = [
    "common_modes",
    "compare_table",
    "compare_titles",
]
