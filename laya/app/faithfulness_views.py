"""A head's faithfulness from its evaluation report (:class:`~laya.analysis.report.Report`) as display text: pure.

The methods x metrics matrix under one intervention and reduction, the paired comparisons between methods, the
heads x metrics table (numbers for the figure, text for the page), the headline with its 95 % CI and the
one-line caption that quotes it, and which reduction's deletion curves the report holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from laya.analysis.head.attribution import DEFAULT_REDUCTION
from laya.analysis.head.faithfulness import HEADLINE_METRIC, METRIC_LABELS, REPORTED_METRICS
from laya.analysis.report import Report
from laya.app.labels import head_title, method_label, mode_label
from laya.app.numbers import ci_cells, ci_text, number_text, p_text


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


def faithfulness_matrix(report: Report, mode: str | None = None, reduction: str = DEFAULT_REDUCTION) -> pd.DataFrame:
    """Methods x metrics under one intervention and reduction, as display text: the headline metric first,
    each metric as ``mean [95% bootstrap CI]`` (the status, ``n/a (one informative layer)``, where a ranking
    cannot be tested) and the inputs with a testable ranking."""
    mode = mode or report.default_mode
    table = report.faithfulness_table()
    part = table[(table["mode"] == mode) & (table["reduction"] == reduction)].reset_index(drop=True)
    out = pd.DataFrame({"method": [method_label(m) for m in part["method"]]})
    for metric in (HEADLINE_METRIC, *(m for m in REPORTED_METRICS if m != HEADLINE_METRIC)):
        cells = ci_cells(part, metric)
        out[f"{METRIC_LABELS[metric]} [95% CI]"] = [s or c for s, c in zip(part["status"], cells)]
    out["testable inputs"] = [f"{int(n):,}" for n in part["n_testable"]]
    return out


def curves_reduction(curves: pd.DataFrame, mode: str, reduction: str) -> tuple[str, str | None]:
    """``(reduction shown, note)``: the deletion curves of ``reduction`` when the report holds them, else the
    reduction it does hold (``evaluate`` computes curves for the headline reduction only) and a note saying so."""
    held = list(dict.fromkeys(curves.loc[curves["mode"] == mode, "reduction"])) if not curves.empty else []
    if reduction in held or not held:
        return reduction, None
    return held[0], (
        f"The report holds deletion curves for {held[0]} post-hoc scores only (`python -m laya evaluate` computes them "
        f"for the headline reduction), so the curves below use {held[0]} scores, not {reduction}."
    )


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
            "p (paired bootstrap)": [p_text(p) for p in part["p_value"]],
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
                "Deletion@1 / oracle (median)": (entry.get("deletion_at_1_norm_median") or {}).get("estimate")
                if faith
                else None,
                "scores": method_label(report.primary_method) if report else "no report",
            }
        )
    return pd.DataFrame(rows)


def heads_display(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`heads_table` as display text, the headline first: ``0.59 [0.57, 0.62]`` cells, ``–`` for missing."""
    return pd.DataFrame(
        {
            "head": table["head"],
            f"{METRIC_LABELS[HEADLINE_METRIC]} [95% CI]": [
                s or c for s, c in zip(table["status"], ci_cells(table, "faithfulness"))
            ],
            "test accuracy [95% CI]": ci_cells(table, "accuracy"),
            "macro-F1": [number_text(v) for v in table["macro-F1"]],
            "top-1 agreement": [number_text(v) for v in table["top-1"]],
            "Deletion@1 / oracle": [number_text(v) for v in table["Deletion@1 / oracle"]],
            "layer scores": table["scores"],
        }
    )


__all__ = [
    "comparisons_view",
    "curves_reduction",
    "faithfulness_matrix",
    "headline_text",
    "heads_display",
    "heads_table",
    "report_caption",
]
