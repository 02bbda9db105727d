"""Display-ready views of laya objects for the dashboard: labels, tables, images, figures.

Pure helpers (no Streamlit): the dashboard's pages only lay out what these return, so
everything a page shows is computed here or elsewhere in ``laya`` and tested without a browser.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from laya.analysis.detection import COVARIANCE, mahalanobis_trusted
from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.profiles import seed_table
from laya.analysis.report import Report
from laya.app import palette
from laya.app.numbers import ci_cells, count_of, is_missing, number_text, percent
from laya.app.text import clicked_name, plain
from laya.app.labels import method_label, mode_label
from laya.model.checkpoint import Checkpoint, CheckpointError


# ---------------------------------------------------------------- labels


# ---------------------------------------------------------------- one input


# ---------------------------------------------------------------- heads side by side


# ---------------------------------------------------------------- class-wise depth profiles


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


# ---------------------------------------------------------------- faithfulness overview


# ---------------------------------------------------------------- uncertainty and OOD status of one input

HUGE_MAHALANOBIS = 1e3  # standardised by its training mean and std: typical in-distribution values are O(1)


def _flags(key: str, value: float, threshold: float | None) -> tuple[float, float | None, str, bool]:
    """``(shown value, shown threshold, rule, flagged)``: max softmax is stored negated (higher = more
    suspicious) and shown as the probability itself, flagged *below* its threshold."""
    flagged = threshold is not None and not is_missing(threshold) and value > threshold
    if key == "msp":
        return -value, None if threshold is None else -threshold, "flagged below", flagged
    return value, threshold, "flagged above", flagged


def detection_view(scores: Mapping[str, float], depth: Mapping | None) -> pd.DataFrame:
    """This input's error/OOD scores as read: ``score, value, rule, threshold, flagged`` (max softmax as the
    probability, flagged below its threshold, never negated); thresholds from ``depth.json``."""
    from laya.analysis.detection import SCORE_LABELS

    thresholds = (depth or {}).get("detection", {}).get("flag_thresholds", {})
    rows = []
    for key, value in scores.items():
        shown, threshold, rule, flagged = _flags(key, value, thresholds.get(key))
        rows.append({"score": SCORE_LABELS.get(key, key), "value": number_text(shown), "rule": rule,
                     "threshold": number_text(threshold), "flagged": "yes" if flagged else "no"})  # fmt: skip
    return pd.DataFrame(rows)


def prediction_depth_view(table: pd.DataFrame) -> pd.DataFrame:
    """The depth report's per-class prediction depth and overthinking as display text with 95% CIs: rates as
    percentages, ``errors`` as ``k of n``."""
    def rate(column: str) -> list[str]:
        return [f"{percent(v)} [{percent(lo)}, {percent(hi)}]" if not is_missing(v) else "–"
                for v, lo, hi in zip(table[column], table[f"{column}_low"], table[f"{column}_high"])]  # fmt: skip

    return pd.DataFrame(
        {
            "class": table["class"],
            "inputs": [f"{int(n):,}" for n in table["n"]],
            "errors": [count_of(int(e), int(n)) for e, n in zip(table["errors"], table["n"])],
            "prediction depth [95% CI]": ci_cells(table, "prediction_depth", 2),
            "overthinking rate [95% CI]": rate("overthinking_rate"),
            "errors a shallower layer got right [95% CI]": rate("overthought_errors"),
        }
    )


def best_ood_score(depth: Mapping, widths: Sequence[int] | None = None) -> tuple[str, float, int] | None:
    """``(score key, mean AUROC, OOD sets)``: the detection score with the highest mean AUROC over the depth
    report's OOD tasks (not misclassification), or None without OOD tasks. Given the layers' ``widths``,
    Mahalanobis is left out where its fit is not trusted (:func:`~laya.analysis.detection.mahalanobis_trusted`)."""
    table = pd.DataFrame(depth.get("detection", {}).get("table", []))
    if table.empty:
        return None
    ood = table[table["task"].str.startswith("OOD")]
    if widths is not None and not mahalanobis_trusted(depth.get("covariance"), depth.get("n_train", 0), widths):
        ood = ood[ood["score"] != "mahalanobis"]
    if ood.empty:
        return None
    means = ood.groupby("score", sort=False)["auroc"].mean()
    return str(means.idxmax()), float(means.max()), int(ood["task"].nunique())


def false_alarm_text(rate: float) -> str:
    """For a threshold at the in-distribution ``1 - rate`` quantile: ``the in-distribution 95th percentile: it
    flags 5 % of in-distribution test inputs by design``."""
    return (
        f"the in-distribution {100 * (1 - rate):g}th percentile: it flags {100 * rate:g} % of in-distribution "
        "test inputs by design"
    )


def ood_status(scores: Mapping[str, float], depth: Mapping, widths: Sequence[int] | None = None) -> list[str]:
    """Markdown lines on one input's uncertainty from its scores (:class:`laya.analysis.depth.InputDepth`) and the
    depth report: max softmax against its threshold, the best trusted OOD score (:func:`best_ood_score` for
    layers ``widths`` wide) with its threshold, and the false-alarm rate of those thresholds in words."""
    from laya.analysis.detection import SCORE_LABELS

    thresholds = depth.get("detection", {}).get("flag_thresholds", {})
    rate = float(depth.get("detection", {}).get("flag_rate", 0.05))
    lines = []
    if "msp" in scores:
        shown, threshold, _, flagged = _flags("msp", scores["msp"], thresholds.get("msp"))
        verdict = "**low: flagged**" if flagged else "not flagged"
        limit = f" (flagged below {threshold:.3f})" if threshold is not None else ""
        lines.append(f"Max softmax **{shown:.3f}**{limit}: {verdict}.")
    best = best_ood_score(depth, widths)
    if best is not None and best[0] in scores:
        key, auroc, sets = best
        shown, threshold, rule, flagged = _flags(key, scores[key], thresholds.get(key))
        verdict = "**flagged as out of distribution**" if flagged else "not flagged"
        limit = f", {rule} {threshold:.4g}" if threshold is not None else ""
        lines.append(
            f"Best OOD score of this model, {plain(SCORE_LABELS.get(key, key))} (mean AUROC {auroc:.3f} over "
            f"{sets} OOD "
            f"sets): **{shown:.4g}**{limit}: {verdict}."
        )
    lines.append(f"Each threshold is {false_alarm_text(rate)}, so a flag alone is no proof of an OOD input.")
    return lines


def shown_ood_scores(depth: Mapping, widths: Sequence[int] | None = None) -> tuple[str, ...]:
    """The detection scores :func:`ood_status` shows for a checkpoint with this depth report: max softmax and the
    best trusted OOD score (what Inspect asks its explanation for, so that it computes no other)."""
    best = best_ood_score(depth, widths)
    return ("msp",) if best is None or best[0] == "msp" else ("msp", best[0])


def mahalanobis_warning(
    value: float | None, n_train: int, widths: Sequence[int], covariance: str | None = None
) -> str | None:
    """A warning when the Mahalanobis score cannot be trusted, else None. A Ledoit–Wolf fit (``covariance``,
    as the depth report records it) always can; an older fit not when fitted on fewer training inputs than a
    layer has features (a singular covariance) or when the value is huge (> :data:`HUGE_MAHALANOBIS`)."""
    widest = max(widths) if widths else 0
    trusted = mahalanobis_trusted(covariance, n_train, widths)
    if value is None or covariance == COVARIANCE or (trusted and abs(value) <= HUGE_MAHALANOBIS):
        return None
    return (
        f"Mahalanobis = {value:.3g} comes from a covariance fitted on {n_train:,} training inputs for layers up to "
        f"{widest:,} features wide without shrinkage: it is singular or nearly so, and such values are not "
        "meaningful. Rerun `python -m laya depth --checkpoint DIR`: it refits with a Ledoit–Wolf covariance."
    )


# ---------------------------------------------------------------- errors said for the dashboard


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
    how many seeds agree with the most common top layer (``2 of 3``), and the largest across-seed std of a layer's mean."""
    rows = []
    for (c, name), part in profiles.groupby(["class_index", "class"], sort=True):
        wide = seed_table(part)
        tops = wide.idxmax(axis=0).tolist()
        common = max(set(tops), key=tops.count)
        spread = float(wide.std(axis=1, ddof=1).max()) if wide.shape[1] > 1 else float("nan")
        rows.append({"class": name, "seeds": wide.shape[1], "top layer per seed": ", ".join(tops),
                     "seeds agreeing on the top layer": count_of(tops.count(common), len(tops)),
                     "max across-seed std": "– (one seed)" if math.isnan(spread) else number_text(spread)})  # fmt: skip
    return pd.DataFrame(rows)


__all__ = [
    "ALL_CLASSES",
    "HUGE_MAHALANOBIS",
    "best_ood_score",
    "class_counts",
    "class_profile",
    "clickable_heatmap",
    "clicked_cell",
    "clicked_class",
    "detection_view",
    "evaluate_locally",
    "false_alarm_text",
    "global_loo",
    "global_profile",
    "mahalanobis_warning",
    "ood_status",
    "prediction_depth_view",
    "profile_methods",
    "profile_title",
    "recompute_error",
    "seed_global_profile",
    "seed_profiles",
    "seed_stability",
    "shown_ood_scores",
]
