"""Evaluation reports on disk: ``report.json`` plus CSV tables, and DataFrame views of them.

The dashboard reads reports through :class:`Report`; ``python -m laya evaluate`` writes them
with :func:`write_report`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from laya.analysis.head.attribution import DEFAULT_REDUCTION, METHOD_LABELS
from laya.analysis.head.faithfulness import HEADLINE_METRIC, REPORTED_METRICS
from laya.analysis.report_record import MAX_REPORT_JSON, PER_INPUT_FILE, REPORT_FILE, checked_report
from laya.model.attached_files import attached_file, read_json
from laya.model.checkpoint import atomic_write_json, atomic_write_tensors
from laya.model.heads import DEFAULT_MODE



@dataclass
class Report:
    """A parsed ``report.json`` (the dict :func:`laya.analysis.evaluate.evaluate` returns)."""

    data: dict[str, Any]

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """The ``report.json`` in the folder ``path`` (or the file ``path``). The file is untrusted
        (:mod:`laya.model.attached_files`): confined to the setting folder, at most :data:`MAX_REPORT_JSON` bytes,
        its sections checked for their kinds (:func:`~laya.analysis.report_record.checked_report`).

        Raises:
            FileNotFoundError: there is none.
            AttachedFileError: a file that does not read, a section of the wrong kind, or a report of an older
                laya (its message names the file and what is wrong).
        """
        path = Path(path)
        directory = path if path.is_dir() else path.parent
        real = attached_file(directory, REPORT_FILE if path.is_dir() else path.name)
        if real is None:
            raise FileNotFoundError(f"no evaluation report at {path}; run `python -m laya evaluate`")
        return cls(checked_report(read_json(real, REPORT_FILE, MAX_REPORT_JSON)))

    @property
    def accuracy(self) -> float:
        return self.data["accuracy"]

    @property
    def layer_names(self) -> list[str]:
        return self.data["layer_names"]

    @property
    def primary_method(self) -> str:
        return self.data["primary_method"]

    @property
    def modes(self) -> list[str]:
        return self.data["modes"]

    @property
    def default_mode(self) -> str:
        """The headline intervention (``mean``: the same for every head) if evaluated, else the first."""
        return DEFAULT_MODE if DEFAULT_MODE in self.modes else self.modes[0]

    def interval(self, key: str) -> dict[str, float] | None:
        """``accuracy`` or ``macro_f1``: ``{estimate, low, high}`` (95% bootstrap CI over inputs)."""
        return self.data.get(f"{key}_ci")

    def faithfulness_entry(
        self, method: str | None = None, mode: str | None = None, reduction: str = DEFAULT_REDUCTION
    ) -> dict[str, Any] | None:
        """The report's entry for one method, mode and reduction (``status``, counts, each metric's CI)."""
        mode = mode or self.default_mode
        return self.data["faithfulness"].get(mode, {}).get(reduction, {}).get(method or self.primary_method)

    def faithfulness(
        self,
        method: str | None = None,
        mode: str | None = None,
        reduction: str = DEFAULT_REDUCTION,
        metric: str = HEADLINE_METRIC,
    ) -> float | None:
        """Mean ``metric`` of ``method`` (default: the primary one); None where not applicable
        (one informative layer) or not evaluated."""
        entry = self.faithfulness_entry(method, mode, reduction)
        return None if entry is None or entry[metric] is None else entry[metric]["estimate"]

    def status(
        self, method: str | None = None, mode: str | None = None, reduction: str = DEFAULT_REDUCTION
    ) -> str | None:
        """``"n/a (one informative layer)"`` where faithfulness cannot be measured, else None."""
        entry = self.faithfulness_entry(method, mode, reduction)
        return None if entry is None else entry["status"]

    def deletion_at_1(
        self, method: str | None = None, mode: str | None = None, reduction: str = DEFAULT_REDUCTION
    ) -> float | None:
        """Mean Deletion@1 normalised by the oracle (None where not applicable)."""
        return self.faithfulness(method, mode, reduction, "deletion_at_1_norm")

    def faithfulness_table(self) -> pd.DataFrame:
        """One row per (mode, reduction, method): status, counts, and for each metric its mean and 95% CI
        (``<metric>``, ``<metric>_low``, ``<metric>_high``; NaN where not applicable)."""
        rows = []
        for mode, per_reduction in self.data["faithfulness"].items():
            for reduction, per_method in per_reduction.items():
                for method, entry in per_method.items():
                    row = {"mode": mode, "reduction": reduction, "method": method,
                           "label": METHOD_LABELS.get(method, method), "status": entry["status"] or "",
                           "n_testable": entry["n_testable"], "n_spearman": entry["n_spearman"]}  # fmt: skip
                    for metric in REPORTED_METRICS:  # robust companions: absent from older reports
                        ci = entry.get(metric) or {}
                        row |= {metric: ci.get("estimate"), f"{metric}_low": ci.get("low"),
                                f"{metric}_high": ci.get("high")}  # fmt: skip
                    rows.append(row)
        return pd.DataFrame(rows)

    def comparisons(self) -> pd.DataFrame:
        """Paired bootstraps over inputs between methods: ``mode, metric, a, reduction_a, b, reduction_b,
        difference, low, high, p_value, tie``."""
        rows = [
            {k: v for k, v in c.items() if k != "difference"}
            | {
                "difference": c["difference"]["estimate"],
                "low": c["difference"]["low"],
                "high": c["difference"]["high"],
            }
            for c in self.data.get("comparisons", [])
        ]
        return pd.DataFrame(rows)

    def deletion_curves(self) -> pd.DataFrame:
        """Long table ``mode, reduction, method, label, k, mean_drop, low, high`` (k = layers removed)."""
        rows = [
            {
                "mode": mode,
                "reduction": reduction,
                "method": method,
                "label": METHOD_LABELS.get(method, method),
                "k": k + 1,
                "mean_drop": v["estimate"],
                "low": v["low"],
                "high": v["high"],
            }
            for mode, per_reduction in self.data["deletion_curves"].items()
            for reduction, per_method in per_reduction.items()
            for method, curve in per_method.items()
            for k, v in enumerate(curve)
        ]
        return pd.DataFrame(rows)

    def loo_table(self) -> pd.DataFrame:
        """``mode, layer, mean_drop, flip_rate``."""
        rows = [
            {"mode": mode, "layer": layer, "layer_index": i, "mean_drop": d["estimate"], "mean_drop_low": d["low"],
             "mean_drop_high": d["high"], "flip_rate": f["estimate"], "flip_rate_low": f["low"], "flip_rate_high": f["high"]}
            for mode, v in self.data["loo"].items()
            for i, (layer, d, f) in enumerate(zip(self.layer_names, v["mean_drop_ci"], v["flip_rate_ci"]))
        ]  # fmt: skip
        return pd.DataFrame(rows)

    def layer_profile(self, reduction: str = DEFAULT_REDUCTION) -> pd.DataFrame:
        """``method, layer, layer_index, mean, std, count, ci_low, ci_high`` for every method's scores."""
        frames = [
            pd.DataFrame(records).assign(method=method)
            for method, records in self.data["profiles"]["layer"].get(reduction, {}).items()
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


def write_report(report: dict[str, Any], out: str | Path, per_input: dict[str, Any] | None = None) -> Path:
    """Write ``report.json`` and CSV tables (faithfulness, deletion curves, LOO, profiles, per-class) to ``out``;
    with ``per_input`` (see :func:`laya.analysis.evaluate.evaluate`) also :data:`PER_INPUT_FILE`."""
    out = Path(out)
    atomic_write_json(out / REPORT_FILE, report)
    if per_input:
        atomic_write_tensors(out / PER_INPUT_FILE, per_input)
    view = Report(report)
    view.faithfulness_table().to_csv(out / "faithfulness.csv", index=False)
    view.comparisons().to_csv(out / "comparisons.csv", index=False)
    view.deletion_curves().to_csv(out / "deletion_curves.csv", index=False)
    view.loo_table().to_csv(out / "loo.csv", index=False)
    view.layer_profile().to_csv(out / "layer_profile.csv", index=False)
    view.class_layer_profile("scores").to_csv(out / "class_layer_profile.csv", index=False)
    if report["profiles"]["class_loo"]:
        view.class_layer_profile("loo").to_csv(out / "class_loo_profile.csv", index=False)
    view.per_class().to_csv(out / "per_class.csv", index=False)
    view.confusion().to_csv(out / "confusion_matrix.csv")
    return out


__all__ = ["PER_INPUT_FILE", "REPORT_FILE", "Report", "write_report"]
