"""Which unit's Grad-CAM to trust, as the pages show it: pure figures and tables of the network report's
:class:`~laya.analysis.network.gradcam_choice.GradcamChoice` (every unit's map against a random map of its grid on
insertion, ROAD and deletion, paired over the report's test images), and the mark the Grad-CAM strip
(:func:`laya.app.network_views.gradcam_figure`) puts on the unit to use."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from laya.analysis.network.gradcam_choice import METRICS, GradcamChoice
from laya.analysis.statistics import format_diff
from laya.app import palette
from laya.app.numbers import MISSING, number_text

CHOSEN_MARK = " ✔ beats random"  # the strip's title of the unit the network report says to use
CHOICE_TITLE = "Which unit's Grad-CAM beats a random map"
METRIC_LABELS = {"insertion": "insertion AUC (higher is better)", "road": "ROAD (higher is better)",
                 "deletion": "deletion AUC (lower is better)"}  # fmt: skip


def gradcam_choice_figure(choice: GradcamChoice) -> go.Figure:
    """One panel per metric: per unit its map's value minus its random map's, with the 95 % paired bootstrap CI;
    a filled marker where the unit beats random (Holm-corrected), hollow where not; the unit to use named in the
    title."""
    table = choice.rows.assign(beats=choice.beats)
    units = list(choice.units["unit"])
    figure = make_subplots(rows=1, cols=len(METRICS), subplot_titles=[METRIC_LABELS[m] for m in METRICS],
                           horizontal_spacing=0.06)  # fmt: skip
    for col, metric in enumerate(METRICS, start=1):
        rows = table[table["metric"] == metric].set_index("unit").reindex(units)
        won = rows["beats"].eq(True).tolist()  # a unit without a row (none in a report of its own) is no win
        figure.add_scatter(
            x=units, y=rows["diff"], mode="markers", row=1, col=col, showlegend=False,
            marker={"size": 10, "color": [palette.ACCURACY if w else palette.NEUTRAL for w in won],
                    "symbol": ["circle" if w else "circle-open" for w in won]},
            error_y={"type": "data", "symmetric": False, "array": rows["diff_high"] - rows["diff"],
                     "arrayminus": rows["diff"] - rows["diff_low"], "color": palette.NEUTRAL},
            hovertext=[f"{u}: {format_diff(d, lo, hi)}, Holm p {number_text(p)}" + (" · beats random" if w else "")
                       for u, d, lo, hi, p, w in zip(units, rows["diff"], rows["diff_low"], rows["diff_high"],
                                                     rows["holm_p"], won)],
            hoverinfo="text",
        )  # fmt: skip
        figure.add_hline(y=0, line_dash="dash", line_color=palette.NEUTRAL, row=1, col=col)
    figure.update_xaxes(tickangle=-45 if len(units) > 6 else 0)
    figure.update_yaxes(title_text="unit − random (95 % paired CI)", row=1, col=1)
    figure.update_layout(title=f"{CHOICE_TITLE} ({choice.n:,} test images): {choice.chosen or 'none'}", height=380)
    return figure


def gradcam_choice_table(choice: GradcamChoice) -> pd.DataFrame:
    """One row per unit: its grid, per metric unit − random with its 95 % paired CI and ``✔`` where it beats random,
    on how many metrics it does, whether it is the one to use, and the seconds per image of its map alone (and over
    one forward)."""
    beats = choice.beats
    cells = {}
    for metric in METRICS:
        rows = choice.rows[choice.rows["metric"] == metric]
        cells[metric] = {u: format_diff(d, lo, hi) + (" ✔" if beats[i] else "")
                         for i, u, d, lo, hi in zip(rows.index, rows["unit"], rows["diff"], rows["diff_low"],
                                                    rows["diff_high"])}  # fmt: skip
    wins, chosen = choice.wins, choice.chosen
    units = choice.units
    return pd.DataFrame({
        "unit": units["unit"].astype(str),
        "grid": [f"{h}×{w}" for h, w in zip(units["h"], units["w"])],
        **{f"{m}: unit − random [95% CI]": [cells[m].get(u, MISSING) for u in units["unit"]] for m in METRICS},
        "beats random on": [f"{wins[u]} of {len(METRICS)}" for u in units["unit"]],
        "use": ["✔" if u == chosen else "" for u in units["unit"]],
        "seconds / image (its map alone)": [number_text(s) for s in units["seconds"]],
        "× one forward": [number_text(x, 2) for x in units["x_forward"]],
    })  # fmt: skip


def gradcam_choice_caption(choice: GradcamChoice) -> str:
    """What the table measured and what it can tell, in plain text (unit names are the checkpoint's: the page shows
    this through :func:`laya.app.text.shown`)."""
    chosen = choice.chosen
    verdict = (f"The unit to use is {chosen}: it beats random on the most metrics (ties: the larger lower bound of "
               "its ROAD difference)." if chosen else "No unit's map beats a random one on any metric: on this "
               "network none of these maps ranks the pixels the prediction depends on better than chance.")
    return (f"{verdict} Each unit's Grad-CAM of the predicted class against a seeded random map of the unit's own "
            f"grid, scaled and resized as the map is, on the same {choice.n:,} test images (class-balanced, seed "
            f"{choice.seed}); paired bootstrap, Holm-corrected over every unit and metric. A map that beats random "
            "ranks the pixels the network's output is sensitive to; it is not a segmentation of the object. Cost: "
            f"one forward takes {number_text(choice.forward_seconds)} s per image here, every unit's map from one pass "
            f"{number_text(choice.all_seconds)} s.")


__all__ = ["CHOICE_TITLE", "CHOSEN_MARK", "METRIC_LABELS", "gradcam_choice_caption", "gradcam_choice_figure",
           "gradcam_choice_table"]  # fmt: skip
