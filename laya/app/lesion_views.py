"""The lesion study per true class, as the Depth analytics page shows it for the own head: pure figures and tables
of :attr:`~laya.analysis.network.lesion.LesionStudy.by_class` (each class's accuracy with one unit removed, its
bootstrap CI and its paired drop from the intact network, over that class's inputs alone). The pooled study's
figure is :func:`laya.app.network_views.lesion_figure`."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from laya.analysis.network.lesion import INTACT, LesionStudy
from laya.analysis.statistics import format_diff
from laya.app import palette
from laya.app.numbers import MISSING, ci_text, p_text

CLASS_LESION_TITLE = "Per true class: the drop in accuracy with"


def _rows(study: LesionStudy, intervention: str, unit: str) -> pd.DataFrame:
    """The ``by_class`` rows of ``unit`` under ``intervention``, beside the intact rows of the same classes."""
    if unit not in lesion_class_units(study, intervention):
        raise ValueError(f"the lesion study has no per-class rows of {unit!r} under {intervention!r}")
    mine = study.by_class[study.by_class["intervention"] == intervention]
    intact = mine[mine["unit"] == INTACT].set_index("class")
    rows = mine[mine["unit"] == unit].set_index("class")
    return rows.join(intact[["accuracy", "low", "high"]], rsuffix="_intact")


def lesion_class_units(study: LesionStudy, intervention: str) -> list[str]:
    """The units with per-class rows under ``intervention``, in the study's order (empty in a report before them)."""
    if study.by_class is None:
        return []
    units = study.by_class.loc[study.by_class["intervention"] == intervention, "unit"]
    return [u for u in dict.fromkeys(units) if u != INTACT]


def lesion_class_figure(study: LesionStudy, intervention: str, unit: str, word: str | None = None) -> go.Figure:
    """Per true class the drop in accuracy (intact minus ``unit`` removed by ``intervention``, named ``word``) with
    its 95 % paired bootstrap CI over that class's inputs; hover: both accuracies with their CIs and ``n``."""
    rows = _rows(study, intervention, unit)
    figure = go.Figure(go.Bar(
        x=list(rows.index), y=rows["drop"], marker_color=palette.LOO_DROP, name="drop (95 % paired CI)",
        error_y={"type": "data", "symmetric": False, "array": rows["drop_high"] - rows["drop"],
                 "arrayminus": rows["drop"] - rows["drop_low"]},
        hovertext=[f"{c} (n = {n}): intact {ci_text({'estimate': a0, 'low': l0, 'high': h0})}, removed "
                   f"{ci_text({'estimate': a, 'low': lo, 'high': hi})}"
                   for c, n, a0, l0, h0, a, lo, hi in zip(rows.index, rows["n"], rows["accuracy_intact"],
                                                          rows["low_intact"], rows["high_intact"], rows["accuracy"],
                                                          rows["low"], rows["high"])],
        hoverinfo="text",
    ))  # fmt: skip
    figure.add_hline(y=0, line_dash="dash", line_color=palette.NEUTRAL)
    figure.update_layout(title=f"{CLASS_LESION_TITLE} {unit} {word or intervention} ({study.n:,} test inputs)",
                         xaxis_title="true class", yaxis_title="accuracy intact − removed", height=360)  # fmt: skip
    return figure


def lesion_class_table(study: LesionStudy, intervention: str, unit: str) -> pd.DataFrame:
    """One row per true class: its inputs, accuracy intact and with ``unit`` removed by ``intervention`` [95 %
    bootstrap CI], the drop [95 % paired CI] and its p-value (uncorrected: one class's row, not a family)."""
    rows = _rows(study, intervention, unit)
    return pd.DataFrame({
        "class": [str(c) for c in rows.index],
        "inputs": [int(n) for n in rows["n"]],
        "accuracy intact [95% CI]": [ci_text({"estimate": a, "low": lo, "high": hi}) for a, lo, hi in
                                     zip(rows["accuracy_intact"], rows["low_intact"], rows["high_intact"])],
        "accuracy removed [95% CI]": [ci_text({"estimate": a, "low": lo, "high": hi}) for a, lo, hi in
                                      zip(rows["accuracy"], rows["low"], rows["high"])],
        "drop [95% paired CI]": [MISSING if pd.isna(d) else format_diff(d, lo, hi) for d, lo, hi in
                                 zip(rows["drop"], rows["drop_low"], rows["drop_high"])],
        "p": [p_text(p) for p in rows["p_value"]],
    })  # fmt: skip


__all__ = ["CLASS_LESION_TITLE", "lesion_class_figure", "lesion_class_table", "lesion_class_units"]
