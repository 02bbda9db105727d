"""Evaluation reports on disk: ``report.json`` plus CSV tables, and DataFrame views of them.

The dashboard reads reports through :class:`Report`; ``python -m laya evaluate`` writes them
with :func:`write_report`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from laya.analysis.attribution import METHOD_LABELS
from laya.model.checkpoint import atomic_write_json

REPORT_FILE = "report.json"


@dataclass
class Report:
    """A parsed ``report.json`` (the dict :func:`laya.analysis.evaluate.evaluate` returns)."""

    data: dict[str, Any]

    @classmethod
    def load(cls, path: str | Path) -> Report:
        path = Path(path)
        if path.is_dir():
            path = path / REPORT_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError as error:
            raise FileNotFoundError(f"no evaluation report at {path}; run `python -m laya evaluate`") from error
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON: {error}") from error
        if not isinstance(data, dict) or "faithfulness" not in data or "accuracy" not in data:
            raise ValueError(f"{path} is not a LAYA evaluation report")
        return cls(data)

    @property
    def accuracy(self) -> float:
        return self.data["accuracy"]

    @property
    def layer_names(self) -> list[str]:
        return self.data["layer_names"]

    @property
    def primary_method(self) -> str:
        return self.data["primary_method"]

    def faithfulness(self, method: str | None = None, mode: str = "zero") -> float | None:
        """Mean Spearman faithfulness of ``method`` (default: the primary one) under ``mode``."""
        entry = self.data["faithfulness"].get(mode, {}).get(method or self.primary_method)
        return None if entry is None else entry["spearman_mean"]

    def deletion_at_1(self, method: str | None = None, mode: str = "zero") -> float | None:
        """Mean Deletion@1 of ``method`` (default: the primary one) under ``mode``."""
        entry = self.data["faithfulness"].get(mode, {}).get(method or self.primary_method)
        return None if entry is None else entry["deletion_at_1"]

    def faithfulness_table(self) -> pd.DataFrame:
        """One row per (mode, method): Spearman mean/std, valid/excluded counts, Deletion@1."""
        rows = [
            {"mode": mode, "method": method, "label": METHOD_LABELS.get(method, method), **values}
            for mode, per_method in self.data["faithfulness"].items()
            for method, values in per_method.items()
        ]
        return pd.DataFrame(rows)

    def deletion_curves(self) -> pd.DataFrame:
        """Long table ``mode, method, label, k, mean_drop`` (k = layers removed)."""
        rows = [
            {"mode": mode, "method": method, "label": METHOD_LABELS.get(method, method), "k": k + 1, "mean_drop": v}
            for mode, per_method in self.data["deletion_curves"].items()
            for method, curve in per_method.items()
            for k, v in enumerate(curve)
        ]
        return pd.DataFrame(rows)

    def loo_table(self) -> pd.DataFrame:
        """``mode, layer, mean_drop, flip_rate``."""
        rows = [
            {"mode": mode, "layer": layer, "layer_index": i, "mean_drop": d, "flip_rate": f}
            for mode, v in self.data["loo"].items()
            for i, (layer, d, f) in enumerate(zip(self.layer_names, v["mean_drop"], v["flip_rate"]))
        ]
        return pd.DataFrame(rows)

    def layer_profile(self) -> pd.DataFrame:
        """``method, layer, layer_index, mean, std, count`` for every method's scores."""
        frames = [
            pd.DataFrame(records).assign(method=method) for method, records in self.data["profiles"]["layer"].items()
        ]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def class_layer_profile(self, kind: str = "scores") -> pd.DataFrame:
        """Class x layer profile of the primary method's scores (``kind="scores"``) or LOO drops (``"loo"``)."""
        key = {"scores": "class_layer", "loo": "class_loo"}[kind]
        return pd.DataFrame(self.data["profiles"][key])

    def per_class(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "class": list(self.data["per_class_accuracy"]),
                "accuracy": list(self.data["per_class_accuracy"].values()),
                "count": [self.data["class_counts"][c] for c in self.data["per_class_accuracy"]],
            }
        )

    def confusion(self) -> pd.DataFrame:
        classes = self.data["classes"]
        return pd.DataFrame(self.data["confusion_matrix"], index=classes, columns=classes)


def write_report(report: dict[str, Any], out: str | Path) -> Path:
    """Write ``report.json`` and CSV tables (faithfulness, deletion curves, LOO, profiles, per-class) to ``out``."""
    out = Path(out)
    atomic_write_json(out / REPORT_FILE, report)
    view = Report(report)
    view.faithfulness_table().to_csv(out / "faithfulness.csv", index=False)
    view.deletion_curves().to_csv(out / "deletion_curves.csv", index=False)
    view.loo_table().to_csv(out / "loo.csv", index=False)
    view.layer_profile().to_csv(out / "layer_profile.csv", index=False)
    view.class_layer_profile("scores").to_csv(out / "class_layer_profile.csv", index=False)
    if report["profiles"]["class_loo"]:
        view.class_layer_profile("loo").to_csv(out / "class_loo_profile.csv", index=False)
    view.per_class().to_csv(out / "per_class.csv", index=False)
    view.confusion().to_csv(out / "confusion_matrix.csv")
    return out


__all__ = ["REPORT_FILE", "Report", "write_report"]
