"""Figures and tables of the network explained by its own units (an attached network's own classifier): pure.

The other kind of explanation, a head over the layers it reads (α, leave-one-layer-out, head IG, exact maps), lives
in :mod:`laya.app.plots`, :mod:`laya.app.map_plots` and :mod:`laya.app.explanation_views`. Here, from a
:class:`~laya.analysis.network.explain.NetworkExplanation` (one input) or the stored network report (every test
input): the unit profile with the intervention and the part of each block it acted on (the whole block, or a
transformer block's attention or MLP branch) named per bar, the lens per unit, the Grad-CAM strip over the image,
the class x unit heatmap, the tuned lens against its baselines per unit, and the agreement of cheap
per-unit scores with the intervention.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from laya.analysis.network.explain import GRANULARITIES, NetworkExplanation
from laya.analysis.network.lesion import LesionStudy
from laya.analysis.network.lens import class_unit_figure, lens_profile, prediction_depth, profile_figure
from laya.analysis.network.scores import SCORE_LABELS, apart_agreement, best_score
from laya.app import palette
from laya.app.gradcam_views import CHOSEN_MARK
from laya.app.numbers import number_text
from laya.app.text import code_plain, plain

UNIT_PROFILE_TITLE = "The network by its units: drop in p(ŷ) per intervention"
LENS_TITLE = "What each unit predicts, read through the network's own classifier"
GRADCAM_TITLE = "Where each unit looked (Grad-CAM)"
LESION_TITLE = "Lesion study: test accuracy with units removed"
LESIONED = {"skip": "skipped", "resample": "resampled"}  # how a lesion study's intervention is read on a bar
METHODS = {"resample": "resample (keeps the input)", "skip": "skip (residual units; resample elsewhere)",
           "mean": "mean (a constant where a unit is not residual)"}  # fmt: skip
BRANCHES = {"block": "whole block", "attention": "attention", "mlp": "MLP"}  # the part of each block intervened on
BAR_WORDS = {"resample": "resample", "skip": "skip", "mean-ablation": "mean"}
CLASS_GROUPS = {"labels": "true class", "predictions": "predicted class"}  # how the class x unit rows group inputs
CLASS_UNIT_VALUES = {"agrees": "lens agrees with the final prediction (share)", "kl": "lens KL to the final (nats)",
                     "drop": "drop in p(ŷ) under the intervention"}  # fmt: skip
PER_ROW = 8  # Grad-CAM maps per row of the strip, at most (rows balanced: 9 units are 5 + 4, not 8 + 1)
KEPT_PANEL = "Keep the input: branch replaced"
APART_PANEL = "No shortcut: whole output replaced"
APART_REASON = ("no shortcut (a stem, a strided inverted residual, a transition; at stage granularity a layer "
                "without a module): an intervention replaces its whole output, so the network after it no longer "
                "sees the input and its drop is set by the prediction and the references more than by the input")


def kept_and_apart(keeps: Sequence[bool]) -> tuple[list[int], list[int]]:
    """The positions of the bars that keep the input and of those that do not (drawn apart, on their own axis)."""
    return [i for i, k in enumerate(keeps) if k], [i for i, k in enumerate(keeps) if not k]


def panel_widths(counts: Sequence[int], least: float = 0.15) -> list[float]:
    """Column widths of panels of ``counts`` bars each, in proportion to them, none under ``least``."""
    widths = [max(least, n / sum(counts)) for n in counts]
    return [w / sum(widths) for w in widths]


def bar_word(method: str) -> str:
    """A bar's intervention as its label shows it, with the part it acted on where the profile names one
    (``mean-ablation of attention`` -> ``mean of attention``)."""
    name, of, part = method.partition(" of ")
    return BAR_WORDS.get(name, name) + of + part


def unit_profile_table(result: NetworkExplanation, classes: Sequence[str]) -> pd.DataFrame:
    """One row per bar: ``unit`` (or stage), ``stage``, ``intervention`` (and the part of the block where the profile
    names one: ``resample of attention``), ``keeps input`` (the network after it still computes from ``x``), ``drop``
    in ``p(ŷ)``, ``prediction after`` and ``label flips``."""
    after = [classes[int(c)] for c in result.ablated]
    return pd.DataFrame({
        "unit" if result.granularity == "unit" else "stage": list(result.names),
        "stage": list(result.stages),
        "intervention": [bar_word(m) for m in result.methods],
        "keeps input": list(result.residual),
        "drop": result.drops.tolist(),
        "prediction after": after,
        "label flips": [a != classes[result.prediction] for a in after],
    })  # fmt: skip


def unit_profile_figure(result: NetworkExplanation, classes: Sequence[str]) -> go.Figure:
    """Bars of the drop in ``p(ŷ)`` per unit, named by module, each labelled with its intervention, hatched where the
    label flips; the bars that do not keep the input (their whole output replaced, :data:`APART_REASON`) in a panel
    of their own, on their own axis, grey."""
    table = unit_profile_table(result, classes)
    name = table.columns[0]
    panels = [(rows, title, colour) for rows, title, colour in
              zip(kept_and_apart(table["keeps input"]), (KEPT_PANEL, APART_PANEL), (palette.LOO_DROP, palette.NEUTRAL))
              if rows]  # fmt: skip
    figure = make_subplots(rows=1, cols=len(panels), column_widths=panel_widths([len(r) for r, _, _ in panels]),
                           subplot_titles=[t for _, t, _ in panels] if len(panels) > 1 else None,
                           horizontal_spacing=0.1)  # fmt: skip
    for column, (rows, _, colour) in enumerate(panels, start=1):
        part = table.iloc[rows]
        figure.add_bar(
            x=part[name], y=part["drop"], text=part["intervention"], textposition="outside", marker_color=colour,
            marker_pattern_shape=[palette.FLIP_PATTERN if f else "" for f in part["label flips"]],
            customdata=np.stack([part["prediction after"], part["stage"]], axis=-1), showlegend=False,
            hovertemplate="%{x} (%{customdata[1]}, %{text}): drop %{y:+.4f}, then predicts %{customdata[0]}"
                          "<extra></extra>", row=1, col=column,
        )  # fmt: skip
        figure.update_xaxes(categoryorder="array", categoryarray=list(part[name]), row=1, col=column,
                            tickangle=-45 if len(part) > 12 else 0, title_text=GRANULARITIES[result.granularity])
        figure.update_yaxes(title_text=f"drop in p({classes[result.prediction]})", row=1, col=column)
    figure.update_layout(title=UNIT_PROFILE_TITLE)
    return figure


def unit_profile_caption(result: NetworkExplanation, classes: Sequence[str]) -> str:
    """What the bars did, plainly: the intervention, the references and their source, and which units the rest of
    the network no longer sees the input after. Markdown (unit names in code spans), every name read from the
    checkpoint (classes, units, the references' source) escaped here: a trusted builder of page Markdown."""
    used = sorted({bar_word(m) for m in result.methods})
    kinds = {u.partition(" of ")[0] for u in used}
    text = (f"Each bar intervenes on one {result.granularity} of the unchanged network and runs the rest of it: the "
            f"drop in p({plain(classes[result.prediction])}) = {result.probability:.3f}. Intervention: {', '.join(used)}")
    if "resample" in kinds:
        text += (f" (a residual unit's branch, any other unit's whole output, replaced by that of each of "
                 f"{result.references:d} references, the results averaged)")
    if "mean" in kinds:
        text += f" (by its mean over {result.references:d} references)"
    if result.references:
        text += f"; references from {plain(result.reference_source)}, class-balanced and seeded."
    else:
        text += "."
    if result.branch != "block":
        text += (f" Only the {BRANCHES[result.branch]} branch of each transformer block is replaced; the rest of the "
                 "block runs on from it. Bars that name the whole block have no such branch.")  # fmt: skip
    lost = [n for n, keeps in zip(result.names, result.residual) if not keeps]
    if lost:
        shown = ", ".join(f"`{code_plain(n)}`" for n in lost[:6]) + (", …" if len(lost) > 6 else "")
        text += (f" Drawn apart, grey, on an axis of their own ({shown}): {APART_REASON}; their bars do not compare "
                 "with those that keep the input.")  # fmt: skip
    return text + " Hatched: the label flips."


def lens_table(result: NetworkExplanation, classes: Sequence[str]) -> pd.DataFrame | None:
    """:func:`~laya.analysis.network.lens.lens_profile` of the one input: per unit its class, ``p`` of the final
    prediction, KL to the final distribution, whether it agrees; None without a lens."""
    lens = result.lens
    return None if lens is None else lens_profile(lens, 0, classes, result.units)


def network_depth(result: NetworkExplanation) -> int | None:
    """The network's own prediction depth on this input (1-based unit; ``U + 1``: even the last unit disagrees),
    or None without a lens."""
    lens = result.lens
    return None if lens is None else int(prediction_depth(lens)[0])


def lens_figure(result: NetworkExplanation, classes: Sequence[str]) -> go.Figure | None:
    """The lens strip over the units (:func:`~laya.analysis.network.lens.profile_figure`), or None."""
    table = lens_table(result, classes)
    if table is None:
        return None
    return profile_figure(table, network_depth(result), f"{LENS_TITLE} ({result.lens_source})")


def depth_text(result: NetworkExplanation) -> str | None:
    """One sentence on the network's own prediction depth, named for its lens (the one depth every page of the own
    classifier shows; the depth report's probes give theirs under their name), or None without a lens."""
    depth = network_depth(result)
    if depth is None:
        return None
    named = f"Prediction depth ({result.lens_source})"
    if depth > len(result.units):
        return f"{named}: even the last unit's lens reads another class than the network's prediction."
    return (f"{named} {depth} of {len(result.units)}: from unit {result.units[depth - 1]} on, every unit's "
            "lens reads the final prediction.")  # fmt: skip


def gradcam_figure(
    result: NetworkExplanation, pixels: np.ndarray, classes: Sequence[str], chosen: str | None = None
) -> go.Figure:
    """The Grad-CAM strip: one panel per unit, the map (``[0, 1]``) over the input (``uint8 (H, W)`` or
    ``(H, W, 3)``, the model's view), in rows of at most :data:`PER_ROW`, filled evenly; the ``chosen`` unit (the
    network report's, :mod:`laya.app.gradcam_views`) framed and its title marked :data:`CHOSEN_MARK`."""
    maps = result.cam.numpy()
    U = len(result.units)
    rows = math.ceil(U / PER_ROW)
    cols = math.ceil(U / rows)
    titles = [f"{u}{CHOSEN_MARK}" if u == chosen else u for u in result.units]
    figure = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.01,
                           vertical_spacing=0.08)  # fmt: skip
    image = np.repeat(pixels[..., None], 3, axis=-1) if pixels.ndim == 2 else pixels
    for u in range(U):
        r, c = u // cols + 1, u % cols + 1
        cam = torch.nn.functional.interpolate(torch.from_numpy(maps[u])[None, None], size=image.shape[:2],
                                              mode="bilinear", align_corners=False)[0, 0].numpy()  # fmt: skip
        figure.add_trace(go.Image(z=image, hoverinfo="skip"), row=r, col=c)
        figure.add_trace(go.Heatmap(z=cam, colorscale="Jet", zmin=0, zmax=1, opacity=0.45, showscale=u == 0,
                                    colorbar={"title": "Grad-CAM"}, hovertemplate=f"{result.units[u]}: %{{z:.2f}}"
                                    "<extra></extra>"), row=r, col=c)  # fmt: skip
        if result.units[u] == chosen:  # framed: the panel's axes' domain, the image's box
            axis = "" if u == 0 else str(u + 1)
            figure.add_shape(type="rect", xref=f"x{axis} domain", yref=f"y{axis} domain", x0=0, x1=1, y0=0, y1=1,
                             line={"color": palette.ACCURACY, "width": 4})  # fmt: skip
    figure.update_xaxes(visible=False, constrain="domain")  # square pixels by narrowing a panel, never cropping it
    figure.update_yaxes(visible=False, autorange="reversed", constrain="domain")
    figure.for_each_yaxis(lambda axis: axis.update(scaleanchor=axis.anchor))  # each panel on its own x axis
    figure.update_layout(title=f"{GRADCAM_TITLE}: {classes[result.cam_class]}", height=170 * rows + 90)
    return figure


