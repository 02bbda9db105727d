"""Display-ready views of laya objects for the dashboard: labels, tables, images, figures.

Pure helpers (no Streamlit): the dashboard's pages only lay out what these return, so
everything a page shows is computed here or elsewhere in ``laya`` and tested without a browser.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from laya.analysis.attribution import DEFAULT_REDUCTION, METHOD_LABELS, POSTHOC_METHODS
from laya.analysis.depth import InputDepth
from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.explain import Explanation
from laya.analysis.faithfulness import HEADLINE_METRIC, METRIC_LABELS, METRICS
from laya.analysis.profiles import seed_table
from laya.analysis.report import Report
from laya.app.catalog import Entry
from laya.app.plots import layer_scores_figure
from laya.data.datasets import InputSpec
from laya.model.checkpoint import Checkpoint
from laya.model.heads import CROSS_HEAD_MODES, HEAD_LABELS

MODE_HELP = {
    "mean": "the layer's hidden state h_i is replaced by its training mean before the head; everything downstream "
    "(LAYA: adapters, scorer, α) is recomputed. The same intervention for every head: comparable across heads",
    "zero_input": "h_i is replaced by zeros before the head (LAYA/ScalarMix: α recomputed; Concat/LastLayer: the "
    "same as zero). The same intervention for every head: comparable across heads",
    "zero": "the paper's definition: LAYA/ScalarMix drop the term α_i z_i with α frozen (the scorer still reads "
    "layer i); Concat/LastLayer zero the input. A different intervention per head: not comparable across heads",
    "renormalise": "LAYA/ScalarMix only: the softmax is recomputed over the remaining layers' scores",
}
REDUCTION_HELP = {
    "signed": "post-hoc layer score Σ_j A_ij: signed like the LOO drop it is compared with (the headline)",
    "magnitude": "post-hoc layer score Σ_j |A_ij|: how much the layer moves the output either way",
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


def mode_label(mode: str) -> str:
    """``mean`` -> ``mean (cross-head)``, ``zero`` -> ``zero (paper, frozen α)``."""
    if mode in CROSS_HEAD_MODES:
        return f"{mode} (cross-head)"
    return {"zero": "zero (paper, frozen α)"}.get(mode, mode)


def ci_text(entry: Mapping[str, float] | None, digits: int = 3) -> str:
    """``0.812 [0.790, 0.833]`` from an ``{estimate, low, high}`` dict; ``–`` if missing."""
    if not entry or entry.get("estimate") is None:
        return "–"
    if entry.get("low") is None or entry.get("high") is None:
        return _fmt(entry["estimate"], digits)
    return f"{entry['estimate']:.{digits}f} [{entry['low']:.{digits}f}, {entry['high']:.{digits}f}]"


def entry_label(entry: Entry) -> str:
    """One catalog line: head, test accuracy and headline faithfulness (or why there is none) from the report."""
    if entry.error:
        return f"{entry.path.name}: unreadable"
    if entry.accuracy is None:
        return f"{head_title(entry.head)} · no report"
    faithfulness = entry.faithfulness_status or f"ρε {_fmt(entry.faithfulness, 2)}"
    return f"{head_title(entry.head)} · acc {_fmt(entry.accuracy)} · faithfulness {faithfulness}"


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


def nonfinite_warning(result: Explanation | InputDepth) -> str | None:
    """A warning naming the outputs that hold NaN/Inf (damaged or extreme weights, e.g. 3e38), else None.

    An :class:`Explanation`: probabilities, LOO drops, layer scores; an :class:`InputDepth`: logits,
    per-layer logit terms, readout probabilities, detection scores.
    """
    if isinstance(result, InputDepth):
        parts = {"logits": result.attribution.logits, "per-layer logit attribution": result.attribution.terms,
                 "error and OOD scores": torch.tensor(list(result.scores.values()), dtype=torch.float64)}  # fmt: skip
        if result.readouts is not None:
            parts["readout probabilities"] = result.readouts.probs
    else:
        parts = {"probabilities": result.probs, "leave-one-layer-out drops": result.drops}
        parts |= {f"{method_label(m)} scores": v for m, v in result.scores.items()}
    bad = [name for name, values in parts.items() if not bool(torch.isfinite(values.double()).all())]
    if not bad:
        return None
    return (
        f"Not finite (NaN or Inf): {', '.join(bad)}. The prediction and every number derived from these are "
        "meaningless, and the charts leave such values out; the model's weights are likely damaged or extreme."
    )


def layer_table(explanation: Explanation) -> pd.DataFrame:
    """:meth:`Explanation.layer_table` with post-hoc score columns marked ``(post-hoc)``."""
    renames = {METHOD_LABELS.get(m, m): method_label(m) for m in explanation.scores}
    return explanation.layer_table().rename(columns=renames)


def input_faithfulness(explanation: Explanation) -> pd.DataFrame:
    """Per method on this input: kind, top-scored layer, Spearman(score, LOO drop), top-1, Deletion@1 (/ oracle);
    ``n/a (one informative layer)`` where only one layer's drop exceeds ε (the ranking metrics are then None)."""
    summary = explanation.summary()
    methods = list(explanation.scores)
    return pd.DataFrame(
        {
            "method": [method_label(m) for m in methods],
            "kind": ["post-hoc" if is_posthoc(m) else "intrinsic" for m in methods],
            "top layer": [explanation.layer_names[int(explanation.scores[m].argmax())] for m in methods],
            "Spearman(score, LOO drop)": pd.to_numeric(summary["spearman"]).tolist(),  # NaN where undefined
            "top-1 agreement": pd.to_numeric(summary["top1"]).tolist(),
            "Deletion@1": summary["deletion_at_1"].tolist(),
            "Deletion@1 / oracle": pd.to_numeric(summary["deletion_at_1_norm"]).tolist(),
            "status": [explanation.status or ""] * len(methods),
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
                "test accuracy [95% CI]": ci_text(report.interval("accuracy"), 4) if report else "–",
                "macro-F1": report.data.get("macro_f1") if report else None,
                f"test {METRIC_LABELS[HEADLINE_METRIC]} (mean, signed)": headline_text(report),
            }
        )
    return pd.DataFrame(rows)


