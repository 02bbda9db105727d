"""Depth profiles: how layer scores (or LOO drops) distribute over layers, globally and per class.

All functions take per-input values ``(N, L)`` and return long-form pandas DataFrames, so
the dashboard, the CSV reports and the figures share one table layout:
``class, layer, layer_index, subset, mean, std, count``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd
import torch
from torch import Tensor

Subset = Literal["all", "correct", "incorrect"]
SUBSETS: tuple[str, ...] = ("all", "correct", "incorrect")


def _np(x: Tensor | np.ndarray) -> np.ndarray:
    return np.asarray(torch.as_tensor(x).detach().cpu().double()) if isinstance(x, Tensor) else np.asarray(x)


def layer_profile(values: Tensor | np.ndarray, layer_names: Sequence[str]) -> pd.DataFrame:
    """Global mean and std per layer: ``layer, layer_index, mean, std, count``."""
    v = _np(values)
    return pd.DataFrame(
        {
            "layer": list(layer_names),
            "layer_index": np.arange(len(layer_names)),
            "mean": v.mean(axis=0) if len(v) else np.full(len(layer_names), np.nan),
            "std": v.std(axis=0) if len(v) else np.full(len(layer_names), np.nan),
            "count": len(v),
        }
    )


def class_layer_profile(
    values: Tensor | np.ndarray,
    labels: Tensor | np.ndarray,
    predictions: Tensor | np.ndarray,
    classes: Sequence[str],
    layer_names: Sequence[str],
    subsets: Sequence[Subset] = SUBSETS,
) -> pd.DataFrame:
    """Class x layer mean/std of ``values`` for inputs of each *true* class, per subset.

    ``subset``: ``all`` inputs, those classified ``correct``ly, or ``incorrect``ly.
    Cells with no inputs have ``count`` 0 and NaN mean/std.
    """
    v, y, p = _np(values), _np(labels).astype(int), _np(predictions).astype(int)
    rows = []
    for subset in subsets:
        chosen = {"all": np.ones_like(y, dtype=bool), "correct": y == p, "incorrect": y != p}[subset]
        for c, name in enumerate(classes):
            block = v[chosen & (y == c)]
            for i, layer in enumerate(layer_names):
                rows.append(
                    {
                        "class": name,
                        "class_index": c,
                        "layer": layer,
                        "layer_index": i,
                        "subset": subset,
                        "mean": float(block[:, i].mean()) if len(block) else np.nan,
                        "std": float(block[:, i].std()) if len(block) else np.nan,
                        "count": len(block),
                    }
                )
    return pd.DataFrame(rows)


def heatmap_table(profile: pd.DataFrame, subset: Subset = "all", value: str = "mean") -> pd.DataFrame:
    """Wide class x layer table of ``value`` for one subset (rows and columns in model order)."""
    part = profile[profile["subset"] == subset]
    table = part.pivot(index="class_index", columns="layer_index", values=value)
    classes = part.drop_duplicates("class_index").set_index("class_index")["class"]
    layers = part.drop_duplicates("layer_index").set_index("layer_index")["layer"]
    table.index = [classes[i] for i in table.index]
    table.columns = [layers[i] for i in table.columns]
    return table


def seed_table(profile: pd.DataFrame) -> pd.DataFrame:
    """One class's per-seed profile (``seed, layer, layer_index, mean`` rows) as a wide layer x seed table of
    ``mean``, rows named by layer in model order."""
    table = profile.pivot(index="layer_index", columns="seed", values="mean").sort_index()
    layers = profile.drop_duplicates("layer_index").set_index("layer_index")["layer"]
    table.index = [layers[i] for i in table.index]
    return table


__all__ = ["SUBSETS", "Subset", "class_layer_profile", "heatmap_table", "layer_profile", "seed_table"]
