import json

import numpy as np
import pytest
import torch

from laya.analysis.evaluate import EvalOptions, classification_metrics, evaluate
from laya.analysis.report import Report, write_report
from laya.data.datasets import load_dataset
from laya.data.features import hidden_states
from laya.model.checkpoint import load_checkpoint


def test_classification_metrics_by_hand():
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    preds = torch.tensor([0, 1, 1, 1, 2, 0])
    m = classification_metrics(labels, preds, ("a", "b", "c"))
    assert m["accuracy"] == pytest.approx(4 / 6)
    # F1: a = 2*1/(2+2) = 0.5, b = 2*2/(2+3) = 0.8, c = 2*1/(2+1) = 2/3
    assert m["macro_f1"] == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
    assert m["per_class_accuracy"] == {"a": 0.5, "b": 1.0, "c": 0.5}
    assert m["confusion_matrix"] == [[1, 1, 0], [0, 2, 0], [1, 0, 1]]


@pytest.fixture(scope="module")
def laya_report(tiny_models, image_folder):
    ck = load_checkpoint(tiny_models / "colours-mlp" / "laya")
    test = load_dataset(str(image_folder), "test", image_size=8)
    return ck, test, evaluate(ck, test, EvalOptions(ig_steps=8, batch_size=7))


def test_report_numbers_agree_with_the_model(laya_report):
    ck, test, report = laya_report
    hidden = hidden_states(ck.model.backbone, ck.preprocess, test.images)
    with torch.no_grad():
        out = ck.model.head(hidden)
    assert report["accuracy"] == pytest.approx((out.logits.argmax(-1) == test.labels).double().mean().item())
    assert report["modes"] == ["mean", "zero_input", "zero", "renormalise"]
    assert report["reductions"] == ["signed", "magnitude"]
    assert report["methods"] == [
        "laya_alpha", "integrated_gradients", "integrated_gradients_zero", "input_x_gradient", "saliency", "random"
    ]  # fmt: skip
    options = report["options"]
    assert options["ig_baselines"] == {"integrated_gradients": "mean", "integrated_gradients_zero": "zero"}
    assert options["ig_rule"] == "gausslegendre" and "8-node Gauss–Legendre" in options["ig"]
    alpha_profile = Report(report).layer_profile().query("method == 'laya_alpha'")
    assert alpha_profile["mean"].tolist() == pytest.approx(out.layer_scores.mean(0).tolist(), abs=1e-6)
    acc = report["accuracy_ci"]
    assert acc["low"] <= report["accuracy"] == acc["estimate"] <= acc["high"]
    for mode in report["modes"]:
        for reduction in report["reductions"]:
            entry = report["faithfulness"][mode][reduction]["laya_alpha"]
            assert entry["n_spearman"] <= len(test) and entry["n_testable"] <= len(test)
            if entry["status"] is None:
                ci = entry["spearman_eps"]
                assert -1 <= ci["low"] <= ci["estimate"] <= ci["high"] <= 1
                assert 0 <= entry["top1"]["estimate"] <= 1
        assert len(report["deletion_curves"][mode]["signed"]["laya_alpha"]) == 3
    counts = Report(report).class_layer_profile().query("subset == 'all' and layer_index == 0")["count"]
    assert counts.sum() == len(test)


def test_deletion_ratio_has_its_median_and_trimmed_mean_beside_the_mean(laya_report):
    from scipy.stats import trim_mean

    ck, test, report = laya_report
    per_input: dict = {}
    evaluate(ck, test, EvalOptions(ig_steps=8, batch_size=7, modes=("mean",)), per_input=per_input)
    for method in ("laya_alpha", "input_x_gradient"):
        ratios = per_input[f"faithfulness/mean/signed/{method}/deletion_at_1_norm"].numpy()
        ratios = ratios[~np.isnan(ratios)]
        entry = report["faithfulness"]["mean"]["signed"][method]
        assert entry["deletion_at_1_norm"]["estimate"] == pytest.approx(ratios.mean())
        median, trimmed = entry["deletion_at_1_norm_median"], entry["deletion_at_1_norm_trimmed"]
        assert median["estimate"] == pytest.approx(np.median(ratios))
        assert trimmed["estimate"] == pytest.approx(trim_mean(ratios, 0.05))
        assert median["low"] <= median["estimate"] <= median["high"]
    assert report["options"]["trim"] == 0.05
    table = Report(report).faithfulness_table()
    assert {"deletion_at_1_norm_median", "deletion_at_1_norm_trimmed_low"} <= set(table.columns)


