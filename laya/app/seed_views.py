"""Class-wise depth profiles across training seeds (a setting's ``class_profiles.csv``): pure.

Each seed's class x layer profile of one head, each seed's profile over the whole test set, and per class how
stable the top layer is across seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from laya.analysis.head.profiles import seed_table
from laya.app.numbers import count_of, number_text

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


@dataclass(frozen=True)
class SeedSummary:
    """One head's per-seed profiles of one kind of value, with what a page shows of them for all classes at once
    (the same for every input and class chosen, so a page may keep it per setting): ``per_seed``
    (:func:`seed_profiles`, empty where the head has no seeds in the file), each class's ``stability``
    (:func:`seed_stability`), the ``whole`` test set's profile per seed (:func:`seed_global_profile`) and its
    ``whole_stability``; the last three None where ``per_seed`` is empty."""

    per_seed: pd.DataFrame
    stability: pd.DataFrame | None
    whole: pd.DataFrame | None
    whole_stability: pd.DataFrame | None


def seed_summary(table: pd.DataFrame, head: str, values: str = "scores") -> SeedSummary:
    """:class:`SeedSummary` of ``head``'s ``values`` in a setting's ``class_profiles.csv`` ``table``."""
    per_seed = seed_profiles(table, head, values)
    if per_seed.empty:
        return SeedSummary(per_seed, None, None, None)
    whole = seed_global_profile(per_seed)
    return SeedSummary(per_seed, seed_stability(per_seed), whole, seed_stability(whole))


__all__ = [
    "ALL_CLASSES",
    "SEED_PROFILE_COLUMNS",
    "SeedSummary",
    "seed_global_profile",
    "seed_profiles",
    "seed_stability",
    "seed_summary",
]
