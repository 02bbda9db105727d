"""laya.app.verdicts: the sentences the Faithfulness and Depth analytics pages open with."""

from __future__ import annotations

import torch

from laya.analysis.depth.input_depth import InputDepth
from laya.analysis.depth.readouts import Readouts
from laya.analysis.head.logit_attribution import LogitAttribution
from laya.analysis.report import Report
from laya.app.text import unplain
from laya.app.verdicts import example_label, exit_verdict, faithfulness_verdict


def _entry(mean: float, low: float, high: float, status: str | None = None) -> dict:
    return {"status": status, "n_testable": 100, "n_spearman": 100, "spearman_eps": {"estimate": mean, "low": low, "high": high}}


def _comparison(b: str, d: float, low: float, high: float) -> dict:
    return {"mode": "mean", "metric": "spearman_eps", "a": "laya_alpha", "reduction_a": "signed", "b": b,
            "reduction_b": "signed", "p_value": 0.01, "test": "paired bootstrap", "n": 100, "tie": low <= 0 <= high,
            "difference": {"estimate": d, "low": low, "high": high}}  # fmt: skip


def test_faithfulness_verdict_ranks_and_reads_the_paired_cis():
    report = Report({"primary_method": "laya_alpha", "faithfulness": {"mean": {"signed": {
        "laya_alpha": _entry(0.594, 0.571, 0.616), "integrated_gradients": _entry(0.712, 0.693, 0.733),
        "saliency": _entry(0.600, 0.580, 0.620), "random": _entry(0.001, -0.032, 0.029),
        "input_x_gradient": _entry(0.0, 0.0, 0.0, status="one informative layer")}}},
        "comparisons": [_comparison("integrated_gradients", -0.118, -0.152, -0.089),
                        _comparison("saliency", -0.006, -0.020, 0.011),
                        _comparison("random", 0.593, 0.556, 0.630)]})  # fmt: skip
    text = unplain(faithfulness_verdict(report, "mean", "signed"))  # names are Markdown-escaped on the page
    order = [text.index(s) for s in ("Integrated Gradients", "Saliency (post-hoc) 0.600", "LAYA α (intrinsic) 0.594", "Random")]
    assert order == sorted(order)  # ranked by mean, highest first
    assert "below Integrated Gradients (baseline: training mean) (post-hoc) (-0.118 [-0.152, -0.089])" in text
    assert "ties with Saliency (post-hoc) (-0.006 [-0.020, +0.011])" in text  # the CI covers 0
    assert "above Random ranking (control) (+0.593 [+0.556, +0.630])" in text
    assert "Not ranked (no testable ranking): Gradient × Input (post-hoc)" in text
    assert "No faithfulness results" in faithfulness_verdict(report, "zero", "signed")
    assert "ordered by their means only" in text  # no per-input arrays: the pairs without LAYA α are untested
    g = torch.Generator().manual_seed(0)
    base = torch.rand(200, generator=g, dtype=torch.float64)
    shuffled = base[torch.randperm(200, generator=g)]  # the same mean, but not paired: the difference's CI covers 0
    per_input = {f"faithfulness/mean/signed/{m}/spearman_eps": v for m, v in
                 (("laya_alpha", base), ("integrated_gradients", base + 0.1), ("saliency", shuffled + 0.1),
                  ("random", base - 0.5))}  # fmt: skip
    per_input["faithfulness/mean/signed/saliency/spearman_eps"][0] = float("nan")  # an untestable input is skipped
    paired = unplain(faithfulness_verdict(report, "mean", "signed", per_input=per_input, resamples=200))
    assert "Each against the next in the ranking" in paired and "ordered by their means only" not in paired
    assert "Integrated Gradients (baseline: training mean) (post-hoc) ties with Saliency (post-hoc)" in paired


def _depth(probs: list[list[float]], final: int) -> InputDepth:
    p = torch.tensor([probs], dtype=torch.float64)  # (1, L, C)
    attribution = LogitAttribution(torch.zeros(1, p.shape[1], p.shape[2]), torch.zeros(1, p.shape[2]))
    return InputDepth(attribution, Readouts(p, torch.tensor([final])), {})


