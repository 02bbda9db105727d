"""Heads side by side on one input, as the Compare page shows them: pure.

One row per head with its prediction, its layer ranking on this input and its dataset-level metrics from its
report; the subplot titles of the side-by-side figure; the ablation modes every head supports; an attached network's
unit profile summed by the heads' layer its units make (:func:`stage_sums`), to set beside LAYA's α.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from laya.analysis.head.explain import Explanation
from laya.analysis.network.explain import NetworkExplanation
from laya.analysis.head.faithfulness import HEADLINE_METRIC, METRIC_LABELS
from laya.analysis.report import Report
from laya.app.faithfulness_views import headline_text
from laya.app.labels import head_title, method_label
from laya.app.numbers import ci_text, count_of, number_text, percent
from laya.app.palette import LOO_DROP

STAGE_SUM_TITLE = "The unit profile summed by the heads' layer"


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


def stage_sums(result: NetworkExplanation, layer_names: Sequence[str]) -> pd.DataFrame:
    """The unit profile summed by the heads' layer each bar is part of (:attr:`NetworkExplanation.layers`), over
    the bars that keep the input (a bar that replaces its whole output measures no branch: it is left out):
    one row per layer in ``layer_names`` order, ``layer`` (the heads' name), ``units`` (the bars that make it,
    comma-joined; "" none), ``drop`` (their summed drop in ``p(ŷ)``; NaN where no bar keeps the input there).

    Raises:
        ValueError: the explanation names no layer per bar, or a layer index outside ``layer_names``.
    """
    if len(result.layers) != len(result.names):
        raise ValueError(f"a layer index per bar was expected ({len(result.names)} bars), got {len(result.layers)}")
    if any(not 0 <= i < len(layer_names) for i in result.layers):
        raise ValueError(f"layer indices in [0, {len(layer_names)}) were expected, got {list(result.layers)}")
    drops = result.drops.tolist()
    rows = []
    for index, layer in enumerate(layer_names):
        bars = [b for b, i in enumerate(result.layers) if i == index and result.residual[b]]
        rows.append({"layer": layer, "units": ", ".join(result.names[b] for b in bars),
                     "drop": sum(drops[b] for b in bars) if bars else float("nan")})  # fmt: skip
    return pd.DataFrame(rows)


def stage_sum_figure(table: pd.DataFrame, label: str) -> go.Figure:
    """Bars of :func:`stage_sums` over the heads' layers in order (the x axis of LAYA's α), the units in the hover;
    ``label`` the predicted class."""
    figure = go.Figure(go.Bar(x=table["layer"], y=table["drop"], customdata=table["units"], marker_color=LOO_DROP,
                              hovertemplate="%{x} (%{customdata}): summed drop %{y:+.4f}<extra></extra>"))  # fmt: skip
    figure.update_xaxes(categoryorder="array", categoryarray=list(table["layer"]))
    figure.update_layout(title=STAGE_SUM_TITLE, xaxis_title="the heads' layer",
                         yaxis_title=f"summed drop in p({label})")  # fmt: skip
    return figure


__all__ = [
    "STAGE_SUM_TITLE",
    "common_modes",
    "compare_table",
    "compare_titles",
    "stage_sum_figure",
    "stage_sums",
]
