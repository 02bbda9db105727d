"""Class-wise depth profiles of a report as the Class-wise page shows them: pure, tested without a browser.

One class's layer profile and the class counts, the dataset-wide profile per method and leave-one-layer-out table,
heatmaps whose cells can be clicked (and the cell a click selected), and Recompute: the checkpoint evaluated on
its local test split, with its refusal said in words. The profiles across training seeds are
:mod:`laya.app.seed_views`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.report import Report
from laya.app import palette
from laya.app.labels import method_label, mode_label
from laya.app.numbers import number_text, percent
from laya.app.text import clicked_name
from laya.model.checkpoint import Checkpoint, CheckpointError


def profile_title(report: Report, kind: str) -> str:
    """Heatmap title for :meth:`Report.class_layer_profile` of ``kind`` (``scores`` or ``loo``)."""
    if kind == "loo":
        return f"Mean leave-one-layer-out drop per class ({mode_label(report.data['profiles']['class_loo_mode'])})"
    return f"Mean {method_label(report.primary_method)} per class"


def clickable_heatmap(
    fig: go.Figure, marker_size: int = 22, selected: tuple[str, str | None] | None = None
) -> go.Figure:  # fmt: skip
    """``fig`` with an invisible square marker on every heatmap cell, so a click selects that cell, and the
    ``selected`` cell ``(class, layer)`` outlined (a whole row when the layer is None).

    Plotly's selection events skip heatmap traces (streamlit#8760), but not scatter points; the
    markers carry the heatmap's hover text (the heatmap's own hover is turned off to avoid two labels).
    """
    heat = next(t for t in fig.data if t.type == "heatmap")
    xs, ys = np.meshgrid(list(heat.x), list(heat.y))
    z = np.asarray(heat.z, dtype=float)
    custom = np.dstack([np.asarray(heat.customdata, dtype=float), z]).reshape(-1, 3)
    fig.add_trace(
        go.Scatter(
            x=xs.ravel(), y=ys.ravel(), mode="markers", customdata=custom, showlegend=False, name="cells",
            marker={"size": marker_size, "symbol": "square", "color": "rgba(0,0,0,0)"},
            hovertemplate=heat.hovertemplate.replace("%{z", "%{customdata[2]"),
        )
    )  # fmt: skip
    heat.hoverinfo = "skip"
    heat.hovertemplate = None
    if selected is not None and selected[0] in list(heat.y):
        row = list(heat.y).index(selected[0])
        layers = list(heat.x)
        col = layers.index(selected[1]) if selected[1] in layers else None
        x0, x1 = (col - 0.5, col + 0.5) if col is not None else (-0.5, len(layers) - 0.5)
        fig.add_shape(type="rect", x0=x0, x1=x1, y0=row - 0.5, y1=row + 0.5, xref="x", yref="y",
                      line={"color": palette.OUTLINE, "width": 3}, name="selected cell")  # fmt: skip
    return fig


def clicked_cell(event: object, classes: Sequence[str], layers: Sequence[str] = ()) -> tuple[str, str | None] | None:
    """The ``(class, layer)`` of the heatmap cell clicked (``st.plotly_chart(on_select=...)`` event), or None.

    The event is ``{"selection": {"points": [{"y": class, "x": layer, ...}, ...]}}`` (names as
    :func:`laya.app.text.shown` escaped them: mapped back to ``classes`` and, when given, ``layers``); the last
    point wins.
    """
    try:
        points = event["selection"]["points"]  # type: ignore[index]
    except (KeyError, TypeError, AttributeError):
        return None
    cells = [(clicked_name(p.get("y"), classes), p.get("x")) for p in points if isinstance(p, dict)]
    cells = [(c, (clicked_name(x, layers) if layers else x) if isinstance(x, str) else None) for c, x in cells]
    return next(((c, x) for c, x in reversed(cells) if c is not None), None)


def clicked_class(event: object, classes: Sequence[str]) -> str | None:
    """The class of the heatmap cell clicked (:func:`clicked_cell`), or None."""
    cell = clicked_cell(event, classes)
    return cell[0] if cell else None


def class_profile(profile: pd.DataFrame, class_name: str, subset: str = "all") -> pd.DataFrame:
    """One class's rows of a class x layer profile, in layer order: ``layer, mean, std, count``."""
    part = profile[(profile["class"] == class_name) & (profile["subset"] == subset)]
    return part.sort_values("layer_index")[["layer", "layer_index", "mean", "std", "count"]].reset_index(drop=True)


def class_counts(profile: pd.DataFrame, subset: str = "all") -> dict[str, int]:
    """Number of inputs per true class in ``subset``."""
    part = profile[profile["subset"] == subset].drop_duplicates("class_index").sort_values("class_index")
    return dict(zip(part["class"], part["count"].astype(int)))


def profile_methods(report: Report) -> list[str]:
    """Methods with a dataset-wide layer profile, the primary one first."""
    methods = list(dict.fromkeys(report.layer_profile().get("method", [])))
    return sorted(methods, key=lambda m: m != report.primary_method)


def global_profile(report: Report, method: str) -> pd.DataFrame:
    """Dataset-wide ``layer, mean, std, count`` of ``method``'s scores."""
    profile = report.layer_profile()
    return profile[profile["method"] == method].sort_values("layer_index").reset_index(drop=True)


def global_loo(report: Report) -> pd.DataFrame:
    """Dataset-wide mean LOO drop and label-flip rate (a percentage) per layer, one column pair per ablation
    mode, as display text (:meth:`Report.loo_table` holds the numbers)."""
    table = report.loo_table()
    wide = table.pivot(index=["layer_index", "layer"], columns="mode", values=["mean_drop", "flip_rate"])
    wide = wide[[(v, m) for m in report.data["modes"] for v in ("mean_drop", "flip_rate")]]
    out = pd.DataFrame({"layer": wide.index.get_level_values("layer")})
    for value, mode in wide.columns:
        column = wide[(value, mode)].to_numpy()
        if value == "mean_drop":
            out[f"mean LOO drop ({mode_label(mode)})"] = [number_text(v) for v in column]
        else:
            out[f"label flips ({mode_label(mode)})"] = [percent(v) for v in column]
    return out


def evaluate_locally(
    checkpoint: Checkpoint, limit: int | None = None, progress: Callable[[float, str], None] | None = None
) -> Report:
    """Evaluate ``checkpoint`` on its dataset's local test split (first ``limit`` inputs).

    Raises:
        DatasetNotFoundError: the dataset is not on this machine (the message says where to get it).
    """
    return Report(evaluate(checkpoint, checkpoint.load_data("test"), EvalOptions(limit=limit or None), progress))


def recompute_error(error: Exception) -> str:
    """The Class-wise Recompute refusal: laya's reason, and for a dataset outside the shared folders, how an
    operator allows one (``LAYA_PATH_ROOTS``)."""
    text = f"Cannot recompute: {error}"
    if isinstance(error, CheckpointError):  # the dataset lies outside the folders this server shares
        text += (
            ". An operator can share a dataset folder with the dashboard by adding it to `LAYA_PATH_ROOTS` "
            "(os.pathsep-separated folders) and restarting it."
        )
    return text


__all__ = [
    "class_counts",
    "class_profile",
    "clickable_heatmap",
    "clicked_cell",
    "clicked_class",
    "evaluate_locally",
    "global_loo",
    "global_profile",
    "profile_methods",
    "profile_title",
    "recompute_error",
]