def stored_class_units(report: Any, value: str, by: str = "labels") -> pd.DataFrame | None:
    """The class x unit table the stored network report holds (``NetworkReport.tables``, written by
    ``laya network`` / ``laya attach``): the mean ``lens_agrees``, ``lens_kl`` or ``drops`` (``value``: ``agrees``,
    ``kl``, ``drop``) per class of the true ``labels`` or the ``predictions``, ``all`` first, ``n`` per row; None
    where the report has no such table."""
    field = {"agrees": "lens_agrees", "kl": "lens_kl", "drop": "drops"}[value]
    return getattr(report, "tables", {}).get(f"{field}/{'true' if by == 'labels' else 'predicted'}")


def class_unit_heatmap(
    table: pd.DataFrame, value: str, title: str | None = None, apart: Sequence[str] = ()
) -> go.Figure:
    """The class x unit heatmap (:func:`laya.analysis.network.lens.class_unit_figure`), its colour bar naming
    ``value``; for the drops, the units of ``apart`` (those that do not keep the input, :data:`APART_REASON`) in a
    heatmap of their own beside it, on their own colour scale."""
    split = [u for u in apart if u in table.columns] if value == "drop" else []
    units = [c for c in table.columns if c != "n"]
    parts = [p for p in ([u for u in units if u not in split], split) if p]

    def heatmap(columns: list[str]) -> go.BaseTraceType:
        trace = class_unit_figure(table[[*columns, "n"]], "agrees" if value == "agrees" else "kl").data[0]
        return trace.update(colorbar={"title": CLASS_UNIT_VALUES[value]},
                            colorscale=palette.HEATMAP_SCALES["loo" if value == "drop" else "scores"])  # fmt: skip

    if len(parts) == 1:
        figure = go.Figure(heatmap(parts[0]))
    else:
        figure = make_subplots(rows=1, cols=2, column_widths=panel_widths([len(p) for p in parts]),
                               subplot_titles=(KEPT_PANEL, APART_PANEL), horizontal_spacing=0.12)  # fmt: skip
        for column, part in enumerate(parts, start=1):
            trace = heatmap(part)
            trace.colorbar.update(x=figure.layout[f"xaxis{column if column > 1 else ''}"].domain[1] + 0.01,
                                  len=0.9, title_text="" if column > 1 else CLASS_UNIT_VALUES[value])  # fmt: skip
            figure.add_trace(trace, row=1, col=column)
        figure.update_yaxes(showticklabels=False, row=1, col=2)
    figure.update_yaxes(autorange="reversed")
    figure.update_layout(title=title, yaxis_title="class")
    figure.update_xaxes(title_text="unit")
    return figure


