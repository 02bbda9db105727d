"""Figures and captions of the Activation patching page (:mod:`laya.analysis.patching`): pure, never shown here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from laya.analysis.patching import WHERE
from laya.app import palette
from laya.app.network_views import APART_PANEL, KEPT_PANEL, kept_and_apart, panel_widths
from laya.app.text import code_plain

ROWS = ("prob_change", "logit_diff_change", "alpha_change")


def alpha_note(head: str, has_alpha: bool) -> str | None:
    """Why the α row is empty or flat for ``head`` (a head name, e.g. ``"concat"``), else None."""
    if not has_alpha:
        return f"n/a: {head} has no layer weights α(x)"
    if head == "scalarmix":
        return "ScalarMix's weights do not depend on the input: 0 by construction"
    return None


def axis_titles(predicted: str, a: str, b: str) -> tuple[str, str, str]:
    """The three rows' y titles: the target's predicted class, the logit difference, the patched layer's α."""
    return f"Δ p({predicted})", f"Δ (logit {a} − logit {b})", "Δ α (patched layer)"


def display_table(table: pd.DataFrame, titles: tuple[str, str, str]) -> pd.DataFrame:
    """:func:`~laya.analysis.patching.pair_table` as shown: changes signed to 4 decimals under ``titles``,
    ``p(prediction after)`` to 3, "n/a" where a value does not exist (no α, a layer the backbone cannot patch)."""

    def fmt(spec: str):
        return lambda v: "n/a" if pd.isna(v) else format(v, spec)

    shown = table.rename(columns=dict(zip(ROWS, titles)) | {"probability": "p(prediction after)"})
    for title in titles:
        shown[title] = shown[title].map(fmt("+.4f"))
    shown["p(prediction after)"] = shown["p(prediction after)"].map(fmt(".3f"))
    shown["prediction"] = shown["prediction"].replace("", "n/a")
    return shown


def effects_figure(table: pd.DataFrame, where: str, predicted: str, a: str, b: str, note: str | None = None) -> go.Figure:
    """Three bar rows over the layers of :func:`laya.analysis.patching.pair_table` (layers that could not be
    patched are left out, "all layers" kept as the last bar): the change in the target's predicted-class
    probability, in ``logit_a - logit_b`` and in the patched layer's α; ``note`` replaces the α bars (a head
    without input-dependent α)."""
    if where not in WHERE:
        raise ValueError(f"where must be one of {sorted(WHERE)}, got {where!r}")
    rows = table[table["patched"]]
    titles = axis_titles(predicted, a, b)
    figure = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    colours = (palette.CONFIDENCE, palette.DISAGREE, palette.CONFIDENCE)
    for r, (column, title, colour) in enumerate(zip(ROWS, titles, colours), start=1):
        figure.update_yaxes(title_text=title, title_font_size=11, row=r, col=1, zeroline=True)
        if column == "alpha_change" and (note is not None or rows[column].isna().all()):
            figure.add_annotation(text=note or "n/a", xref="x domain", yref=f"y{r} domain", x=0.5, y=0.5,
                                  showarrow=False, row=r, col=1)  # fmt: skip
            continue
        figure.add_trace(
            go.Bar(x=rows["layer"], y=rows[column], name=title, marker_color=colour, customdata=rows["prediction"],
                   hovertemplate="%{x}: %{y:+.4f}<br>prediction after the patch: %{customdata}<extra></extra>"),
            row=r, col=1,
        )  # fmt: skip
    figure.update_layout(
        title=f"Patching each layer {WHERE[where]}: the target with that layer from the source",
        showlegend=False,
        height=720,
    )
    figure.update_xaxes(title_text="patched layer", row=3, col=1)
    if not figure.data or all(t.yaxis != "y3" for t in figure.data):  # no α bars: the layer names under row 2 too
        figure.update_xaxes(showticklabels=True, row=2, col=1)
    return figure


UNITS_TITLE = "Patching each unit inside the network: the target with that unit's branch from the source"
UNIT_ROWS = ("prob_change", "logit_diff_change")


