"""Plotly figure builders shared by the dashboard and the reports. Each returns a ``go.Figure``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from laya.analysis.attribution import METHOD_LABELS
from laya.analysis.explain import Explanation
from laya.analysis.profiles import heatmap_table, seed_table

SCORE_COLOR = "#4C78A8"
DROP_COLOR = "#F58518"


def _label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


def _layer_bars(
    fig: go.Figure,
    explanation: Explanation,
    method: str | None,
    row: int | None = None,
    col: int | None = None,
    legend: bool = True,
) -> None:
    layers = list(explanation.layer_names)
    if method is not None:
        fig.add_trace(
            go.Bar(x=layers, y=explanation.scores[method].tolist(), name=_label(method), marker_color=SCORE_COLOR,
                   showlegend=legend, legendgroup="score", hovertemplate="%{x}<br>score %{y:.4f}<extra></extra>"),
            row=row, col=col,
        )  # fmt: skip
    flips = explanation.layer_table()["label flips"].tolist()
    fig.add_trace(
        go.Bar(x=layers, y=explanation.drops.tolist(), name="LOO drop in p(predicted)", marker_color=DROP_COLOR,
               marker_pattern_shape=["x" if f else "" for f in flips], showlegend=legend, legendgroup="drop",
               hovertemplate="%{x}<br>drop %{y:.4f}<extra></extra>"),
        row=row, col=col,
    )  # fmt: skip


def layer_scores_figure(explanation: Explanation, method: str | None = None) -> go.Figure:
    """One input: the method's layer scores beside each layer's leave-one-out drop (hatched: label flips)."""
    method = method or explanation.primary
    fig = go.Figure()
    _layer_bars(fig, explanation, method)
    fig.update_layout(
        barmode="group",
        title=f"{explanation.label} ({explanation.confidence:.1%}) — layer scores vs. leave-one-layer-out ({explanation.mode})",
        yaxis_title="score / drop in probability",
        xaxis_title="layer",
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def topk_figure(explanation: Explanation, k: int = 5) -> go.Figure:
    """Horizontal bars of the top-k class probabilities."""
    top = explanation.topk(k).iloc[::-1]
    fig = go.Figure(go.Bar(x=top["probability"], y=top["class"], orientation="h", marker_color=SCORE_COLOR,
                           text=[f"{p:.1%}" for p in top["probability"]], textposition="auto"))  # fmt: skip
    fig.update_layout(
        title="Top classes", xaxis={"range": [0, 1], "tickformat": ".0%"}, height=260, margin={"t": 40, "b": 20}
    )
    return fig


def compare_figure(explanations: Sequence[Explanation], titles: Sequence[str]) -> go.Figure:
    """Several heads on one input, side by side with shared y axes: scores and LOO drops."""
    fig = make_subplots(rows=1, cols=len(explanations), shared_yaxes=True, subplot_titles=list(titles))
    for i, explanation in enumerate(explanations):
        _layer_bars(fig, explanation, explanation.primary, row=1, col=i + 1, legend=False)
    values = np.concatenate([t.double().numpy() for e in explanations for t in (e.drops, *e.scores.values())])
    fig.update_yaxes(range=[min(0.0, float(values.min())) * 1.1, max(1e-6, float(values.max())) * 1.1])
    fig.update_layout(barmode="group", height=380, title="Layer scores (blue) and leave-one-layer-out drops (orange)")
    return fig


def heatmap_figure(profile: pd.DataFrame, subset: str = "all", title: str = "Mean layer score per class") -> go.Figure:
    """Class x layer heatmap of the mean score; hover shows mean, std and the number of inputs."""
    means, stds, counts = (heatmap_table(profile, subset, v) for v in ("mean", "std", "count"))
    custom = np.dstack([stds.to_numpy(), counts.to_numpy()])
    fig = go.Figure(
        go.Heatmap(
            z=means.to_numpy(), x=list(means.columns), y=list(means.index), customdata=custom, colorscale="Viridis",
            hovertemplate="class %{y}<br>%{x}<br>mean %{z:.4f} ± %{customdata[0]:.4f}<br>n = %{customdata[1]}<extra></extra>",
        )
    )  # fmt: skip
    fig.update_layout(
        title=f"{title} ({subset} inputs)", xaxis_title="layer", yaxis={"autorange": "reversed"}, height=460
    )
    return fig


def profile_bars_figure(profile: pd.DataFrame, title: str, color: str = SCORE_COLOR) -> go.Figure:
    """Mean ± std per layer from a table with ``layer, mean, std`` (a global or one-class profile)."""
    fig = go.Figure(go.Bar(x=profile["layer"], y=profile["mean"], error_y={"type": "data", "array": profile["std"]},
                           marker_color=color, customdata=profile["count"],
                           hovertemplate="%{x}<br>mean %{y:.4f}<br>n = %{customdata}<extra></extra>"))  # fmt: skip
    fig.update_layout(title=title, xaxis_title="layer", height=340)
    return fig


def _error_y(values: pd.Series, low: pd.Series, high: pd.Series) -> dict:
    """Asymmetric error bars from CI bounds."""
    return {
        "type": "data",
        "symmetric": False,
        "array": (high - values).tolist(),
        "arrayminus": (values - low).tolist(),
    }


def deletion_curves_figure(
    curves: pd.DataFrame, mode: str = "mean", reduction: str = "signed", title: str | None = None
) -> go.Figure:
    """Mean drop after removing the top-k layers (k = 1..L) for each method, with 95% bootstrap CIs,
    from ``Report.deletion_curves()``."""
    part = curves[(curves["mode"] == mode) & (curves["reduction"] == reduction)]
    fig = go.Figure()
    for label, rows in part.groupby("label", sort=False):
        fig.add_trace(go.Scatter(x=rows["k"], y=rows["mean_drop"], mode="lines+markers", name=label,
                                 error_y=_error_y(rows["mean_drop"], rows["low"], rows["high"])))  # fmt: skip
    fig.update_layout(title=title or f"Deletion curves (intervention {mode}, {reduction} scores; 95% CIs)",
                      xaxis_title="layers removed (top-k by method)", yaxis_title="mean drop in p(predicted)",
                      xaxis={"dtick": 1})  # fmt: skip
    return fig


FAITHFULNESS_PANELS = ("spearman_eps", "top1", "deletion_at_1_norm", "spearman")


def faithfulness_figure(table: pd.DataFrame, mode: str = "mean", reduction: str = "signed") -> go.Figure:
    """Per method: Spearman over informative layers, top-1 agreement, Deletion@1 / oracle and the all-layer
    Spearman, each with its 95% bootstrap CI as error bars, from ``Report.faithfulness_table()``.
    Methods whose ranking cannot be tested are drawn as no bar, labelled "n/a (one informative layer)"."""
    from laya.analysis.faithfulness import METRIC_LABELS

    part = table[(table["mode"] == mode) & (table["reduction"] == reduction)]
    fig = make_subplots(
        rows=1, cols=len(FAITHFULNESS_PANELS), subplot_titles=[METRIC_LABELS[m] for m in FAITHFULNESS_PANELS]
    )
    for col, metric in enumerate(FAITHFULNESS_PANELS, start=1):
        values = part[metric].astype(float)
        fig.add_trace(
            go.Bar(x=part["label"], y=values.fillna(0.0), error_y=_error_y(values, part[f"{metric}_low"].astype(float),
                   part[f"{metric}_high"].astype(float)), marker_color=SCORE_COLOR if col < 3 else DROP_COLOR,
                   text=[s or "" for s in part["status"]], textposition="outside", showlegend=False,
                   hovertemplate="%{x}<br>%{y:.3f} %{text}<extra></extra>"),
            row=1, col=col,
        )  # fmt: skip
    fig.update_layout(title=f"Faithfulness (intervention {mode}, {reduction} scores; 95% bootstrap CIs over inputs)",
                      height=420)  # fmt: skip
    return fig


def heads_overview_figure(table: pd.DataFrame, mode: str = "mean") -> go.Figure:
    """Accuracy and headline faithfulness across heads with 95% CI error bars (columns of
    :func:`laya.app.views.heads_table`); heads without a testable ranking are labelled n/a."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("Test accuracy", f"Spearman (informative layers), intervention {mode}")
    )
    acc = table["accuracy"].astype(float)
    fig.add_trace(go.Bar(x=table["head"], y=acc, error_y=_error_y(acc, table["accuracy_low"].astype(float),
                         table["accuracy_high"].astype(float)), marker_color=SCORE_COLOR, showlegend=False),
                  row=1, col=1)  # fmt: skip
    faith = table["faithfulness"].astype(float)
    fig.add_trace(go.Bar(x=table["head"], y=faith.fillna(0.0), error_y=_error_y(faith, table["faithfulness_low"].astype(float),
                         table["faithfulness_high"].astype(float)), marker_color=DROP_COLOR, showlegend=False,
                         text=[s or "" for s in table["status"]], textposition="outside"), row=1, col=2)  # fmt: skip
    fig.update_layout(height=360)
    return fig


def seed_profiles_figure(profiles: pd.DataFrame, class_name: str, title: str) -> go.Figure:
    """One class's layer profile for every seed (thin lines) and their mean ± std over seeds (bars)."""
    wide = seed_table(profiles[profiles["class"] == class_name])
    layers = wide.index.tolist()
    fig = go.Figure(go.Bar(x=layers, y=wide.mean(axis=1), error_y={"type": "data", "array": wide.std(axis=1, ddof=1).fillna(0.0)},
                           marker_color=SCORE_COLOR, opacity=0.5, name="mean ± std over seeds"))  # fmt: skip
    for seed in wide.columns:
        fig.add_trace(go.Scatter(x=layers, y=wide[seed], mode="lines+markers", name=f"seed {seed}"))
    fig.update_layout(title=f"{title} ({len(wide.columns)} seeds)", xaxis_title="layer", height=360)
    return fig


__all__ = [
    "compare_figure",
    "deletion_curves_figure",
    "faithfulness_figure",
    "heads_overview_figure",
    "heatmap_figure",
    "layer_scores_figure",
    "profile_bars_figure",
    "seed_profiles_figure",
    "topk_figure",
]
