"""Plotly figures of depth analytics (:mod:`laya.analysis.depth`). Each returns a ``go.Figure``, never shows it
(the lens's figure is :func:`laya.analysis.depth.layer_lens.trajectory_figure`; its caption is here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from laya.analysis.block_ablation import MEAN, SKIP, BlockAblation
from laya.analysis.depth.detection import SCORE_LABELS
from laya.analysis.depth.layer_lens import SOURCES
from laya.app import palette
from laya.app.text import code_plain, plain

if TYPE_CHECKING:
    from laya.analysis.depth.report import DepthReport

AGREE_COLOR, DISAGREE_COLOR = palette.CONFIDENCE, palette.DISAGREE
LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0.0}


def attribution_figure(
    table: pd.DataFrame, title: str = "Per-layer contributions to the top classes' logits"
) -> go.Figure:
    """Stacked bars (one per layer, light to dark with depth, and the bias in grey) per class, from
    :func:`laya.analysis.head.logit_attribution.top_class_table`; a diamond marks each class's logit (the bars' sum)."""
    fig = go.Figure()
    classes = list(dict.fromkeys(table["class"]))
    parts = list(dict.fromkeys(table["part"]))
    colors = dict(zip([p for p in parts if p != "bias"], palette.depth_colors(len(parts) - ("bias" in parts))))
    for part, rows in table.groupby("part", sort=False):
        fig.add_trace(go.Bar(x=rows["class"], y=rows["contribution"], name=part, marker_color=colors.get(part, palette.NEUTRAL),
                             hovertemplate=f"{part}<br>%{{x}}: %{{y:+.3f}}<extra></extra>"))  # fmt: skip
    totals = table.groupby("class", sort=False)["contribution"].sum().reindex(classes)
    fig.add_trace(go.Scatter(x=classes, y=totals.values, mode="markers", name="logit (sum)",
                             marker={"symbol": "diamond", "size": 12, "color": "black"}))  # fmt: skip
    fig.update_layout(barmode="relative", title=title, yaxis_title="contribution to the logit", xaxis_title="class",
                      legend=LEGEND_BELOW, margin={"b": 120})  # fmt: skip
    return fig


def class_terms_figure(table: pd.DataFrame) -> go.Figure:
    """Heatmap of the mean contribution of each layer to the predicted class's logit, per predicted class
    (from :func:`laya.analysis.head.logit_attribution.class_mean_terms`)."""
    wide = table.pivot(index="class", columns="layer_index", values="mean")
    wide = wide.reindex(list(dict.fromkeys(table["class"])))
    layers = list(dict.fromkeys(table["layer"]))
    fig = go.Figure(go.Heatmap(z=wide.values, x=layers, y=list(wide.index), colorscale=palette.HEATMAP_SCALES["signed"],
                               zmid=0, colorbar={"title": {"text": "mean contribution<br>to the logit"}},
                               hovertemplate="%{y} · %{x}: %{z:+.3f}<extra></extra>"))  # fmt: skip
    fig.update_layout(title="Mean contribution of each layer to the predicted class's logit", xaxis_title="layer",
                      yaxis={"title": "predicted class", "autorange": "reversed"})  # fmt: skip
    return fig


def readout_path_figure(
    path: pd.DataFrame, depth: int, exit_layer: int | None = None, depth_name: str = "prediction depth"
) -> go.Figure:
    """One input's readout confidence per layer (text: the readout's class; teal: agrees with the final
    prediction, red: disagrees, both in the legend), a dashed line at the prediction depth (``depth_name``: the
    probes' where another depth is shown beside) and a star where the exit policy stops."""
    fig = go.Figure()
    for agrees, color, name in ((True, AGREE_COLOR, "readout agrees with the final prediction"),
                                (False, DISAGREE_COLOR, "readout disagrees with the final prediction")):
        rows = path[path["agrees"] == agrees]
        fig.add_trace(go.Bar(
            x=rows["layer"], y=rows["confidence"], text=rows["class"], textposition="outside", marker_color=color,
            hovertemplate="%{x}: %{text} (%{y:.1%})<extra></extra>", name=name, showlegend=True,
        ))  # fmt: skip
    fig.update_xaxes(categoryorder="array", categoryarray=list(path["layer"]))
    L = len(path)
    if depth <= L:
        fig.add_vline(x=depth - 1.5, line_dash="dash", annotation_text=f"{depth_name} {depth}")
    if exit_layer is not None and exit_layer < L:
        fig.add_trace(go.Scatter(x=[path["layer"].iloc[exit_layer]], y=[path["confidence"].iloc[exit_layer]],
                                 mode="markers", marker={"symbol": "star", "size": 18, "color": "gold"},
                                 name="early exit stops here"))  # fmt: skip
    fig.update_layout(title="Readout path: each layer's own prediction", yaxis={"title": "confidence", "range": [0, 1.15]},
                      xaxis_title="layer", legend=LEGEND_BELOW, barmode="overlay", margin={"b": 120})  # fmt: skip
    return fig


def measured_exit_figure(runs: pd.DataFrame) -> go.Figure:
    """Measured early-exit runs (``exits_runs.csv``): accuracy (95 % CI) against MACs saved, one line per exit
    kind over the confidence thresholds, α-profile runs as points; hover gives the wall-clock savings."""
    fig = go.Figure()
    full = runs[runs["policy"] == "full model"]["accuracy"].iloc[0]
    saved = [c for c in runs.columns if c.startswith("saved_b")]
    for i, ((kind, alpha), part) in enumerate(runs[runs["policy"] != "full model"].groupby(
            ["exits", runs["policy"].str.startswith("α")], sort=False)):  # fmt: skip
        part = part.sort_values("macs_saved")
        fig.add_trace(go.Scatter(
            x=part["macs_saved"], y=part["accuracy"], mode="markers" if alpha else "lines+markers",
            name=f"{kind}: α profile" if alpha else f"{kind}: confidence", marker={"color": palette.series(i)},
            error_y={"type": "data", "symmetric": False, "array": part["accuracy_high"] - part["accuracy"],
                     "arrayminus": part["accuracy"] - part["accuracy_low"]},
            customdata=part[["parameter", *saved]].values,
            hovertemplate="t/level %{customdata[0]}<br>MACs saved %{x:.1%}<br>acc %{y:.3f}<br>"
            + "<br>".join(f"time saved, batch {c[7:]}: %{{customdata[{j + 1}]:.1%}}" for j, c in enumerate(saved))
            + "<extra></extra>",
        ))  # fmt: skip
    fig.add_hline(y=full - 0.01, line_dash="dot", annotation_text="full model − 1 pt")
    fig.update_layout(title="Early exit, measured runs: accuracy vs MACs saved", xaxis={"title": "MACs saved (vs plain inference)", "tickformat": ".0%"},
                      yaxis_title="accuracy", legend={"orientation": "h", "y": -0.25})  # fmt: skip
    return fig


def exit_curve_figure(curve: pd.DataFrame, full_accuracy: float) -> go.Figure:
    """Accuracy (95 % CI) against measured compute (fraction of the full model's time); hover shows threshold and depth."""
    fig = go.Figure(go.Scatter(
        x=curve["cost"], y=curve["accuracy"], mode="lines+markers", name="early exit", line={"color": palette.ACCURACY},
        error_y={"type": "data", "symmetric": False, "array": curve["accuracy_high"] - curve["accuracy"],
                 "arrayminus": curve["accuracy"] - curve["accuracy_low"]},
        customdata=curve[["threshold", "mean_depth"]].values,
        hovertemplate="t=%{customdata[0]}<br>cost %{x:.1%}, depth %{customdata[1]:.2f}<br>acc %{y:.3f}<extra></extra>",
    ))  # fmt: skip
    fig.add_hline(y=full_accuracy - 0.01, line_dash="dot", line_color=palette.NEUTRAL, annotation_text="full accuracy − 1 pt")
    fig.update_layout(title="Early exit (estimate): accuracy vs per-layer backbone time", xaxis={"title": "compute (fraction of the full model's time; backbone timed per layer, readouts not counted)", "tickformat": ".0%"},
                      yaxis_title="accuracy")  # fmt: skip
    return fig


def pruning_figure(pruning: pd.DataFrame) -> go.Figure:
    """Accuracy vs layers kept, one small panel per removal criterion (shared axes): solid as pruned, dashed
    after re-fitting the classifier, each with its 95% CI."""
    criteria = list(dict.fromkeys(pruning["criterion"]))
    fig = make_subplots(rows=1, cols=len(criteria), shared_yaxes=True, subplot_titles=criteria, horizontal_spacing=0.03)
    for col, criterion in enumerate(criteria, start=1):
        rows = pruning[pruning["criterion"] == criterion]
        for column, dash, name, (low, high) in (("accuracy", "solid", "as pruned", ("accuracy_low", "accuracy_high")),
                                                ("refit_accuracy", "dash", "classifier re-fit", ("refit_low", "refit_high"))):
            fig.add_trace(go.Scatter(
                x=rows["layers_kept"], y=rows[column], mode="lines+markers", name=name, legendgroup=name,
                showlegend=col == 1, line={"color": palette.ACCURACY, "dash": dash},
                hovertemplate=f"{criterion}, {name}<br>%{{x}} layers kept: %{{y:.3f}}<extra></extra>",
                error_y={"type": "data", "symmetric": False, "array": rows[high] - rows[column],
                         "arrayminus": rows[column] - rows[low]},
            ), row=1, col=col)  # fmt: skip
    fig.update_xaxes(dtick=1, autorange="reversed")
    fig.update_xaxes(title_text="layers kept", row=1, col=1)
    fig.update_yaxes(title_text="accuracy", row=1, col=1)
    fig.update_layout(title="Pruning: accuracy vs layers kept", legend=LEGEND_BELOW,
                      margin={"b": 110})  # fmt: skip
    return fig


def roc_figure(roc: pd.DataFrame, task: str, scores: Sequence[str] | None = None) -> go.Figure:
    """ROC curves of each detection score for one task (from ``depth.json``'s thinned curves)."""
    fig = go.Figure()
    part = roc[roc["task"] == task]
    for i, score in enumerate(scores or list(dict.fromkeys(part["score"]))):
        rows = part[part["score"] == score]
        fig.add_trace(go.Scatter(x=rows["fpr"], y=rows["tpr"], mode="lines", name=SCORE_LABELS.get(score, score),
                                 line={"color": palette.series(i), "dash": "solid" if score != "msp" else "dot"}))  # fmt: skip
    fig.add_trace(
        go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line={"color": palette.NEUTRAL, "dash": "dash"}, name="chance")
    )
    fig.update_layout(title=f"ROC — {task}", xaxis_title="false-positive rate", yaxis_title="true-positive rate",
                      legend=LEGEND_BELOW, margin={"b": 120})  # fmt: skip
    return fig


