"""Per-layer spatial maps as a layers x image grid of overlays on ONE shared, symmetric colour scale.

Each panel is layer i's map of one class's logit term (:mod:`laya.analysis.head.spatial`) over the image the
model saw. The colour is a **density**, the logit per input pixel: a cell of an ``H_i x W_i`` map covering
``(H W) / (H_i W_i)`` pixels is drawn at ``value (H_i W_i) / (H W)``, so a coarse map and a fine one that add
the same amount to the logit look equally strong, and one colour scale (diverging around 0, red = for the
class) serves every depth and every head in the grid. Maps are upsampled here, by stretching the heatmap's
cells over the image (nearest), not in the payload.

``weighted=True`` (default): the maps are the layer's logit term as the head adds it, so each map's sum plus
its position-free offset equals the layer's bar in the logit-attribution chart (hover shows both).
``weighted=False``: each map divided by the head's weight of the layer (``gamma alpha_i`` for LAYA/ScalarMix,
1 for Concat/LastLayer): what the layer's features vote for, as if the head gave it the whole share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from laya.analysis.head.explain import Explanation
from laya.analysis.head.spatial import KIND_LABELS, ClassMaps

COLORSCALE = "RdBu_r"  # diverging: red adds to the class's logit, blue takes away
UNIT = "logit per input pixel"
MAX_COLUMNS = 6  # one input's layers wrap after this many panels
NOT_KEPT = "n/a (not among this head's top classes)"


@dataclass(frozen=True)
class MapRow:
    """One row of the grid: a title (the head), its explanation and the image the model saw (``uint8``
    ``(H, W)`` or ``(H, W, 3)`` at the model's input size)."""

    title: str
    explanation: Explanation
    image: np.ndarray


def map_classes(explanation: Explanation) -> list[str]:
    """The classes whose maps ``explanation`` keeps, most likely first (empty without maps)."""
    if explanation.spatial is None:
        return []
    return [explanation.classes[c] for c in explanation.spatial.classes[0].tolist()]


def no_maps_note(explanations: Sequence[Explanation]) -> str | None:
    """A sentence where no layer of any explanation has a map (exact or approximate), else None."""
    if any(e.spatial is not None and set(e.spatial.kinds) != {"n/a"} for e in explanations):
        return None
    return ("Spatial maps: n/a for every layer. No layer of this model is an average over positions (an MLP's "
            "layers have none), so there is nothing to split over the image.")  # fmt: skip


def no_class_maps_note(maps: ClassMaps) -> str | None:
    """A sentence where no layer has an exact mean map, else None."""
    if any(m is not None for m in maps.maps):
        return None
    return ("Mean spatial maps: n/a for every layer. No layer of this model averages a feature map (an MLP's "
            "layers, CLS-token layers; their gradient × activation approximations are not averaged).")  # fmt: skip


def _rgb(image: np.ndarray) -> np.ndarray:
    return np.repeat(image[..., None], 3, axis=2) if image.ndim == 2 else image


def _panels(row: MapRow, class_name: str, weighted: bool) -> list[dict]:
    """Per layer of ``row``: kind, title, density ``z`` (or None), hover data and the numbers it shows."""
    e, (H, W) = row.explanation, row.image.shape[:2]
    spatial = e.spatial
    keep = map_classes(e)
    k = keep.index(class_name) if class_name in keep else None
    panels = []
    for i, layer in enumerate(e.layer_names):
        kind = "n/a" if spatial is None else spatial.kinds[i]
        panel = {"layer": layer, "kind": kind, "label": KIND_LABELS[kind], "z": None}
        if kind not in ("n/a", "deferred") and k is None:
            panel["label"] = NOT_KEPT
        elif kind not in ("n/a", "deferred"):
            weight = float(spatial.weights[0, i])
            scale = 1.0 if weighted else (1.0 / weight if weight != 0 else math.nan)
            values = spatial.maps[i][0, k].double().numpy() * scale  # (H_i, W_i), logit per cell
            offset = float(spatial.offsets[0, i, k]) * scale if kind == "exact" else 0.0  # approximate: map alone
            term = float(spatial.terms[0, i, k])
            if np.isnan(values).all():
                panel["label"] = "n/a (approximation kept for the top classes only)"
                panels.append(panel)
                continue
            total = float(np.nansum(values)) + offset
            h, w = values.shape
            extra = np.broadcast_to(np.array([total, offset, term, weight]), (h, w, 4))
            panel |= {"z": values * (h * w) / (H * W), "cells": values, "sum": total, "offset": offset,
                      "term": term, "weight": weight, "customdata": np.concatenate([values[..., None], extra], -1)}  # fmt: skip
        panels.append(panel)
    return panels


def _hover(layer: str, kind: str, weighted: bool) -> str:
    total = "map sum (approximate: not equal to the term)" if kind == "approximate" else "map sum + offset"
    unweighted = "" if weighted else " ÷ layer weight"
    return (
        f"<b>{layer}</b> · {KIND_LABELS[kind]}<br>this cell: %{{customdata[0]:.4g}} logit{unweighted}"
        f"<br>per input pixel: %{{z:.3g}}<br>{total}: %{{customdata[1]:.5g}}{unweighted} "
        "(offset %{customdata[2]:.4g})<br>layer's logit term (its bar): %{customdata[3]:.5g}"
        "<br>head's layer weight: %{customdata[4]:.4g}<extra></extra>"
    )


def maps_figure(rows: Sequence[MapRow], class_name: str, weighted: bool = True, title: str | None = None) -> go.Figure:
    """Layers x image grid of ``class_name``'s per-layer maps for each row (an input under a head), one
    colour axis for all panels, symmetric around 0. Panels without a map show the image and say why
    (``n/a``); approximate maps are labelled ``approximate (gradient x activation)``. Every heatmap's
    ``meta`` holds its layer, kind, ``sum`` (map + offset), ``offset``, ``term`` and ``weight``.
    Raises ``ValueError`` for no rows."""
    if not rows:
        raise ValueError("no rows to draw")
    panels = [_panels(row, class_name, weighted) for row in rows]
    L = max(len(p) for p in panels)
    cols = min(L, MAX_COLUMNS) if len(rows) == 1 else L
    per_row = math.ceil(L / cols)  # grid rows one input takes
    titles = []
    for row_panels in panels:
        cells = [f"{p['layer']}<br><sup>{p['label'].replace(' (', '<br>(')}</sup>" for p in row_panels]
        titles += cells + [""] * (per_row * cols - len(cells))
    fig = make_subplots(rows=len(rows) * per_row, cols=cols, subplot_titles=titles, horizontal_spacing=0.02,
                        vertical_spacing=0.12 / max(1, len(rows) * per_row) + 0.04,
                        row_titles=[r.title for r in rows] if len(rows) > 1 else None)  # fmt: skip
    top = max((np.nanmax(np.abs(p["z"])) for rp in panels for p in rp if p["z"] is not None), default=0.0)
    top = float(top) if np.isfinite(top) and top > 0 else 1.0
    for r, (row, row_panels) in enumerate(zip(rows, panels)):
        image = _rgb(row.image)
        H, W = image.shape[:2]
        for i, p in enumerate(row_panels):
            at = {"row": r * per_row + i // cols + 1, "col": i % cols + 1}
            fig.add_trace(go.Image(z=image, hoverinfo="skip"), **at)
            if p["z"] is not None:
                h, w = p["z"].shape
                fig.add_trace(go.Heatmap(
                    z=p["z"], x0=-0.5 + W / w / 2, dx=W / w, y0=-0.5 + H / h / 2, dy=H / h, coloraxis="coloraxis",
                    opacity=0.6, customdata=p["customdata"], hovertemplate=_hover(p["layer"], p["kind"], weighted),
                    name=f"{row.title} {p['layer']}",
                    meta={"row": row.title, "layer": p["layer"], "kind": p["kind"], "sum": p["sum"],
                          "offset": p["offset"], "term": p["term"], "weight": p["weight"]},
                ), **at)  # fmt: skip
            anchor = fig.get_subplot(**at).yaxis.anchor  # this panel's x axis: square pixels
            fig.update_xaxes(visible=False, range=[-0.5, W - 0.5], **at)
            fig.update_yaxes(visible=False, range=[H - 0.5, -0.5], scaleanchor=anchor, **at)
    unit = UNIT if weighted else f"{UNIT} ÷ layer weight"
    fig.update_layout(
        coloraxis={"colorscale": COLORSCALE, "cmin": -top, "cmax": top, "colorbar": {"title": {"text": unit}}},
        height=80 + 200 * len(rows) * per_row, margin={"t": 100 if title else 70, "l": 10, "r": 10, "b": 10},
        title=title,
    )  # fmt: skip
    return fig


def deferred_label(explanation: Explanation) -> str | None:
    """The heading of a closed section for the CLS-token layers' approximate maps, with what opening it costs,
    where ``explanation`` deferred them (``explain(approximate=False)``); else None (nothing to defer)."""
    spatial = explanation.spatial
    if spatial is None or not any(spatial.deferred):
        return None
    layers = sum(spatial.deferred)
    return (f"Approximate maps of {layers} CLS-token layers (gradient × activation): open to compute them, at the "
            f"cost of one more forward and {layers} backward passes per head shown, several times the rest of this page "
            "(measured on the Speed page of the docs)")  # fmt: skip


def maps_caption(weighted: bool) -> str:
    """What the grid shows and what the weighting option means."""
    return (
        "Where each depth voted for the class: layer i's logit term split over the positions of its feature map, "
        "on one colour scale for every panel (logit per input pixel; red adds to the class, blue takes away). "
        + ("**Weighted** (as the head adds it, with its layer weight γ·α_i; 1 for Concat/LastLayer): each map's sum "
           "plus its position-free offset equals the layer's bar in the logit-attribution chart (hover shows both). "
           if weighted else
           "**Unweighted**: each map divided by the head's weight of its layer (γ·α_i for LAYA/ScalarMix; "
           "Concat/LastLayer have weight 1, so nothing changes): what the layer's features vote for on their own. ")
        + "Exact where the layer averages its feature map; *approximate (gradient × activation)* for CLS-token "
        "layers; n/a where a layer has no positions (MLP)."
    )  # fmt: skip


def class_maps_figure(maps: ClassMaps, classes: Sequence[str], layer_names: Sequence[str], subset: str = "all",
                      title: str | None = None) -> go.Figure:  # fmt: skip
    """Classes x layers grid of the mean map of each class's own logit term over the inputs labelled that
    class (``subset``: all, correct or incorrect), one symmetric colour scale (logit per input pixel of a
    unit frame: each map drawn as the mean cell value x (H_i W_i) / (H W) with ``H = W = maps.size``).
    Row titles (at the right) give n; ``meta`` per heatmap: class, layer, n, mean map sum + offset, mean term."""
    s = maps.subsets.index(subset)
    counts = maps.counts[s].tolist()
    rows, L = len(classes), len(layer_names)
    fig = make_subplots(rows=rows, cols=L, column_titles=list(layer_names), horizontal_spacing=0.01,
                        vertical_spacing=0.01, row_titles=[f"{c} (n={n})" for c, n in zip(classes, counts)])  # fmt: skip
    H = W = maps.size
    dense = [None if m is None else m[s].double() * (m.shape[-2] * m.shape[-1]) / (H * W) for m in maps.maps]
    top = max((float(d.nan_to_num().abs().max()) for d in dense if d is not None), default=0.0) or 1.0
    for i, d in enumerate(dense):
        for c in range(rows):
            at = {"row": c + 1, "col": i + 1}
            if d is None or counts[c] == 0:
                fig.add_annotation(text="n/a" if d is None else "n=0", showarrow=False, x=0.5, y=0.5,
                                   xref=f"{fig.get_subplot(**at).xaxis.plotly_name.replace('axis', '')} domain",
                                   yref=f"{fig.get_subplot(**at).yaxis.plotly_name.replace('axis', '')} domain")  # fmt: skip
                continue
            total = float(maps.maps[i][s, c].sum() + maps.offsets[s, c, i])
            fig.add_trace(go.Heatmap(
                z=d[c].numpy(), coloraxis="coloraxis", name=f"{classes[c]} {layer_names[i]}",
                hovertemplate=f"<b>{classes[c]}</b> · {layer_names[i]} (n={counts[c]})<br>mean per pixel %{{z:.3g}}"
                f"<br>mean map sum + offset {total:.4g}<br>mean logit term {float(maps.terms[s, c, i]):.4g}<extra></extra>",
                meta={"class": classes[c], "layer": layer_names[i], "n": counts[c], "sum": total,
                      "term": float(maps.terms[s, c, i])},
            ), **at)  # fmt: skip
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, autorange="reversed")
    for r in range(rows):
        for i in range(L):
            at = {"row": r + 1, "col": i + 1}
            fig.update_yaxes(scaleanchor=fig.get_subplot(**at).yaxis.anchor, constrain="domain", **at)
            fig.update_xaxes(constrain="domain", **at)
    fig.for_each_annotation(lambda a: a.update(textangle=0, xanchor="left") if a.textangle == 90 else None)
    fig.update_layout(
        coloraxis={"colorscale": COLORSCALE, "cmin": -top, "cmax": top, "colorbar": {"title": {"text": f"mean {UNIT}"},
                                                                                     "x": 1.22}},
        height=80 + 95 * rows, margin={"t": 80 if title else 40, "l": 10, "r": 190, "b": 10}, title=title,
    )  # fmt: skip
    return fig


__all__ = ["COLORSCALE", "MAX_COLUMNS", "NOT_KEPT", "UNIT", "MapRow", "class_maps_figure", "deferred_label",
           "map_classes", "maps_caption", "maps_figure", "no_class_maps_note", "no_maps_note"]  # fmt: skip
