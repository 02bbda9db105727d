"""The test-set browser's table: filter and sort the sample's inputs (:mod:`laya.analysis.sample`).

:func:`browse_table` turns a :class:`~laya.analysis.sample.Sample` and a :class:`Query` into one row per
shown input: ``row`` (the sample row, for its thumbnail), ``test index``, ``label``, ``prediction``,
``correct``, ``confidence``, ``top layer`` (argmax of the primary scores), ``score`` (the primary score
of the chosen layer: α, the ScalarMix weight or Integrated Gradients), ``LOO drop`` (of the chosen
layer, under the sample's intervention), ``prediction depth`` and ``suspicion`` (the chosen error/OOD
score; higher = more suspicious) where depth analytics exist. Sorting is stable with ties broken by
test index, so an order never depends on float noise in the storage order.

The dashboard's aggregates open it on their inputs: :func:`heatmap_query` (a class × layer cell: that
class sorted by that layer's score), :func:`confusion_query` (a confusion cell: those errors, most
confident first), :func:`detection_query` (a detection row: the most suspicious inputs first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from laya.analysis.depth.detection import COVARIANCE, SCORE_LABELS, mahalanobis_trusted
from laya.analysis.sample import Sample
from laya.app.text import clicked_name
from laya.model.own_head import is_own_head

Outcome = Literal["all", "correct", "wrong"]
OUTCOMES: tuple[Outcome, ...] = ("all", "correct", "wrong")
SORTS = {  # link value -> column
    "index": "test index",
    "confidence": "confidence",
    "score": "score",
    "drop": "LOO drop",
    "depth": "prediction depth",
    "suspicion": "suspicion",
    "label": "label",
    "prediction": "prediction",
    "top": "top layer",
}
ORDER_BY_SORT = {"index": "asc", "label": "asc", "prediction": "asc", "top": "asc", "depth": "asc"}


@dataclass(frozen=True)
class Query:
    """Which inputs, in which order. Names (classes, layers) as the sample spells them; None: no filter."""

    label: str | None = None
    prediction: str | None = None
    outcome: Outcome = "all"
    top_layer: str | None = None
    layer: str | None = None  # whose score and LOO drop are shown (default: the first layer)
    score: str | None = None  # detection score shown as ``suspicion`` (default: :func:`default_score`)
    sort: str = "index"
    descending: bool = False


def detection_scores(sample: Sample) -> list[str]:
    """The error/OOD scores the sample holds, in :data:`SCORE_LABELS` order."""
    held = {c.split("/", 1)[1] for c in sample.table.columns if c.startswith("detection/")}
    return [k for k in SCORE_LABELS if k in held]


def default_layer(sample: Sample) -> str:
    """The layer Browse opens on: the first whose score or LOO drop differs between the sample's inputs (an
    attached network's own classifier reads its last layer alone: every other column is zero), else the first."""
    for i, name in enumerate(sample.layer_names):
        values = sample.table[[f"score/{i}", f"drop/{i}"]].to_numpy()
        if len(values) and np.ptp(values, axis=0).max() > 0:
            return name
    return sample.layer_names[0]


def default_score(sample: Sample, widths: Sequence[int] | None = None) -> str | None:
    """The suspicion score Browse opens on: Mahalanobis where the sample's fit is trusted
    (:func:`~laya.analysis.depth.detection.mahalanobis_trusted`; an older fit only when its layers' ``widths`` are
    given and no wider than its training inputs), else max softmax."""
    held, meta = detection_scores(sample), sample.meta
    covariance, n_train = meta.get("covariance"), meta.get("n_train")
    fitted = covariance == COVARIANCE or (widths is not None and n_train is not None)
    if "mahalanobis" in held and fitted and mahalanobis_trusted(covariance, n_train or 0, widths or ()):
        return "mahalanobis"
    return "msp" if "msp" in held else next(iter(held), None)