def test_report_is_strict_json_and_written_with_tables(laya_report, tmp_path):
    _, _, report = laya_report
    out = write_report(report, tmp_path)
    json.loads((out / "report.json").read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    for name in ("faithfulness.csv", "deletion_curves.csv", "loo.csv", "layer_profile.csv", "class_layer_profile.csv",
                 "class_loo_profile.csv", "per_class.csv", "confusion_matrix.csv"):  # fmt: skip
        assert (out / name).stat().st_size > 0
    view = Report.load(out)
    entry = report["faithfulness"]["mean"]["signed"]["laya_alpha"]
    assert view.faithfulness("laya_alpha") == (entry["spearman_eps"] or {}).get("estimate")
    assert set(view.faithfulness_table()["mode"]) == {"zero", "zero_input", "mean", "renormalise"}


def test_lastlayer_report_says_not_applicable_never_one(tiny_models):
    report = Report.load(tiny_models / "colours-mlp" / "lastlayer")
    for mode in report.modes:
        for method in report.data["methods"]:
            assert report.status(method, mode) == "n/a (one informative layer)"
            assert report.faithfulness(method, mode) is None
    table = report.faithfulness_table()
    assert table["spearman"].isna().all() and (table["status"] == "n/a (one informative layer)").all()


def test_evaluation_is_reproducible_and_batch_size_invariant(laya_report):
    ck, test, report = laya_report
    again = evaluate(ck, test, EvalOptions(ig_steps=8, batch_size=7))
    strip = lambda r: {k: v for k, v in r.items() if k != "timing"}
    assert strip(again) == strip(report)  # same numbers and the same CIs for the same seed
    other = evaluate(ck, test, EvalOptions(ig_steps=8, batch_size=100))
    for reduction in ("signed", "magnitude"):
        for method in ("laya_alpha", "integrated_gradients", "saliency"):
            a = report["faithfulness"]["mean"][reduction][method]
            b = other["faithfulness"]["mean"][reduction][method]
            assert a["n_testable"] == b["n_testable"]
            if a["status"] is None:
                assert a["top1"]["estimate"] == pytest.approx(b["top1"]["estimate"], abs=1e-9)


def test_cli_evaluate_reproduces_the_bundled_report(tiny_models, image_folder, tmp_path):
    from laya.cli import main

    bundled = tiny_models / "colours-mlp" / "laya"
    assert main(["evaluate", "--checkpoint", str(bundled), "--dataset", str(image_folder), "--ig-steps", "4",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    ours, theirs = Report.load(tmp_path).data, Report.load(bundled).data
    for key in ("faithfulness", "comparisons", "deletion_curves", "loo", "accuracy_ci", "macro_f1_ci", "profiles"):
        assert ours[key] == theirs[key], key


def test_limit_and_class_mismatch(tiny_models, image_folder):
    ck = load_checkpoint(tiny_models / "colours-mlp" / "concat")
    test = load_dataset(str(image_folder), "test", image_size=8)
    report = evaluate(ck, test, EvalOptions(ig_steps=4, limit=5, modes=("zero", "renormalise")))
    assert report["dataset"]["n"] == 5 and report["modes"] == ["zero"]  # concat has no renormalise mode
    assert report["profiles"]["class_loo_mode"] == report["headline"]["mode"] == "zero"  # `mean` not evaluated
    assert report["primary_method"] == "integrated_gradients"
    with pytest.raises(ValueError, match="none of the ablation modes"):
        evaluate(ck, test, EvalOptions(limit=5, modes=("renormalise",)))
    test.classes = ("x", "y", "z")
    with pytest.raises(ValueError, match="differ from the checkpoint"):
        evaluate(ck, test)


def test_report_loading_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m laya evaluate"):
        Report.load(tmp_path)
    (tmp_path / "report.json").write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a LAYA evaluation report"):
        Report.load(tmp_path)


def test_a_pair_undefined_on_every_input_is_not_a_comparison(tiny_models, image_folder, tmp_path, monkeypatch):
    """A faithfulness column with no defined value (constant scores throughout, as random weights give: the breadth
    run's RepViT and Inception v3) has no paired test: left out of the comparisons, not written as a null p-value
    that the report's reader refuses."""
    from laya.analysis import evaluate as evaluate_module
    from laya.analysis.statistics import Interval, PairedComparison

    real = evaluate_module.paired_mean_differences

    def first_undefined(values, pairs, resamples=1000, seed=0):
        results = real(values, pairs, resamples, seed)
        nan = float("nan")
        return [PairedComparison(Interval(nan, nan, nan, 0.95), nan, "paired bootstrap", 0), *results[1:]]

    ck = load_checkpoint(tiny_models / "colours-mlp" / "laya")
    test = load_dataset(str(image_folder), "test", image_size=8)
    options = EvalOptions(ig_steps=2, resamples=50)
    whole = evaluate(ck, test, options)["comparisons"]
    monkeypatch.setattr(evaluate_module, "paired_mean_differences", first_undefined)
    report = evaluate(ck, test, options)
    assert report["comparisons"] == whole[1:]
    assert len(Report.load(write_report(report, tmp_path)).comparisons()) == len(whole) - 1
