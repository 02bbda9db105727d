"""One meaning per colour across every page, chart and report of the dashboard.

A colour named here means the same quantity wherever it appears: blue is a layer score
(attribution), orange a leave-one-layer-out drop, red a disagreement or a flag, and so on.
Categorical series (methods, seeds, pruning criteria, detection scores) take :data:`SERIES`,
which holds none of the reserved colours; layers in depth order take :func:`depth_colors`.
"""

from __future__ import annotations

import numpy as np
import plotly.colors
from PIL import Image

ATTRIBUTION = "#4C78A8"  # a layer score: LAYA α, ScalarMix weights (intrinsic)
ATTRIBUTION_POSTHOC = "#9ECAE9"  # a post-hoc layer score (IG, Gradient × Input, Saliency): lighter blue
LOO_DROP = "#F58518"  # a leave-one-layer-out drop in p(predicted); hatched: the label flips
CONFIDENCE = "#72B7B2"  # a predicted probability / a readout that agrees with the final prediction
DISAGREE = "#E45756"  # a readout that disagrees with the final prediction; a flagged score
ACCURACY = "#54A24B"  # accuracy
FAITHFULNESS = "#B279A2"  # a faithfulness metric (Spearman, top-1, Deletion@1)
NEUTRAL = "#7F7F7F"  # reference lines, chance, the bias term
OUTLINE = "#111111"  # the selected heatmap cell
RESERVED = {
    "attribution": ATTRIBUTION,
    "post-hoc attribution": ATTRIBUTION_POSTHOC,
    "LOO drop": LOO_DROP,
    "confidence / agreeing readout": CONFIDENCE,
    "disagreeing readout / flag": DISAGREE,
    "accuracy": ACCURACY,
    "faithfulness metric": FAITHFULNESS,
    "reference": NEUTRAL,
}
SERIES = ("#1B9E77", "#7570B3", "#E7298A", "#A6761D", "#E6AB02", "#17BECF", "#666666", "#8C564B")
HEATMAP_SCALES = {"scores": "Blues", "loo": "Oranges", "signed": "RdBu"}  # sequential per meaning; diverging at 0
FLIP_PATTERN = "x"  # hatching of a LOO-drop bar whose removal flips the label


def series(i: int) -> str:
    """The ``i``-th categorical colour (cycles)."""
    return SERIES[i % len(SERIES)]


def depth_colors(n: int) -> list[str]:
    """``n`` colours from shallow (light) to deep (dark) on Viridis, for layers in depth order."""
    if n <= 1:
        return plotly.colors.sample_colorscale("Viridis", [0.5])[:n]
    return plotly.colors.sample_colorscale("Viridis", [0.9 * (1 - i / (n - 1)) for i in range(n)])


def attribution_color(posthoc: bool) -> str:
    return ATTRIBUTION_POSTHOC if posthoc else ATTRIBUTION


__all__ = [
    "ACCURACY",
    "ATTRIBUTION",
    "ATTRIBUTION_POSTHOC",
    "CONFIDENCE",
    "DISAGREE",
    "FAITHFULNESS",
    "FLIP_PATTERN",
    "HEATMAP_SCALES",
    "LOO_DROP",
    "NEUTRAL",
    "OUTLINE",
    "RESERVED",
    "SERIES",
    "attribution_color",
    "depth_colors",
    "series",
]


def favicon(size: int = 32) -> Image.Image:
    """The dashboard's page icon, drawn here: three stacked layer bars in :data:`ATTRIBUTION` on transparent,
    a ``size`` × ``size`` RGBA image. Served by the dashboard itself; a ``:material/…:`` icon would make every
    visitor's browser fetch its SVG from Google's font servers."""
    icon = np.zeros((size, size, 4), dtype=np.uint8)
    rgb = [int(ATTRIBUTION[i : i + 2], 16) for i in (1, 3, 5)]
    bar = size // 5
    for k in range(3):
        top = bar // 2 + k * (bar + bar // 2 + bar // 4)
        icon[top : top + bar, size // 8 : size - size // 8] = (*rgb, 255)
    return Image.fromarray(icon, "RGBA")