def check_query(sample: Sample, query: Query) -> Query:
    """``query`` with every name checked against the sample; raises ValueError naming the options."""
    for value, options, what in (
        (query.label, sample.classes, "class"),
        (query.prediction, sample.classes, "predicted class"),
        (query.top_layer, sample.layer_names, "top layer"),
        (query.layer, sample.layer_names, "layer"),
        (query.score, detection_scores(sample), "score"),
        (query.outcome, OUTCOMES, "outcome"),
        (query.sort, list(SORTS), "sort"),
    ):
        if value is not None and value not in options:
            raise ValueError(f"unknown {what} {value!r}; expected one of {list(options)}")
    return query


def browse_table(sample: Sample, query: Query = Query()) -> pd.DataFrame:
    """The inputs ``query`` selects, sorted (see the module docstring)."""
    check_query(sample, query)
    t, classes, layers = sample.table, np.asarray(sample.classes, dtype=object), sample.layer_names
    layer = layers.index(query.layer) if query.layer else 0
    scores = t[[f"score/{i}" for i in range(len(layers))]].to_numpy()
    top = scores.argmax(1)
    suspicion = query.score or default_score(sample)
    table = pd.DataFrame(
        {
            "row": np.arange(len(t)),
            "test index": t["index"].to_numpy(),
            "label": classes[t["label"].to_numpy()],
            "prediction": classes[t["prediction"].to_numpy()],
            "correct": t["correct"].to_numpy(),
            "confidence": t["confidence"].to_numpy(),
            "top layer": np.asarray(layers, dtype=object)[top],
            "score": t[f"score/{layer}"].to_numpy(),
            "LOO drop": t[f"drop/{layer}"].to_numpy(),
        }
    )
    if "depth" in t:
        table["prediction depth"] = t["depth"].to_numpy()
    if suspicion is not None:
        table["suspicion"] = t[f"detection/{suspicion}"].to_numpy()
    keep = np.ones(len(table), dtype=bool)
    if query.label is not None:
        keep &= table["label"].to_numpy() == query.label
    if query.prediction is not None:
        keep &= table["prediction"].to_numpy() == query.prediction
    if query.outcome != "all":
        keep &= table["correct"].to_numpy() == (query.outcome == "correct")
    if query.top_layer is not None:
        keep &= table["top layer"].to_numpy() == query.top_layer
    table = table[keep]
    column = SORTS[query.sort]
    if column not in table:
        raise ValueError(f"this sample has no {column!r} column (run `python -m laya depth` for depth columns)")
    by_index = table.sort_values("test index", kind="stable")  # ties: ascending test index
    return by_index.sort_values(column, ascending=not query.descending, kind="stable").reset_index(drop=True)


def depth_words(train: dict) -> str:
    """How Browse names its ``prediction depth`` column for a checkpoint with this ``train`` record: for an attached
    network's own classifier it comes from the depth report's linear probes, so it is named as theirs (the depth its
    other pages show is the tuned lens's)."""
    if is_own_head(train):
        return "prediction depth (the probes': linear probes on the network's layers, not the tuned lens)"
    return "prediction depth"


ONE_LAYER_NOTE = ("The own classifier reads the pre-logits layer alone: every other layer's score and LOO drop is 0 "
                  "by construction, so both columns are pre-logits' and there is no layer to pick, nor a top layer "
                  "to filter or sort by (it would be pre-logits for every input).")  # fmt: skip


def one_layer(train: dict, sample: Sample) -> str | None:
    """The only layer whose score and LOO drop are not 0 by construction, for a checkpoint with this ``train``
    record: the last (pre-logits) for an attached network's own classifier, which reads it alone
    (:data:`ONE_LAYER_NOTE`); None for a head over several layers (its layer is picked, its top layer shown)."""
    return sample.layer_names[-1] if is_own_head(train) else None


def heatmap_query(label: str, layer: str) -> Query:
    """A class × layer heatmap cell: the inputs of ``label``, highest score of ``layer`` first."""
    return Query(label=label, layer=layer, sort="score", descending=True)


