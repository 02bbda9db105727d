"""Plotly figure builders shared by the dashboard and the reports. Each returns a ``go.Figure``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from laya.analysis.head.attribution import POSTHOC_METHODS, REDUCTION_LABELS
from laya.analysis.head.explain import Explanation
from laya.analysis.head.profiles import heatmap_table, seed_table
from laya.app import palette
from laya.app.labels import method_label

METHOD_UNITS = {  # what a layer score measures: methods in one unit share one scale
    "laya_alpha": "weight α_i (sums to 1)",
    "scalarmix_weights": "weight α_i (sums to 1)",
    "integrated_gradients": "contribution to p(predicted)",
    "input_x_gradient": "contribution to p(predicted)",
    "saliency": "|∂p/∂h| summed over units",
    "random": "random score (control)",
}
NORMALISED_AXIS = "score ÷ its max |score|"  # mixed units: each method scaled to [-1, 1]
DROP_AXIS = "LOO drop in p(predicted)"
LEGEND_TOP = {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0.0}
LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.14, "xanchor": "left", "x": 0.0}  # under the x title


def method_unit(method: str) -> str:
    """The unit of ``method``'s layer scores (:data:`METHOD_UNITS`; unknown methods are their own unit)."""
    return METHOD_UNITS.get(method, method)


def score_scale(methods: Sequence[str]) -> tuple[bool, str]:
    """``(normalise, axis title)``: one shared raw scale when every method has the same unit, else each
    method divided by its largest |score| under the title :data:`NORMALISED_AXIS`."""
    units = {method_unit(m) for m in methods}
    return (False, units.pop()) if len(units) == 1 else (True, NORMALISED_AXIS)


def _scaled(values: np.ndarray, normalise: bool) -> np.ndarray:
    if not normalise:
        return values
    top = np.nanmax(np.abs(values)) if np.isfinite(values).any() else 0.0
    return values / top if top > 0 else values


def _score_bar(layers: list[str], values: np.ndarray, method: str, normalise: bool, legend: bool) -> go.Bar:
    """One method's layer scores (raw values in the hover when the bars are normalised)."""
    shown = _scaled(values, normalise)
    raw = "raw %{customdata:.4g}" if normalise else "%{y:.4f}"
    return go.Bar(x=layers, y=shown.tolist(), customdata=values.tolist(), name=method_label(method),
                  marker_color=palette.attribution_color(method in POSTHOC_METHODS), legendgroup=method,
                  showlegend=legend, hovertemplate=f"%{{x}}<br>{method_label(method)}: {raw}<extra></extra>")  # fmt: skip


def _drop_bars(explanation: Explanation, legend: bool) -> list[go.Bar]:
    """The LOO drops (orange; hatched where removing the layer flips the label) and, if any bar is hatched,
    a legend entry for the hatching."""
    layers = list(explanation.layer_names)
    flips = explanation.loo.flipped[0].tolist()
    bars = [go.Bar(x=layers, y=explanation.drops.tolist(), name=DROP_AXIS, marker_color=palette.LOO_DROP,
                   marker_pattern_shape=[palette.FLIP_PATTERN if f else "" for f in flips], legendgroup="drop",
                   showlegend=legend, hovertemplate="%{x}<br>drop %{y:.4f}<extra></extra>")]  # fmt: skip
    if any(flips) and legend:
        bars.append(go.Bar(x=[layers[0]], y=[None], name="hatched: removing the layer flips the label",
                           marker_color=palette.LOO_DROP, marker_pattern_shape=palette.FLIP_PATTERN,
                           legendgroup="flips", hoverinfo="skip"))  # fmt: skip
    return bars


def layer_scores_figure(explanation: Explanation, methods: Sequence[str] | None = None) -> go.Figure:
    """One input, two aligned panels over the layers: the methods' layer scores on top (one shared scale if
    they share a unit, else each normalised by its largest |score|, said on the axis), the leave-one-layer-out
    drop in p(predicted) below (hatched: the label flips)."""
    methods = list(methods or explanation.scores)
    normalise, axis = score_scale(methods)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.55, 0.45])
    layers = list(explanation.layer_names)
    for method in methods:
        values = explanation.scores[method].double().numpy()
        fig.add_trace(_score_bar(layers, values, method, normalise, True), row=1, col=1)
    for bar in _drop_bars(explanation, True):
        fig.add_trace(bar, row=2, col=1)
    fig.update_yaxes(title_text=axis, row=1, col=1)
    fig.update_yaxes(title_text=DROP_AXIS, row=2, col=1)
    fig.update_xaxes(title_text="layer", row=2, col=1)
    fig.update_layout(barmode="group", height=500, legend=LEGEND_BELOW, margin={"t": 50, "b": 110},
                      title=f"{explanation.label} ({explanation.confidence:.1%}): layer scores and LOO drops")  # fmt: skip
    return fig