def agreement_view(agreement: pd.DataFrame) -> pd.DataFrame:
    """The report's agreement of cheap per-unit scores with an intervention's drops (``score, intervention,
    spearman_mean, ci_low, ci_high, n`` and, in a report with baselines, ``kind, units, vs_baseline, vs_low, vs_high,
    trusted``) as shown: the Spearman mean with its 95 % CI in one cell, ``n`` inputs, the units each input's
    correlation is over, and per score its margin over the better baseline and whether it is trusted ("–" in a
    report written before the baselines)."""
    rows = len(agreement)

    def column(name: str) -> pd.Series:
        return agreement[name] if name in agreement else pd.Series([math.nan] * rows, index=agreement.index)

    def interval(m: Any, lo: Any, hi: Any) -> str:
        return "–" if pd.isna(m) else f"{number_text(m)} [{number_text(lo)}, {number_text(hi)}]"

    baseline = column("kind") == "baseline"
    return pd.DataFrame({
        "per-unit score": agreement["score"].astype(str),
        "against the drops of": agreement["intervention"].astype(str),
        "per-input Spearman ρ over units, mean [95% CI]": [
            interval(m, lo, hi) for m, lo, hi in zip(agreement["spearman_mean"], agreement["ci_low"],
                                                     agreement["ci_high"])],  # fmt: skip
        "inputs": ["–" if pd.isna(n) else f"{int(n):,}" for n in agreement["n"]],
        "units per input (keep the input)": ["–" if pd.isna(u) else f"{int(u):,}" for u in column("units")],
        "beats the better baseline by [95% CI]": [
            "baseline" if b else interval(m, lo, hi)
            for b, m, lo, hi in zip(baseline, column("vs_baseline"), column("vs_low"), column("vs_high"))],
        "trusted": ["baseline" if b else "–" if pd.isna(t) else "yes" if t else "no"
                    for b, t in zip(baseline, column("trusted"))],
    })  # fmt: skip