BLOCK_ABLATION_TITLE = "Block ablation (post hoc):<br>drop in p(ŷ) when each block's output is mean-ablated"
BLOCK_SKIP_TITLE = "Block ablation (post hoc):<br>drop in p(ŷ) when each block is skipped (residual) or mean-ablated"
BAR_METHOD = {SKIP: "skipped", MEAN: "mean-ablated"}


def block_ablation_figure(result: BlockAblation, layers: Sequence[str], classes: Sequence[str], row: int = 0) -> go.Figure:
    """Bars of input ``row``'s drop in p(ŷ) per block (:class:`~laya.analysis.block_ablation.BlockAblation`), in
    the LOO-drop colour, hatched where the ablation flips the label; the hover names the class predicted after.
    Where some block was skipped, each bar names its intervention (``skipped`` / ``mean-ablated``) above it."""
    flips = result.flips[row].tolist()
    after = [classes[int(c)] for c in result.ablated_predictions[row]]
    skipped = SKIP in result.methods
    words = [BAR_METHOD[m] for m in result.methods] if skipped else None
    bars = go.Bar(
        x=list(layers), y=result.drops[row].tolist(), customdata=after, marker_color=palette.LOO_DROP,
        marker_pattern_shape=[palette.FLIP_PATTERN if f else "" for f in flips], text=words, textposition="outside",
        hovertemplate="%{x}" + (" (%{text})" if skipped else "")
        + ": drop %{y:+.3f}, then predicts %{customdata}<extra></extra>",
    )  # fmt: skip
    fig = go.Figure(bars)
    fig.update_xaxes(categoryorder="array", categoryarray=list(layers))
    axis = "block (skipped where residual, else mean-ablated)" if skipped else "block (mean-ablated)"
    fig.update_layout(title=BLOCK_SKIP_TITLE if skipped else BLOCK_ABLATION_TITLE, xaxis_title=axis,
                      yaxis_title=f"drop in p({classes[int(result.prediction[row])]})")  # fmt: skip
    return fig