def topk_figure(explanation: Explanation, k: int = 5) -> go.Figure:
    """Horizontal bars of the top-k class probabilities."""
    top = explanation.topk(k).iloc[::-1]
    fig = go.Figure(go.Bar(x=top["probability"], y=top["class"], orientation="h", marker_color=palette.CONFIDENCE,
                           text=[f"{p:.1%}" for p in top["probability"]], textposition="auto", name="probability"))  # fmt: skip
    fig.update_layout(
        title="Top classes", xaxis={"range": [0, 1], "tickformat": ".0%", "title": "predicted probability"},
        height=260, margin={"t": 40, "b": 20},
    )  # fmt: skip
    return fig


def compare_figure(explanations: Sequence[Explanation], titles: Sequence[str]) -> go.Figure:
    """Several heads on one input in aligned panels: each head's layer scores on top (one shared scale when
    every head's scores share a unit, else each normalised by its largest |score|, said on the axis), its
    leave-one-layer-out drops below, on one shared scale."""
    n = len(explanations)
    normalise, axis = score_scale([e.primary for e in explanations])
    fig = make_subplots(rows=2, cols=n, shared_xaxes=True, shared_yaxes="rows", subplot_titles=list(titles),
                        vertical_spacing=0.1, horizontal_spacing=0.03)  # fmt: skip
    seen: set[str] = set()
    for i, e in enumerate(explanations):
        values = e.scores[e.primary].double().numpy()
        fig.add_trace(_score_bar(list(e.layer_names), values, e.primary, normalise, e.primary not in seen), row=1, col=i + 1)
        for bar in _drop_bars(e, True):
            bar.showlegend = bar.legendgroup not in seen
            seen.add(bar.legendgroup)
            fig.add_trace(bar, row=2, col=i + 1)
        seen.add(e.primary)
    drops = np.concatenate([e.drops.double().numpy() for e in explanations])
    drops = drops[np.isfinite(drops)] if np.isfinite(drops).any() else np.zeros(1)
    fig.update_yaxes(range=[min(0.0, float(drops.min())) * 1.1, max(1e-6, float(drops.max())) * 1.1], row=2)
    fig.update_yaxes(title_text=axis, row=1, col=1)
    fig.update_yaxes(title_text=DROP_AXIS, row=2, col=1)
    fig.update_xaxes(title_text="layer", row=2)
    fig.update_layout(barmode="group", height=560, legend=LEGEND_BELOW, margin={"t": 70, "b": 120},
                      title="Layer scores (top) and leave-one-layer-out drops (bottom)")  # fmt: skip
    return fig


def heatmap_figure(
    profile: pd.DataFrame, subset: str = "all", title: str = "Mean layer score per class", kind: str = "scores",
    colorbar: str = "mean score",
) -> go.Figure:  # fmt: skip
    """Class x layer heatmap of the mean value (blue: layer scores, orange: LOO drops, the bar titled
    ``colorbar``); hover shows mean, std and the number of inputs."""
    means, stds, counts = (heatmap_table(profile, subset, v) for v in ("mean", "std", "count"))
    custom = np.dstack([stds.to_numpy(), counts.to_numpy()])
    fig = go.Figure(
        go.Heatmap(
            z=means.to_numpy(), x=list(means.columns), y=list(means.index), customdata=custom,
            colorscale=palette.HEATMAP_SCALES.get(kind, "Viridis"), colorbar={"title": {"text": colorbar}},
            hovertemplate="class %{y}<br>%{x}<br>mean %{z:.4f} ± %{customdata[0]:.4f}<br>n = %{customdata[1]}<extra></extra>",
        )
    )  # fmt: skip
    fig.update_layout(
        title=f"{title} ({subset} inputs)", xaxis_title="layer", yaxis={"autorange": "reversed", "title": "true class"},
        height=460,
    )  # fmt: skip
    return fig