def confusion_query(label: str, prediction: str) -> Query:
    """A confusion cell: inputs of ``label`` predicted as ``prediction``, most confident first."""
    outcome: Outcome = "correct" if label == prediction else "wrong"
    return Query(label=label, prediction=prediction, outcome=outcome, sort="confidence", descending=True)


def detection_query(score: str, task: str = "misclassification") -> Query:
    """A detection row (``score`` on ``task``): the most suspicious inputs first (errors and correct alike:
    what the score would flag)."""
    del task  # every task ranks the same test inputs by the same score; OOD inputs are not in the sample
    return Query(score=score, sort="suspicion", descending=True)


def query_switches(query: Query) -> dict[str, str | None]:
    """``query`` as the link switches of :mod:`laya.app.links` (None: unset)."""
    return {
        "bclass": query.label,
        "bpred": query.prediction,
        "outcome": None if query.outcome == "all" else query.outcome,
        "top": query.top_layer,
        "layer": query.layer,
        "score": query.score,
        "sort": None if query.sort == "index" else query.sort,
        "order": "desc" if query.descending else None,
    }


def query_from_switches(switches: dict[str, str]) -> Query:
    """The inverse of :func:`query_switches` (unknown values are left for :func:`check_query`)."""
    return replace(
        Query(),
        label=switches.get("bclass"),
        prediction=switches.get("bpred"),
        outcome=switches.get("outcome", "all"),  # type: ignore[arg-type]
        top_layer=switches.get("top"),
        layer=switches.get("layer"),
        score=switches.get("score"),
        sort=switches.get("sort", "index"),
        descending=switches.get("order") == "desc",
    )


def clicked_cell(event: object, rows: list[str], columns: list[str]) -> tuple[str, str] | None:
    """``(y, x)`` of the last heatmap cell clicked (``st.plotly_chart(on_select=...)`` event over
    :func:`laya.app.classwise_views.clickable_heatmap`, names as :func:`laya.app.text.shown` escaped them), if both are
    known names; else None."""
    try:
        points = event["selection"]["points"]  # type: ignore[index]
    except (KeyError, TypeError, AttributeError):
        return None
    cells = [(clicked_name(p.get("y"), rows), clicked_name(p.get("x"), columns)) for p in points if isinstance(p, dict)]
    return next(((y, x) for y, x in reversed(cells) if y is not None and x is not None), None)


def confusion_figure(confusion: pd.DataFrame) -> go.Figure:
    """Confusion matrix heatmap (rows: true class, columns: predicted) with counts in the cells."""
    counts = confusion.to_numpy()
    share = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    figure = go.Figure(
        go.Heatmap(
            z=counts,
            x=list(confusion.columns),
            y=list(confusion.index),
            text=counts,
            texttemplate="%{text}",
            colorscale="Blues",
            customdata=np.dstack([counts, share]),  # (C, C, 2): what laya.app.classwise_views.clickable_heatmap carries
            hovertemplate="true %{y}<br>predicted %{x}<br>%{z:.0f} inputs (%{customdata[1]:.1%} of the class)"
            "<extra></extra>",
        )
    )
    figure.update_layout(
        title="Confusion matrix (whole test set); click a cell to browse its inputs",
        xaxis_title="predicted",
        yaxis_title="true class",
        yaxis_autorange="reversed",
        height=120 + 28 * len(counts),
    )
    return figure


def summary(table: pd.DataFrame) -> dict[str, float]:
    """Count, accuracy and mean confidence of the shown inputs (NaN when none)."""
    n = len(table)
    return {
        "n": n,
        "accuracy": float(table["correct"].mean()) if n else float("nan"),
        "confidence": float(table["confidence"].mean()) if n else float("nan"),
    }


__all__ = [
    "ONE_LAYER_NOTE",
    "OUTCOMES",
    "SORTS",
    "Query",
    "browse_table",
    "check_query",
    "clicked_cell",
    "confusion_figure",
    "confusion_query",
    "default_score",
    "depth_words",
    "detection_query",
    "detection_scores",
    "heatmap_query",
    "one_layer",
    "query_from_switches",
    "query_switches",
    "summary",
]