@dataclass(frozen=True)
class WholeTestSetFigures:
    """The Depth page's figures over the whole test set: the same for every input, so built once per checkpoint
    (``pages/common/loading.py`` keeps them per process; a page shows copies, through ``shown``)."""

    exit_curve: go.Figure
    pruning: go.Figure
    class_terms: go.Figure
    measured: go.Figure | None  # the measured early-exit runs (``exits.json``), where there are some


def whole_test_set_figures(report: DepthReport, measured: Mapping[str, Any] | None) -> WholeTestSetFigures:
    """:class:`WholeTestSetFigures` of a depth report and its measured exits (``load_exits``, or None)."""
    return WholeTestSetFigures(
        exit_curve=exit_curve_figure(report.table("exit_curve"), report.data["accuracy"]),
        pruning=pruning_figure(report.table("pruning")),
        class_terms=class_terms_figure(report.table("logit_attribution")),
        measured=None if measured is None else measured_exit_figure(pd.DataFrame(measured["runs"])),
    )


__all__ = [
    "BLOCK_ABLATION_TITLE",
    "BLOCK_SKIP_TITLE",
    "WholeTestSetFigures",
    "attribution_figure",
    "block_ablation_figure",
    "class_terms_figure",
    "exit_curve_figure",
    "measured_exit_figure",
    "pruning_figure",
    "readout_path_figure",
    "roc_figure",
    "whole_test_set_figures",
]


def lens_caption(source: str, summary: pd.DataFrame | None, predicted: str) -> str:
    """What the Depth page's lens chart shows: the readout kind of this input's trajectory, and where the class
    means come from (``lens.csv``: its command, n and CI) or how to make them; says when the two readout kinds differ.
    Markdown, with the text read from ``lens.csv`` shown plain (:mod:`laya.app.text`)."""
    text = f"Readouts: {SOURCES[source]} ({plain(source)})."
    if summary is None:
        return text + (" Class means with 95 % CIs appear here once `python -m laya lens --checkpoint DIR` (or "
                       "`depth`) has written `lens.csv`.")  # fmt: skip
    n = summary.loc[summary["class"] == "all", "n"]
    own = summary.loc[summary["class"] == predicted, "n"]
    text += (f" Means over {int(n.iloc[0]) if len(n) else 0} test inputs ('all') and the "
             f"{int(own.iloc[0]) if len(own) else 0} whose true class is the predicted one, 95 % bootstrap CI over "
             f"inputs; `{code_plain(summary['command'].iloc[0])}`.")  # fmt: skip
    kind = str(summary["readout"].iloc[0])
    if kind != source:
        text += f" The means were read through {plain(kind)}, this input through {plain(source)}: they do not compare."
    return text