def mean_interval(profile: pd.DataFrame, bounds: tuple[float, float] = (-np.inf, np.inf)) -> pd.DataFrame:
    """``low, high``: the 95% t-interval of each row's mean from ``mean, std, count``
    (``mean ± t_{0.975, n-1} std / sqrt(n)``), clipped to ``bounds`` (α: ``(0, 1)``); NaN where ``n < 2``."""
    from scipy import stats

    n = profile["count"].astype(float).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        half = stats.t.ppf(0.975, np.maximum(n - 1, 1)) * profile["std"].to_numpy(dtype=float) / np.sqrt(n)
    half = np.where(n >= 2, half, np.nan)
    mean = profile["mean"].to_numpy(dtype=float)
    return pd.DataFrame({"low": np.clip(mean - half, *bounds), "high": np.clip(mean + half, *bounds)})


def profile_bars_figure(
    profile: pd.DataFrame, title: str, kind: str = "scores", bounds: tuple[float, float] = (-np.inf, np.inf),
    yaxis: str | None = None,
) -> go.Figure:  # fmt: skip
    """Mean per layer with the 95% CI of the mean (:func:`mean_interval`, clipped to ``bounds``) from a table
    with ``layer, mean, std, count`` (a global or one-class profile); blue for scores, orange for LOO drops."""
    ci = mean_interval(profile, bounds)
    color = palette.LOO_DROP if kind == "loo" else palette.ATTRIBUTION
    fig = go.Figure(go.Bar(x=profile["layer"], y=profile["mean"], error_y=_error_y(profile["mean"], ci["low"], ci["high"]),
                           marker_color=color, customdata=np.c_[profile["count"], profile["std"]],
                           name="mean (error bar: 95% CI of the mean)",
                           hovertemplate="%{x}<br>mean %{y:.4f}<br>std %{customdata[1]:.4f}<br>n = %{customdata[0]}<extra></extra>"))  # fmt: skip
    fig.update_layout(title=title, xaxis_title="layer", yaxis_title=yaxis or ("LOO drop" if kind == "loo" else "mean score"),
                      height=340, showlegend=True, legend=LEGEND_TOP, margin={"t": 80})  # fmt: skip
    return fig


def _error_y(values: pd.Series, low: pd.Series, high: pd.Series) -> dict:
    """Asymmetric error bars from CI bounds."""
    return {
        "type": "data",
        "symmetric": False,
        "array": (np.asarray(high, dtype=float) - np.asarray(values, dtype=float)).tolist(),
        "arrayminus": (np.asarray(values, dtype=float) - np.asarray(low, dtype=float)).tolist(),
    }


def deletion_curves_figure(
    curves: pd.DataFrame, mode: str = "mean", reduction: str = "signed", title: str | None = None
) -> go.Figure:
    """Mean drop after removing the top-k layers (k = 1..L) for each method, with 95% bootstrap CIs,
    from ``Report.deletion_curves()``, for one intervention and one post-hoc reduction."""
    part = curves[(curves["mode"] == mode) & (curves["reduction"] == reduction)]
    fig = go.Figure()
    for i, (label, rows) in enumerate(part.groupby("label", sort=False)):
        fig.add_trace(go.Scatter(x=rows["k"], y=rows["mean_drop"], mode="lines+markers", name=label,
                                 line={"color": palette.series(i)},
                                 error_y=_error_y(rows["mean_drop"], rows["low"], rows["high"])))  # fmt: skip
    fig.update_layout(title=title or f"Deletion curves (intervention {mode}, {REDUCTION_LABELS.get(reduction, reduction)} "
                      "post-hoc scores; 95% CIs)", xaxis_title="layers removed (top-k by method)",
                      yaxis_title="mean drop in p(predicted)", xaxis={"dtick": 1}, legend=LEGEND_TOP, margin={"t": 110})  # fmt: skip
    return fig


FAITHFULNESS_PANELS = ("spearman_eps", "top1", "deletion_at_1_norm", "spearman")


