"""Class-wise depth profiles across training seeds (a setting's ``class_profiles.csv``): pure.

Each seed's class x layer profile of one head, each seed's profile over the whole test set, and per class how
stable the top layer is across seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from laya.analysis.head.profiles import seed_table
from laya.app.numbers import count_of, number_text
from laya.model.attached_files import AttachedFileError, attached_file, read_table

SEED_PROFILE_COLUMNS = ["seed", "class", "class_index", "layer", "layer_index", "mean", "count"]
ALL_CLASSES = "all classes"


CLASS_PROFILES = "class_profiles.csv"  # laya.training.suite.CLASS_PROFILES_FILE, read here without its imports
MAX_CLASS_PROFILES = 64 << 20  # a setting's is a few hundred KB (heads x seeds x classes x layers rows)


def read_class_profiles(setting: str | Path) -> pd.DataFrame | None:
    """A setting's ``class_profiles.csv``, or None where it has none. The file is untrusted
    (:mod:`laya.model.attached_files`): confined to the setting folder, at most :data:`MAX_CLASS_PROFILES` bytes,
    the columns :func:`seed_profiles` reads there, the counts and means numbers, one row per head, kind of values,
    seed, class and layer.

    Raises:
        AttachedFileError: a file that does not read or does not fit (its message names the file).
    """
    path = attached_file(Path(setting), CLASS_PROFILES, Path(setting))
    if path is None:
        return None
    table = read_table(path, CLASS_PROFILES, MAX_CLASS_PROFILES)
    missing = {*SEED_PROFILE_COLUMNS, "head", "values"} - set(table.columns)
    odd = [c for c in ("seed", "class_index", "layer_index", "mean", "count")
           if c in table and not pd.api.types.is_numeric_dtype(table[c])]  # fmt: skip
    if missing or odd:
        raise AttachedFileError(CLASS_PROFILES, f"{CLASS_PROFILES}: no column {sorted(missing)}, or the columns "
                                                f"{odd[:4]} are not numbers")  # fmt: skip
    keys = ["head", "values", "seed", "layer_index"]  # the views pivot one head's layers against its seeds
    if (table.duplicated([*keys, "class_index"]).any() or table.duplicated([*keys, "class"]).any()
            or table.groupby("layer_index")["layer"].nunique().gt(1).any()):  # fmt: skip
        raise AttachedFileError(CLASS_PROFILES, f"{CLASS_PROFILES}: a row repeated (one per head, values, seed, class "
                                                "and layer) or a layer index naming two layers")  # fmt: skip
    return table


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
    "CLASS_PROFILES",
    "MAX_CLASS_PROFILES",
    "SEED_PROFILE_COLUMNS",
    "SeedSummary",
    "read_class_profiles",
    "seed_global_profile",
    "seed_profiles",
    "seed_stability",
    "seed_summary",
]
