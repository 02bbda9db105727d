"""Display-ready views of laya objects for the dashboard: labels, tables, images, figures.

Pure helpers (no Streamlit): the dashboard's pages only lay out what these return, so
everything a page shows is computed here or elsewhere in ``laya`` and tested without a browser.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from laya.analysis.attribution import METHOD_LABELS, POSTHOC_METHODS
from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.explain import Explanation
from laya.analysis.report import Report
from laya.app.catalog import Entry
from laya.app.plots import layer_scores_figure
from laya.data.datasets import InputSpec
from laya.model.checkpoint import Checkpoint
from laya.model.heads import HEAD_LABELS

MODE_HELP = {
    "zero": "the layer's term (or input) is removed",
    "mean": "the layer's hidden state is replaced by its training mean",
    "renormalise": "the softmax is recomputed over the remaining layers",
}


# ---------------------------------------------------------------- labels


def head_title(name: str) -> str:
    """``laya`` -> ``LAYA``, ``lastlayer`` -> ``LastLayer``; unknown names unchanged."""
    return HEAD_LABELS.get(name, name)


def is_posthoc(method: str) -> bool:
    return method in POSTHOC_METHODS


def method_label(method: str) -> str:
    """Human name of an attribution method; post-hoc methods are marked as such."""
    label = METHOD_LABELS.get(method, method)
    return f"{label} (post-hoc)" if is_posthoc(method) else label


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def entry_label(entry: Entry) -> str:
    """One catalog line: head, test accuracy and faithfulness from the report."""
    if entry.error:
        return f"{entry.path.name}: unreadable"
    if entry.accuracy is None:
        return f"{head_title(entry.head)} · no report"
    return f"{head_title(entry.head)} · acc {_fmt(entry.accuracy)} · faithfulness {_fmt(entry.faithfulness, 2)}"


def group_entries(entries: Sequence[Entry]) -> dict[str, list[Entry]]:
    """Readable entries by group (dataset · backbone), in catalog order."""
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry.error is None:
            groups.setdefault(entry.group, []).append(entry)
    return groups


def input_caption(spec: InputSpec) -> str:
    """What the preprocessing does, in one line."""
    kind = "greyscale" if spec.channels == 1 else "RGB"
    resize = f", resized to {spec.size}×{spec.size}" if spec.size != spec.source_size else ""
    mean = ", ".join(f"{m:.3f}" for m in spec.mean)
    std = ", ".join(f"{s:.3f}" for s in spec.std)
    return f"{kind}, centre-cropped to {spec.source_size}×{spec.source_size}{resize}; normalised with mean ({mean}), std ({std})"


# ---------------------------------------------------------------- one input


def model_view(explanation: Explanation, spec: InputSpec, min_side: int = 224) -> np.ndarray:
    """The model's input, de-normalised to ``uint8`` ``(H, W)`` or ``(H, W, 3)``, enlarged (nearest) to ``min_side``."""
    x = explanation.model_input.detach().cpu().double()
    mean = torch.tensor(spec.mean, dtype=torch.float64).view(-1, 1, 1)
    std = torch.tensor(spec.std, dtype=torch.float64).view(-1, 1, 1)
    pixels = ((x * std + mean).clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
    factor = max(1, math.ceil(min_side / max(pixels.shape[:2])))
    pixels = pixels.repeat(factor, axis=0).repeat(factor, axis=1)
    return pixels[:, :, 0] if pixels.shape[2] == 1 else pixels


def nonfinite_warning(explanation: Explanation) -> str | None:
    """A warning if the prediction, layer scores or LOO drops hold NaN/Inf (a checkpoint loaded anyway), else None."""
    parts = {"probabilities": explanation.probs, "leave-one-layer-out drops": explanation.drops}
    parts |= {f"{method_label(m)} scores": v for m, v in explanation.scores.items()}
    bad = [name for name, values in parts.items() if not bool(torch.isfinite(values.double()).all())]
    if not bad:
        return None
    return f"Not finite (NaN or Inf): {', '.join(bad)}. The charts leave such values out; the model's weights are likely damaged."


def layer_table(explanation: Explanation) -> pd.DataFrame:
    """:meth:`Explanation.layer_table` with post-hoc score columns marked ``(post-hoc)``."""
    renames = {METHOD_LABELS.get(m, m): method_label(m) for m in explanation.scores}
    return explanation.layer_table().rename(columns=renames)


def input_faithfulness(explanation: Explanation) -> pd.DataFrame:
    """Per method on this input: kind, top-scored layer, Spearman(score, LOO drop), Deletion@1."""
    summary = explanation.summary()
    methods = list(explanation.scores)
    return pd.DataFrame(
        {
            "method": [method_label(m) for m in methods],
            "kind": ["post-hoc" if is_posthoc(m) else "intrinsic" for m in methods],
            "top layer": [explanation.layer_names[int(explanation.scores[m].argmax())] for m in methods],
            "Spearman(score, LOO drop)": summary["spearman"].tolist(),
            "Deletion@1": summary["deletion_at_1"].tolist(),
        }
    )


def score_figure(explanation: Explanation, method: str) -> go.Figure:
    """:func:`laya.app.plots.layer_scores_figure` with the method named (and post-hoc marked) in legend and title."""
    fig = layer_scores_figure(explanation, method)
    fig.update_traces(name=method_label(method), selector={"legendgroup": "score"})
    fig.update_layout(title={"text": f"{method_label(method)}<br><sup>{fig.layout.title.text}</sup>"})
    return fig


def explanation_csv(explanation: Explanation) -> str:
    return layer_table(explanation).to_csv(index=False)


def explanation_json(explanation: Explanation) -> str:
    """:meth:`Explanation.to_dict` with post-hoc columns marked and each method's kind, as JSON."""
    record = explanation.to_dict()
    record["layers"] = layer_table(explanation).to_dict("records")
    record["score_kinds"] = {method_label(m): "post-hoc" if is_posthoc(m) else "intrinsic" for m in explanation.scores}
    return json.dumps(record, indent=2)


# ---------------------------------------------------------------- heads side by side


def compare_titles(heads: Sequence[str], explanations: Sequence[Explanation]) -> list[str]:
    """Subplot titles: the head, and below it the method its scores come from."""
    return [f"{head_title(h)}<br><sup>{method_label(e.primary)}</sup>" for h, e in zip(heads, explanations)]


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
                "confidence": e.confidence,
                "layer scores": method_label(e.primary),
                "top-scored layer": e.layer_names[int(e.scores[e.primary].argmax())],
                "largest LOO drop": e.layer_names[int(drops.argmax())],
                "max LOO drop": float(drops.max()),
                "label flips": int(e.loo.flipped[0].sum()),
                "Spearman (this input)": e.spearman(e.primary),
                "test accuracy": report.accuracy if report else None,
                "macro-F1": report.data.get("macro_f1") if report else None,
                "faithfulness (test, zero)": report.faithfulness() if report else None,
            }
        )
    return pd.DataFrame(rows)