def faithfulness_figure(table: pd.DataFrame, mode: str = "mean", reduction: str = "signed") -> go.Figure:
    """Per method: Spearman over informative layers (the headline), top-1 agreement, Deletion@1 / oracle and the
    all-layer Spearman, each with its 95% bootstrap CI as error bars, from ``Report.faithfulness_table()``.
    Methods whose ranking cannot be tested are drawn as no bar, labelled "n/a (one informative layer)"."""
    from laya.analysis.head.faithfulness import METRIC_LABELS

    part = table[(table["mode"] == mode) & (table["reduction"] == reduction)]
    fig = make_subplots(
        rows=1, cols=len(FAITHFULNESS_PANELS), horizontal_spacing=0.06,
        subplot_titles=[METRIC_LABELS[m].replace(" (", "<br>(") for m in FAITHFULNESS_PANELS],
    )  # fmt: skip
    for col, metric in enumerate(FAITHFULNESS_PANELS, start=1):
        values = part[metric].astype(float)
        fig.add_trace(
            go.Bar(x=part["label"], y=values.fillna(0.0), error_y=_error_y(values, part[f"{metric}_low"].astype(float),
                   part[f"{metric}_high"].astype(float)), marker_color=palette.FAITHFULNESS,
                   text=[s or "" for s in part["status"]], textposition="outside", showlegend=False,
                   hovertemplate="%{x}<br>%{y:.3f} %{text}<extra></extra>"),
            row=1, col=col,
        )  # fmt: skip
    fig.update_xaxes(tickangle=-40, automargin=True)
    fig.update_layout(title=f"Faithfulness (intervention {mode}, {REDUCTION_LABELS.get(reduction, reduction)} post-hoc "
                      "scores; 95% bootstrap CIs over inputs)", height=500, margin={"t": 110})  # fmt: skip
    return fig


def heads_overview_figure(table: pd.DataFrame, mode: str = "mean") -> go.Figure:
    """Accuracy (green) and headline faithfulness (purple) across heads with 95% CI error bars (columns of
    :func:`laya.app.faithfulness_views.heads_table`); heads without a testable ranking are labelled n/a."""
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("Test accuracy", f"Spearman (informative layers)<br>intervention {mode}")
    )
    acc = table["accuracy"].astype(float)
    fig.add_trace(go.Bar(x=table["head"], y=acc, error_y=_error_y(acc, table["accuracy_low"].astype(float),
                         table["accuracy_high"].astype(float)), marker_color=palette.ACCURACY, showlegend=False),
                  row=1, col=1)  # fmt: skip
    faith = table["faithfulness"].astype(float)
    fig.add_trace(go.Bar(x=table["head"], y=faith.fillna(0.0), error_y=_error_y(faith, table["faithfulness_low"].astype(float),
                         table["faithfulness_high"].astype(float)), marker_color=palette.FAITHFULNESS, showlegend=False,
                         text=[s or "" for s in table["status"]], textposition="outside"), row=1, col=2)  # fmt: skip
    fig.update_yaxes(tickformat=".0%", row=1, col=1)
    fig.update_layout(height=380, margin={"t": 80}, title="Heads of this setting (95% bootstrap CIs over test inputs)")
    return fig


def seed_profiles_figure(profiles: pd.DataFrame, class_name: str, title: str, kind: str = "scores") -> go.Figure:
    """One class's layer profile for every seed (thin lines) and their mean over seeds (bars) with the
    min–max range over seeds as error bars (a range cannot leave the values' own bounds, unlike mean ± std)."""
    wide = seed_table(profiles[profiles["class"] == class_name])
    layers = wide.index.tolist()
    mean = wide.mean(axis=1)
    fig = go.Figure(go.Bar(x=layers, y=mean, error_y=_error_y(mean, wide.min(axis=1), wide.max(axis=1)),
                           marker_color=palette.LOO_DROP if kind == "loo" else palette.ATTRIBUTION, opacity=0.5,
                           name="mean over seeds (error bar: min–max)"))  # fmt: skip
    for i, seed in enumerate(wide.columns):
        fig.add_trace(go.Scatter(x=layers, y=wide[seed], mode="lines+markers", name=f"seed {seed}",
                                 line={"color": palette.series(i)}))  # fmt: skip
    fig.update_layout(title=f"{title} ({len(wide.columns)} seeds)", xaxis_title="layer", height=360,
                      yaxis_title="LOO drop" if kind == "loo" else "mean score", legend=LEGEND_TOP, margin={"t": 90})  # fmt: skip
    return fig


__all__ = [
    "METHOD_UNITS",
    "compare_figure",
    "deletion_curves_figure",
    "faithfulness_figure",
    "heads_overview_figure",
    "heatmap_figure",
    "layer_scores_figure",
    "mean_interval",
    "method_unit",
    "profile_bars_figure",
    "score_scale",
    "seed_profiles_figure",
    "topk_figure",
]
