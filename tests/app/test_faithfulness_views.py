"""laya.app.faithfulness_views: a report's faithfulness tables as display text, checked against report.json."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from laya.analysis.report import Report
from laya.app.faithfulness_views import (
    comparisons_view,
    curves_reduction,
    faithfulness_matrix,
    heads_display,
    heads_table,
    report_caption,
)
from laya.app.labels import method_label
from laya.app.numbers import ci_text


def test_report_caption(setting: Path) -> None:
    report = Report.load(setting / "lastlayer")
    assert report_caption(None) == "No evaluation report."
    assert f"{report.accuracy:.3f}" in report_caption(report)


def test_faithfulness_tables(setting: Path) -> None:
    report = Report.load(setting / "scalarmix")
    for mode, reduction in (("renormalise", "magnitude"), ("mean", "signed")):
        matrix = faithfulness_matrix(report, mode, reduction)
        raw = report.data["faithfulness"][mode][reduction]
        assert list(matrix["method"]) == [method_label(m) for m in raw]
        for label, metric in (("top-1 agreement", "top1"), ("Deletion@1", "deletion_at_1")):
            expected = [v["status"] or ci_text(v[metric]) for v in raw.values()]
            assert matrix[f"{label} [95% CI]"].tolist() == expected
    heads = ["lastlayer", "laya"]
    reports = [Report.load(setting / h) for h in heads]
    table = heads_table([*heads, "concat"], [*reports, None])
    assert table["accuracy"].tolist()[:2] == [r.accuracy for r in reports]
    assert table["accuracy_low"][1] <= table["accuracy"][1] <= table["accuracy_high"][1]
    assert pd.isna(table["faithfulness"][0]) and table["status"][0] == "n/a (one informative layer)"
    assert table["faithfulness"][1] == pytest.approx(reports[1].faithfulness())
    assert table["scores"].tolist() == ["Integrated Gradients (baseline: training mean) (post-hoc)", "LAYA α (intrinsic)", "no report"]
    comparisons = comparisons_view(reports[1])
    assert set(comparisons["verdict"]) <= {"tie", "A > B", "A < B"} and len(comparisons) > 0


def test_display_tables_use_display_names(setting: Path) -> None:
    reports = [Report.load(setting / h) for h in ("lastlayer", "laya")]
    shown = heads_display(heads_table(["lastlayer", "laya"], reports))
    assert list(shown.columns)[:3] == ["head", "Spearman (informative layers) [95% CI]", "test accuracy [95% CI]"]
    assert not any("_" in c for c in shown.columns) and not shown.isin(["None", "nan"]).any().any()
    assert shown.iloc[0, 1] == "n/a (one informative layer)"
    matrix = faithfulness_matrix(reports[1])
    assert matrix.columns[1] == "Spearman (informative layers) [95% CI]"


def test_curves_follow_the_reduction_or_say_why_not() -> None:
    curves = pd.DataFrame({"mode": ["mean"] * 2, "reduction": ["signed", "magnitude"]})
    assert curves_reduction(curves, "mean", "magnitude") == ("magnitude", None)
    shown, note = curves_reduction(curves[:1], "mean", "magnitude")
    assert shown == "signed" and "signed post-hoc scores only" in note