def report_caption(report: Report | None) -> str:
    """A head's dataset-level accuracy, macro-F1 and faithfulness in one line."""
    if report is None:
        return "No evaluation report."
    return (
        f"Test accuracy {_fmt(report.accuracy)} · macro-F1 {_fmt(report.data.get('macro_f1'))} · "
        f"faithfulness {_fmt(report.faithfulness(), 2)} (zero ablation)"
    )


def common_modes(mode_sets: Sequence[Sequence[str]]) -> list[str]:
    """Ablation modes every head supports, in the first head's order."""
    if not mode_sets:
        return []
    return [m for m in mode_sets[0] if all(m in modes for modes in mode_sets[1:])]


# ---------------------------------------------------------------- class-wise depth profiles


def profile_title(report: Report, kind: str) -> str:
    """Heatmap title for :meth:`Report.class_layer_profile` of ``kind`` (``scores`` or ``loo``)."""
    if kind == "loo":
        return "Mean leave-one-layer-out drop per class (zero ablation)"
    return f"Mean {method_label(report.primary_method)} per class"


def clickable_heatmap(fig: go.Figure, marker_size: int = 22) -> go.Figure:
    """``fig`` with an invisible square marker on every heatmap cell, so a click selects that cell.

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
    return fig


def clicked_class(event: object, classes: Sequence[str]) -> str | None:
    """The class of the heatmap cell clicked (``st.plotly_chart(on_select=...)`` event), or None.

    The event is ``{"selection": {"points": [{"y": class, "x": layer, ...}, ...]}}``; the last point wins.
    """
    try:
        points = event["selection"]["points"]  # type: ignore[index]
    except (KeyError, TypeError, AttributeError):
        return None
    names = [p.get("y") for p in points if isinstance(p, dict)]
    return next((n for n in reversed(names) if n in classes), None)


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
    """Dataset-wide mean LOO drop and flip rate per layer, one column pair per ablation mode."""
    table = report.loo_table()
    wide = table.pivot(index=["layer_index", "layer"], columns="mode", values=["mean_drop", "flip_rate"])
    wide = wide[[(v, m) for m in report.data["modes"] for v in ("mean_drop", "flip_rate")]]
    wide.columns = [f"{v.replace('_', ' ')} ({m})" for v, m in wide.columns]
    return wide.reset_index().drop(columns="layer_index")


def evaluate_locally(
    checkpoint: Checkpoint, limit: int | None = None, progress: Callable[[float, str], None] | None = None
) -> Report:
    """Evaluate ``checkpoint`` on its dataset's local test split (first ``limit`` inputs).

    Raises:
        DatasetNotFoundError: the dataset is not on this machine (the message says where to get it).
    """
    return Report(evaluate(checkpoint, checkpoint.load_data("test"), EvalOptions(limit=limit or None), progress))


# ---------------------------------------------------------------- faithfulness overview


def faithfulness_matrix(report: Report, mode: str = "zero") -> pd.DataFrame:
    """Methods x (Spearman faithfulness, Deletion@1) under one ablation mode."""
    table = report.faithfulness_table()
    part = table[table["mode"] == mode]
    return pd.DataFrame(
        {
            "method": [method_label(m) for m in part["method"]],
            "Spearman mean": part["spearman_mean"].tolist(),
            "Spearman std": part["spearman_std"].tolist(),
            "inputs": part["n_valid"].tolist(),
            "excluded (constant)": part["n_excluded"].tolist(),
            "Deletion@1": part["deletion_at_1"].tolist(),
            "Deletion@1 std": part["deletion_at_1_std"].tolist(),
        }
    )


def heads_table(heads: Sequence[str], reports: Sequence[Report | None]) -> pd.DataFrame:
    """Heads x dataset-level metrics (``head, accuracy, faithfulness`` feed :func:`laya.app.plots.heads_overview_figure`)."""
    rows = []
    for head, report in zip(heads, reports):
        rows.append(
            {
                "head": head_title(head),
                "accuracy": report.accuracy if report else None,
                "macro-F1": report.data.get("macro_f1") if report else None,
                "faithfulness": report.faithfulness() if report else None,
                "Deletion@1": report.deletion_at_1() if report else None,
                "scores": method_label(report.primary_method) if report else "no report",
            }
        )
    return pd.DataFrame(rows)


__all__ = [
    "MODE_HELP",
    "class_counts",
    "class_profile",
    "clickable_heatmap",
    "clicked_class",
    "common_modes",
    "compare_table",
    "compare_titles",
    "entry_label",
    "evaluate_locally",
    "explanation_csv",
    "explanation_json",
    "faithfulness_matrix",
    "global_loo",
    "global_profile",
    "group_entries",
    "head_title",
    "heads_table",
    "input_caption",
    "input_faithfulness",
    "is_posthoc",
    "layer_table",
    "method_label",
    "model_view",
    "nonfinite_warning",
    "profile_methods",
    "profile_title",
    "report_caption",
    "score_figure",
]