def unit_effects_figure(table: pd.DataFrame, predicted: str, a: str, b: str) -> go.Figure:
    """Two bar rows over the units of :func:`~laya.analysis.network.unit_patching.unit_patch_table` whose rows are
    not fixed by construction (those are left out: :func:`unit_patching_caption` says why): the change in the
    target's predicted-class probability and in ``logit_a - logit_b``; units that do not keep the input (their
    whole output taken from the source) in a column of their own, on their own axes."""
    drawn = table[~table["constructed"]].reset_index(drop=True)
    groups = [g for g in kept_and_apart(drawn["keeps input"]) if g] or [[]]
    figure = make_subplots(rows=2, cols=len(groups), shared_xaxes="columns", vertical_spacing=0.08,
                           column_widths=panel_widths([max(1, len(g)) for g in groups]),
                           subplot_titles=(KEPT_PANEL, APART_PANEL) if len(groups) > 1 else None)  # fmt: skip
    titles = axis_titles(predicted, a, b)[:2]
    for column, group in enumerate(groups, start=1):
        part = drawn.iloc[group]
        for r, (name, title, colour) in enumerate(zip(UNIT_ROWS, titles, (palette.CONFIDENCE, palette.DISAGREE)), 1):
            figure.add_bar(x=part["unit"], y=part[name], name=title, customdata=part["prediction"],
                           marker_color=colour if part["keeps input"].all() else palette.NEUTRAL,
                           hovertemplate="%{x}: %{y:+.4f}<br>prediction after the patch: %{customdata}"
                                         "<extra></extra>", row=r, col=column)  # fmt: skip
            figure.update_yaxes(title_text=title, title_font_size=11, zeroline=True, row=r, col=column)
        figure.update_xaxes(title_text="patched unit", row=2, col=column)
    if not len(drawn):
        figure.add_annotation(text="every row is fixed by construction", xref="x domain", yref="y domain", x=0.5,
                              y=0.5, showarrow=False)  # fmt: skip
    figure.update_layout(title=UNITS_TITLE, showlegend=False, height=560)
    return figure


def unit_patching_caption(table: pd.DataFrame, head: str) -> str:
    """What the per-unit sweep ran, and which rows are not drawn because they are fixed by construction (Markdown,
    every unit name escaped here)."""
    text = ("Each bar: the target run with one unit's branch (its output minus its stream; a transformer block's "
            "chosen branch module) taken from the source, the target's stream kept, so the rest of the network "
            f"still computes from the target; every unit in one batched pass; changes are patched − unpatched target "
            f"(float64 {head}).")  # fmt: skip
    fixed = table[table["constructed"]]
    if len(fixed):
        names = ", ".join(f"`{code_plain(u)}`" for u in fixed["unit"])
        text += (f" Not drawn: {names}. With no shortcut, such a unit's whole output is taken from the source and "
                 "the network after it computes from the source alone: its row is the source's own output by "
                 f"construction, whatever the pair (here Δ p(ŷ) {float(fixed['prob_change'].iloc[0]):+.4f}).")
    if (~table["constructed"] & ~table["keeps input"]).any():
        text += " Drawn apart, on their own axes: units without a shortcut whose whole output was taken."
    return text


def unit_display_table(table: pd.DataFrame, titles: tuple[str, str, str]) -> pd.DataFrame:
    """:func:`~laya.analysis.network.unit_patching.unit_patch_table` as shown: changes signed to 4 decimals under
    ``titles``, ``p(prediction after)`` to 3, and per row whether it is drawn or fixed by construction."""
    shown = table.rename(columns=dict(zip(UNIT_ROWS, titles)) | {"probability": "p(prediction after)"})
    for title in titles[:2]:
        shown[title] = shown[title].map(lambda v: format(v, "+.4f"))
    shown["p(prediction after)"] = shown["p(prediction after)"].map(lambda v: format(v, ".3f"))
    fixed = "the source's own output by construction: not drawn"
    shown["row"] = [fixed if c else "drawn" for c in shown["constructed"]]
    return shown.drop(columns="constructed")


def image_figure(pixels: np.ndarray, title: str) -> go.Figure:
    """An input as a figure (``uint8 (H, W)`` or ``(H, W, 3)``), so the HTML export carries the source image."""
    z = np.repeat(pixels[..., None], 3, axis=-1) if pixels.ndim == 2 else pixels
    figure = go.Figure(go.Image(z=z))
    figure.update_layout(title=title, xaxis_visible=False, yaxis_visible=False, width=320, height=340)
    return figure


def patching_caption(where: str, head: str, layers: int, patched: int) -> str:
    """What the sweep ran and what its rows mean."""
    if where == "head":
        cost = (f"one backbone pass on both inputs, then one batched head call ({layers} single layers + all layers "
                "at once, whose row reproduces the source's logits)")  # fmt: skip
    else:
        cost = f"{patched + 1} backbone passes (source and target together, then one per patched layer)"
        if patched < layers:
            cost += f"; {layers - patched} layer(s) have no module inside the backbone to patch (n/a)"
    return (f"Each row: the target run with one layer's activation taken from the source, {WHERE[where]}; "
            f"changes are patched − unpatched target (float64 {head} head). Cost: {cost}.")


__all__ = ["ROWS", "UNITS_TITLE", "UNIT_ROWS", "alpha_note", "axis_titles", "effects_figure", "image_figure",
           "patching_caption", "unit_display_table", "unit_effects_figure", "unit_patching_caption"]  # fmt: skip