def agreement_summary(agreement: pd.DataFrame, intervention: str, apart: Sequence[str] = ()) -> str:
    """One sentence on which cheap score to trust for ``intervention``: the best of those that beat the better
    baseline (:func:`~laya.analysis.network.scores.best_score`), or that none does; the units of ``apart`` (those
    that do not keep the input) named as left out."""
    rows = agreement[agreement["intervention"] == intervention]
    if rows.empty:
        return f"No agreement was measured against {intervention}."
    if "units" not in rows or rows["units"].isna().all():
        return ("This report predates the baselines (a per-unit constant, a random score): rerun `laya network` "
                "to see which cheap score, if any, beats what structure alone gives.")  # fmt: skip
    units = int(rows["units"].iloc[0])
    over = f"Spearman ρ over the {units} units that keep the input, within each input"
    if apart:
        over += f"; {', '.join(apart)} reported apart"
    best = best_score(rows, intervention)
    if best is None:
        return (f"No cheap score beats what structure alone gives against {intervention} ({over}): none is better "
                "than the per-unit mean drop or a random score on the same inputs, so none is to be trusted.")
    return (f"Trusted against {intervention}: {SCORE_LABELS.get(best['score'], best['score'])}, ρ "
            f"{number_text(best['spearman_mean'])}, beating the better baseline by {number_text(best['vs_baseline'])} "
            f"[{number_text(best['vs_low'])}, {number_text(best['vs_high'])}] ({over}; paired bootstrap over "
            "inputs).")  # fmt: skip


