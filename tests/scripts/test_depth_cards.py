"""scripts/depth_cards.py: the docs' Markdown tables over depth.json (a real report of the tiny bundled models) and
exits.json (a hand-made report whose savings and noise are known)."""

import json

from laya.analysis.depth.measured import write_exits
from laya.analysis.depth.report import DEPTH_FILE, DepthReport
from scripts.depth_cards import SHORT, depth_card, exit_card, exit_curves_card, truncation_card
from tests.analysis.depth.test_depth import analysed  # noqa: F401  (the fixture: a depth report per head)
from tests.analysis.depth.test_measured import exits_report


def test_depth_card_tables(analysed):
    _, report, _, out = analysed
    card = depth_card([out])
    assert sum(line.startswith("| ") for line in card.splitlines()) == 3 + 3  # header + one row per table
    assert f"| {report['accuracy']:.3f} |" in card and "OOD: uniform noise" in card
    assert "fitted probes" in card and "12 images 3x8x8, seed 0" in card  # readout kind and OOD sets stated
    table = DepthReport(report).table("detection")
    noise = table[table["task"] == "OOD: uniform noise"].set_index("score")
    best = noise.drop(index="msp")["auroc"].idxmax()  # energy included
    row = next(line for line in card.splitlines() if "MSP" in line and line.startswith("| "))
    assert f"best {SHORT[best]} {noise.loc[best, 'auroc']:.2f}" in row
    if report["readout_kind"] == "own classifier":  # a report from before same-kind readouts: said, not mixed in
        older = {k: v for k, v in report.items() if k not in ("prediction_depth_probes", "readout_kind")}
        stale = out.parent / "older"
        stale.mkdir(exist_ok=True)
        (stale / DEPTH_FILE).write_text(json.dumps(older))
        assert "– (rerun `python -m laya depth`)" in depth_card([stale])



def test_cards_read_each_exit_kinds_saving_against_that_kinds_noise(tmp_path):
    out = tmp_path / "setting" / "head"
    out.mkdir(parents=True)
    write_exits(exits_report(), out)
    rows = exit_card([out]).splitlines()[2:]
    # readout: t = 0.9 within 1 point; its plain timings 1.0 and 1.2 spread 0.2 / (2 * 1.1) = 9 %, so a saving
    # (a ratio of two such timings) is uncertain by 18 %: +25 % stands
    assert "| readout | 0.9 |" in rows[0] and "| +17% | +25% | ±18% |" in rows[0]
    # trained: plain timings 1.5 and 1.0 spread 0.5 / (2 * 1.25) = 20 % -> ±40 %: +5 % is within the noise
    assert "| trained mlp | 0.9 |" in rows[1] and "| +20% | within the noise | ±40% |" in rows[1]
    curves = exit_curves_card([out])
    assert "| 0.5 | 0.850, +30%, within the noise | 0.800, +40%, +50% |" in curves
    # truncation: full-model timings 1.0 and 1.2 (±18 %): the shown variant's 1.05× is within it
    assert "| 1.50× | within the noise | ±18% |" in truncation_card([out])