def headline_text(report: Report | None, mode: str | None = None, reduction: str = DEFAULT_REDUCTION) -> str:
    """The primary method's headline faithfulness with its CI, or its status (``n/a (one informative layer)``)."""
    if report is None:
        return "–"
    entry = report.faithfulness_entry(mode=mode, reduction=reduction)
    if entry is None:
        return "–"
    return entry["status"] or ci_text(entry[HEADLINE_METRIC])


def report_caption(report: Report | None) -> str:
    """A head's dataset-level accuracy, macro-F1 and headline faithfulness in one line, with 95% CIs."""
    if report is None:
        return "No evaluation report."
    return (
        f"Test accuracy {ci_text(report.interval('accuracy'))} · macro-F1 {ci_text(report.interval('macro_f1'))} · "
        f"{METRIC_LABELS[HEADLINE_METRIC]} {headline_text(report)} ({mode_label(report.default_mode)}, signed; "
        "95% bootstrap CIs over test inputs)"
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
        return f"Mean leave-one-layer-out drop per class ({mode_label(report.data['profiles']['class_loo_mode'])})"
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


def faithfulness_matrix(report: Report, mode: str | None = None, reduction: str = DEFAULT_REDUCTION) -> pd.DataFrame:
    """Methods x metrics under one intervention and reduction: each metric's mean with its 95% bootstrap CI,
    the status (``n/a (one informative layer)``) and the inputs with a testable ranking."""
    mode = mode or report.default_mode
    table = report.faithfulness_table()
    part = table[(table["mode"] == mode) & (table["reduction"] == reduction)]
    out = pd.DataFrame({"method": [method_label(m) for m in part["method"]], "status": part["status"].tolist(),
                        "testable inputs": part["n_testable"].tolist()})  # fmt: skip
    for metric in METRICS:
        out[METRIC_LABELS[metric]] = part[metric].tolist()
        out[f"{METRIC_LABELS[metric]} 95% CI"] = [
            "n/a" if status else ci_text({"estimate": e, "low": lo, "high": hi})
            for status, e, lo, hi in zip(part["status"], part[metric], part[f"{metric}_low"], part[f"{metric}_high"])
        ]
    return out


def comparisons_view(report: Report, mode: str | None = None, reduction: str = DEFAULT_REDUCTION) -> pd.DataFrame:
    """The report's paired bootstraps (method vs method, same inputs) under one intervention and reduction."""
    mode = mode or report.default_mode
    table = report.comparisons()
    if table.empty:
        return table
    part = table[(table["mode"] == mode) & (table["reduction_a"] == reduction)]
    return pd.DataFrame(
        {
            "metric": [METRIC_LABELS[m] for m in part["metric"]],
            "A": [method_label(m) for m in part["a"]],
            "B": [
                f"{method_label(m)}" + (f" ({r})" if r != reduction else "")
                for m, r in zip(part["b"], part["reduction_b"])
            ],
            "A − B [95% CI]": [
                ci_text({"estimate": d, "low": lo, "high": hi})
                for d, lo, hi in zip(part["difference"], part["low"], part["high"])
            ],
            "p (paired bootstrap)": part["p_value"].tolist(),
            "verdict": [
                "tie" if t else ("A > B" if d > 0 else "A < B") for t, d in zip(part["tie"], part["difference"])
            ],
        }
    )


def heads_table(
    heads: Sequence[str], reports: Sequence[Report | None], mode: str | None = None, reduction: str = DEFAULT_REDUCTION
) -> pd.DataFrame:
    """Heads x dataset-level metrics under one intervention (default: each report's cross-head ``mean``), with
    95% CI bounds (``*_low``, ``*_high``) for :func:`laya.app.plots.heads_overview_figure`."""
    rows = []
    for head, report in zip(heads, reports):
        entry = report.faithfulness_entry(mode=mode, reduction=reduction) if report else None
        acc = report.interval("accuracy") if report else None
        faith = entry[HEADLINE_METRIC] if entry and not entry["status"] else None
        rows.append(
            {
                "head": head_title(head),
                "accuracy": acc["estimate"] if acc else None,
                "accuracy_low": acc["low"] if acc else None,
                "accuracy_high": acc["high"] if acc else None,
                "macro-F1": report.data.get("macro_f1") if report else None,
                "faithfulness": faith["estimate"] if faith else None,
                "faithfulness_low": faith["low"] if faith else None,
                "faithfulness_high": faith["high"] if faith else None,
                "status": (entry["status"] or "") if entry else "no report",
                "top-1": entry["top1"]["estimate"] if faith else None,
                "Deletion@1 / oracle": entry["deletion_at_1_norm"]["estimate"] if faith else None,
                "scores": method_label(report.primary_method) if report else "no report",
            }
        )
    return pd.DataFrame(rows)


SEED_PROFILE_COLUMNS = ["seed", "class", "class_index", "layer", "layer_index", "mean", "count"]
ALL_CLASSES = "all classes"


def seed_profiles(table: pd.DataFrame, head: str, values: str = "scores") -> pd.DataFrame:
    """One head's per-seed class x layer profiles from a setting's ``class_profiles.csv``
    (:func:`laya.training.suite.class_profiles_table`): ``seed, class, class_index, layer, layer_index, mean, count``."""
    part = table[(table["head"] == head) & (table["values"] == values)]
    return part[SEED_PROFILE_COLUMNS].reset_index(drop=True)


def seed_global_profile(profiles: pd.DataFrame) -> pd.DataFrame:
    """Each seed's layer profile over the whole test set, ``mean = sum_c n_c mean_c / sum_c n_c`` over the
    classes of :func:`seed_profiles`, in the same format with class :data:`ALL_CLASSES` (index -1)."""
    totals = profiles.assign(total=profiles["mean"] * profiles["count"])
    totals = totals.groupby(["seed", "layer_index", "layer"], as_index=False)[["total", "count"]].sum()
    out = totals.assign(mean=totals["total"] / totals["count"], **{"class": ALL_CLASSES, "class_index": -1})
    return out[SEED_PROFILE_COLUMNS]


def seed_stability(profiles: pd.DataFrame) -> pd.DataFrame:
    """Per class: how stable the depth pattern is across seeds. ``seeds``, the layer each seed ranks first,
    the fraction of seeds agreeing with the most common top layer, and the largest across-seed std of a layer's mean."""
    rows = []
    for (c, name), part in profiles.groupby(["class_index", "class"], sort=True):
        wide = seed_table(part)
        tops = wide.idxmax(axis=0).tolist()
        common = max(set(tops), key=tops.count)
        spread = float(wide.std(axis=1, ddof=1).max()) if wide.shape[1] > 1 else float("nan")
        rows.append({"class": name, "seeds": wide.shape[1], "top layer per seed": ", ".join(tops),
                     "seeds agreeing on the top layer": tops.count(common) / len(tops),
                     "max across-seed std": spread})  # fmt: skip
    return pd.DataFrame(rows)


__all__ = [
    "ALL_CLASSES",
    "MODE_HELP",
    "REDUCTION_HELP",
    "ci_text",
    "class_counts",
    "class_profile",
    "clickable_heatmap",
    "clicked_class",
    "common_modes",
    "compare_table",
    "compare_titles",
    "comparisons_view",
    "entry_label",
    "evaluate_locally",
    "explanation_csv",
    "explanation_json",
    "faithfulness_matrix",
    "global_loo",
    "global_profile",
    "group_entries",
    "head_title",
    "headline_text",
    "heads_table",
    "input_caption",
    "input_faithfulness",
    "is_posthoc",
    "layer_table",
    "method_label",
    "mode_label",
    "model_view",
    "nonfinite_warning",
    "profile_methods",
    "profile_title",
    "report_caption",
    "score_figure",
    "seed_global_profile",
    "seed_profiles",
    "seed_stability",
]