def apart_units(report: Any) -> list[str]:
    """The units of a stored network report that do not keep the input (left out of the agreement)."""
    return [u for u, keeps in zip(report.units, report.residual) if not keeps]


def apart_view(report: Any) -> pd.DataFrame | None:
    """The units a stored network report's agreement leaves out, each on its own numbers
    (:func:`~laya.analysis.network.scores.apart_agreement` on its drops under its intervention): per unit its mean
    drop over the report's inputs and, per cheap score, its Spearman ρ over the inputs with that unit's drop, each
    with its 95 % bootstrap CI; None where every unit keeps the input."""
    if not apart_units(report):
        return None
    options = getattr(report, "options", {}) or {}
    table = apart_agreement(report.scores, report.drops, report.method, torch.tensor(report.residual), report.units,
                            options.get("resamples", 1000), options.get("seed", 0))  # fmt: skip

    def interval(m: float, lo: float, hi: float) -> str:
        return "–" if pd.isna(m) else f"{number_text(m)} [{number_text(lo)}, {number_text(hi)}]"

    rows = []
    for unit, part in table.groupby("unit", sort=False):
        first = part.iloc[0]
        row = {"unit": unit, f"mean drop under {report.method} [95% CI]": interval(first["drop"], first["drop_low"],
                                                                                  first["drop_high"]),
               "inputs": f"{int(first['n']):,}"}  # fmt: skip
        for r in part.itertuples():
            row[f"{SCORE_LABELS.get(r.score, r.score)}: ρ over inputs [95% CI]"] = interval(r.spearman, r.ci_low,
                                                                                             r.ci_high)
        rows.append(row)
    return pd.DataFrame(rows)


def apart_text(report: Any) -> str | None:
    """Why the units of :func:`apart_view` are left out of the agreement and what their own numbers are, or None
    where every unit keeps the input. Markdown, the unit names escaped here."""
    apart = apart_units(report)
    if not apart:
        return None
    names = ", ".join(f"`{code_plain(u)}`" for u in apart)
    return (f"Reported apart, not ranked with the others: {names}. Each has {APART_REASON}. Below, per such unit, "
            "its own mean drop over the report's inputs and, per cheap score, the Spearman ρ over the inputs of the "
            "score at that unit with its drop (does the score follow that unit's effect from input to input?), "
            "with 95 % bootstrap CIs over inputs.")


def lens_summary_view(lens: dict[str, Any]) -> pd.DataFrame | None:
    """The stored report's tuned-lens summary (``report.lens``: per unit on its test inputs, ``units`` records of
    :func:`~laya.analysis.network.lens_fit.lens_summary`, and the fit) as shown: KL of the tuned lens, of the logit lens
    (– where it does not apply) and of the best constant distribution (– where the stored lens predates it), the
    share agreeing with the network's prediction, and the fit's epochs (run, best; – before early stopping). None
    for a report written before the summary."""
    rows = lens.get("units")
    if not rows:
        return None
    fit = lens.get("fit", {})
    exact = set(fit.get("exact", []))
    run, best = fit.get("epochs_run"), fit.get("best_epoch")

    def nats(value: Any) -> str:
        return "–" if value is None or pd.isna(value) else number_text(value)

    def share(value: Any) -> str:
        return "–" if value is None or pd.isna(value) else f"{value:.1%}"

    return pd.DataFrame({
        "unit": [r["unit"] for r in rows],
        "tuned lens KL (nats)": [nats(r["kl"]) for r in rows],
        "logit lens KL (nats)": [nats(r["logit_kl"]) for r in rows],
        "best constant KL (nats)": [nats(r["constant_kl"]) for r in rows],
        "agrees with the network": [share(r["agreement"]) + (" (identity: by construction)" if r["unit"] in exact
                                                             else "") for r in rows],
        "epochs (run, best)": ["–" if run is None or best is None or r["unit"] in exact else f"{run[i]}, {best[i]}"
                               for i, r in enumerate(rows)],
    })  # fmt: skip