def test_exit_verdict_says_whether_the_exit_predicts_the_right_class():
    classes, layers = ["cat", "dog"], ["block 1", "block 2"]
    early_wrong = _depth([[0.05, 0.95], [0.8, 0.2]], final=0)  # block 1 is confident, and says dog
    text = unplain(exit_verdict(early_wrong, 0.9, classes, layers, label=0))
    assert text == "Exit at t = 0.9: block 1, whose readout predicts dog, not the full model's cat; wrong: the file name says cat."
    agree = unplain(exit_verdict(early_wrong, 0.5, classes, layers))  # t = 0.5: block 1 still, no label known
    assert agree.endswith("predicts dog, not the full model's cat.")
    late = _depth([[0.6, 0.4], [0.7, 0.3]], final=0)
    assert unplain(exit_verdict(late, 0.9, classes, layers, label=0)) == (
        "At t = 0.9 no readout is confident enough: the input runs the full model, which predicts cat; right: "
        "the file name says cat."
    )
    assert unplain(exit_verdict(_depth([[0.95, 0.05], [0.9, 0.1]], 0), 0.9, ["c*t", "dog"], layers)).endswith(
        "c*t, the full model's class."
    )
    hostile = "![px](http://127.0.0.1:9/p.png)"  # the page shows the verdict as Markdown (a trusted builder)
    assert "![px]" not in exit_verdict(_depth([[0.95, 0.05], [0.9, 0.1]], 0), 0.9, [hostile, "dog"], layers)
    assert "c\\*t" in exit_verdict(_depth([[0.95, 0.05], [0.9, 0.1]], 0), 0.9, ["c*t", "dog"], layers)  # escaped
    assert exit_verdict(InputDepth(early_wrong.attribution, None, {}), 0.9, classes, layers) == ""


def test_measured_exit_verdict_states_a_saving_only_beyond_its_own_noise():
    from laya.app.verdicts import measured_exit_verdict

    def run(kind, policy, t, accuracy, saved, plain_ms):
        return {"exits": kind, "policy": policy, "parameter": t, "accuracy": accuracy, "macs": 1.0,
                "macs_saved": 0.17 if t else 0.0, "saved_b1": saved, "plain_ms_b1": plain_ms}  # fmt: skip

    runs = [run("readout", "full model", None, 0.90, 0.0, 1.0), run("readout", "confidence 0.9", 0.9, 0.895, 0.23, 1.0),
            run("readout", "confidence 0.5", 0.5, 0.70, 0.40, 1.2),  # plain 1.0, 1.2: spread 9 %, a saving's ±18 %
            run("trained mlp", "full model", None, 0.90, 0.0, 1.0), run("trained mlp", "confidence 0.9", 0.9, 0.80, 0.5, 1.0)]  # fmt: skip
    text = unplain(measured_exit_verdict({"runs": runs}))
    assert text == ("readout exits at t = 0.9: accuracy 0.895 (full model 0.900), 17% of the MACs saved; wall clock "
                    "batch 1 +23% (noise ±18%). trained mlp exits: no threshold stays within 1 point of the full "
                    "model's accuracy (0.900).")  # fmt: skip
    runs[2]["plain_ms_b1"] = 1.3  # spread 0.3 / 2.3 = 13 %, ±26 %: the +23 % saving no longer exceeds it
    assert "batch 1 within the noise (noise ±26%)" in unplain(measured_exit_verdict({"runs": runs}))


def test_example_label():
    classes = ["T-shirt/top", "cat"]
    assert example_label("00-t-shirt-top.png", classes) == 0 and example_label("01-cat-wrong-1-as-t-shirt-top.png", classes) == 1
    assert example_label("cat.png", classes) is None and example_label("01-owl.png", classes) is None
    assert example_label("07-cat.png", classes) is None and example_label("00-cat.png", classes) is None


def test_faithfulness_verdict_holm_corrects_the_comparisons_stated_together():
    weak = [{**_comparison(b, 0.05, 0.001, 0.1), "p_value": 0.03} for b in ("saliency", "random", "integrated_gradients")]
    report = Report({"primary_method": "laya_alpha", "faithfulness": {"mean": {"signed": {
        m: _entry(0.5, 0.4, 0.6) for m in ("laya_alpha", "saliency", "random", "integrated_gradients")}}},
        "comparisons": weak})  # fmt: skip
    text = unplain(faithfulness_verdict(report, "mean", "signed"))
    # each CI printed excludes 0, but 3 × 0.03 = 0.09 > 0.05 after Holm: significant before correction, not after
    assert "Holm-corrected over the 3" in text and "above" not in text and "ties with" not in text
    assert text.count("significant before correction, not after, against") == 3
    report.data["comparisons"] = [{**c, "p_value": 0.01} for c in weak]  # 3 × 0.01 = 0.03: all hold
    assert unplain(faithfulness_verdict(report, "mean", "signed")).count("above") == 3