def lesion_figure(study: LesionStudy, intervention: str, residual: Sequence[bool]) -> go.Figure:
    """The stored lesion study (:class:`~laya.analysis.network.lesion.LesionStudy`) in panels: per unit its test
    accuracy with ``intervention`` (``skip``, ``resample``) acting on it alone, with its bootstrap CI (a unit that got
    a fallback is hatched and its hover names the method), beside the intact accuracy; the units that do not keep the
    input (``residual`` False per unit, :data:`APART_REASON`) in a panel of their own; and accuracy over ``k`` units
    skipped at once, the mean over the draws and their range as a band."""
    rows = study.single[study.single["intervention"] == intervention].reset_index(drop=True)
    word = LESIONED.get(intervention, intervention)
    groups = [g for g in kept_and_apart(residual) if g]
    titles = [f"Each unit that keeps the input {word} alone [95 % CI]", f"{APART_PANEL}, alone [95 % CI]"]
    widths = [0.6 * w for w in panel_widths([len(g) for g in groups])] + [0.4]
    figure = make_subplots(rows=1, cols=len(groups) + 1, column_widths=widths, subplot_titles=(
        *[t for g, t in zip(kept_and_apart(residual), titles) if g],
        "k units that keep the input skipped at once (draws: mean, range)"))  # fmt: skip
    for column, group in enumerate(groups, start=1):
        part = rows.iloc[group]
        fallback = [m.split(" of ")[0] != intervention for m in part["method"]]
        figure.add_bar(x=part["unit"], y=part["accuracy"], name=f"{word} (95 % CI)", showlegend=column == 1,
                       marker_color=palette.ACCURACY if residual[group[0]] else palette.NEUTRAL,
                       marker_pattern_shape=[palette.FLIP_PATTERN if f else "" for f in fallback],
                       error_y={"type": "data", "symmetric": False, "array": part["high"] - part["accuracy"],
                                "arrayminus": part["accuracy"] - part["low"]},
                       hovertext=[f"{m}; drop {d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for m, d, lo, hi in
                                  zip(part["method"], part["drop"], part["drop_low"], part["drop_high"])],
                       row=1, col=column)  # fmt: skip
        figure.add_hline(y=study.intact[0], line_dash="dash", line_color=palette.NEUTRAL, annotation_text="intact",
                         row=1, col=column)  # fmt: skip
    curve, last = study.curve, len(groups) + 1
    if len(curve):
        figure.add_scatter(x=[*curve["k"], *curve["k"][::-1]], y=[*curve["max"], *curve["min"][::-1]], fill="toself",
                           line_width=0, fillcolor="rgba(84, 162, 75, 0.25)", name="range over the draws",
                           hoverinfo="skip", row=1, col=last)  # fmt: skip
        figure.add_scatter(x=curve["k"], y=curve["mean"], mode="lines+markers", line_color=palette.ACCURACY,
                           name="mean over the draws", row=1, col=last)  # fmt: skip
    figure.update_yaxes(title_text="test accuracy", rangemode="tozero")
    figure.update_xaxes(title_text="k", row=1, col=last)
    figure.update_layout(title=plain(f"{LESION_TITLE} ({word}; {study.n:,} test inputs)"), height=380)
    return figure


__all__ = [
    "APART_PANEL", "APART_REASON", "BAR_WORDS", "BRANCHES", "CLASS_GROUPS", "CLASS_UNIT_VALUES", "GRADCAM_TITLE",
    "KEPT_PANEL", "LENS_TITLE", "LESIONED", "LESION_TITLE", "METHODS", "UNIT_PROFILE_TITLE", "agreement_summary",
    "agreement_view", "apart_text", "apart_units", "apart_view", "bar_word", "class_unit_heatmap", "depth_text",
    "gradcam_figure", "kept_and_apart", "lens_figure", "lens_summary_view", "lens_table", "lesion_figure",
    "network_depth", "panel_widths", "stored_class_units", "unit_profile_caption", "unit_profile_figure",
    "unit_profile_table",
]  # fmt: skip
