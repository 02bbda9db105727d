import numpy as np
import pandas as pd
import torch

from laya.analysis.depth.readouts import Readouts
from laya.analysis.head.logit_attribution import class_mean_terms, logit_attribution, top_class_table
from laya.app import depth_plots
from tests.model.test_heads import hidden, make

CLASSES, LAYERS = ["a", "b", "c", "d"], ["x", "y", "z"]


def test_attribution_bars_stack_to_the_logits_and_class_heatmap():
    head, h = make("laya"), hidden(batch=4)
    attribution = logit_attribution(head, h)
    fig = depth_plots.attribution_figure(top_class_table(attribution, 1, CLASSES, LAYERS, k=2))
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == [*LAYERS, "bias"]
    assert np.allclose(sum(np.array(t.y) for t in bars), fig.data[-1].y)
    assert np.isclose(fig.data[-1].y[0], float(attribution.logits[1].max()))
    heat = depth_plots.class_terms_figure(class_mean_terms(attribution, attribution.logits.argmax(-1), CLASSES, LAYERS))
    assert heat.data[0].z.shape == (4, 3)


def test_readout_path_marks_disagreement_depth_and_exit():
    probs = torch.tensor([[[0.9, 0.1], [0.3, 0.7], [0.2, 0.8]]]).double()
    path = Readouts(probs, torch.tensor([1])).path(0, ["a", "b"], LAYERS)
    fig = depth_plots.readout_path_figure(path, depth=2, exit_layer=1)
    agree, disagree = fig.data[0], fig.data[1]  # one legend entry per colour
    assert agree.marker.color == depth_plots.AGREE_COLOR and list(agree.x) == ["y", "z"]
    assert disagree.marker.color == depth_plots.DISAGREE_COLOR and list(disagree.x) == ["x"]
    assert list(fig.layout.xaxis.categoryarray) == LAYERS  # layers stay in depth order
    assert fig.layout.shapes[0].x0 == 0.5 and fig.data[2].x == ("y",)
    assert fig.layout.annotations[0].text == "prediction depth 2"
    named = depth_plots.readout_path_figure(path, depth=2, depth_name="probes' prediction depth")
    assert named.layout.annotations[0].text == "probes' prediction depth 2"  # where the tuned lens's is the one shown


def test_curves():
    curve = pd.DataFrame({"threshold": [0.5, 1.01], "accuracy": [0.8, 0.9], "accuracy_low": [0.7, 0.85],
                          "accuracy_high": [0.85, 0.95], "mean_depth": [1.2, 3.0], "cost": [0.3, 1.0]})  # fmt: skip
    fig = depth_plots.exit_curve_figure(curve, 0.9)
    assert list(fig.data[0].x) == [0.3, 1.0] and np.allclose(fig.data[0].error_y.array, [0.05, 0.05])
    pruning = pd.DataFrame({"criterion": ["LOO drop"] * 2, "layers_kept": [2, 1], "accuracy": [0.9, 0.5],
                            "accuracy_low": [0.8, 0.4], "accuracy_high": [1.0, 0.6], "refit_accuracy": [0.9, 0.7],
                            "refit_low": [0.8, 0.6], "refit_high": [1.0, 0.8]})  # fmt: skip
    fig = depth_plots.pruning_figure(pruning)
    assert [t.name for t in fig.data] == ["as pruned", "classifier re-fit"] and list(fig.data[1].y) == [0.9, 0.7]
    assert fig.layout.annotations[0].text == "LOO drop"  # the criterion names its panel
    roc = pd.DataFrame({"task": ["t"] * 4, "score": ["msp", "msp", "energy", "energy"], "fpr": [0, 1, 0, 1],
                        "tpr": [0, 1, 0.5, 1]})  # fmt: skip
    fig = depth_plots.roc_figure(roc, "t")
    assert [t.name for t in fig.data[:2]] == ["max softmax (baseline)", "energy"] and list(fig.data[1].y) == [0.5, 1]


def test_measured_exit_figure_has_one_curve_per_exit_kind_and_alpha_points():
    runs = pd.DataFrame({
        "policy": ["full model", "confidence 0.9", "confidence 0.5", "α profile 0.6", "full model", "confidence 0.9"],
        "exits": ["readout"] * 4 + ["trained mlp"] * 2, "parameter": [None, 0.9, 0.5, 0.6, None, 0.9],
        "accuracy": [0.9, 0.8, 0.7, 0.75, 0.9, 0.88], "accuracy_low": [0.85, 0.75, 0.65, 0.7, 0.85, 0.85],
        "accuracy_high": [0.95, 0.85, 0.75, 0.8, 0.95, 0.9], "macs_saved": [0, 0.2, 0.4, 0.3, 0, 0.25],
        "saved_b1": [0, -0.1, 0.2, 0.1, 0, 0.3], "saved_b64": [0, 0.1, 0.3, 0.2, 0, 0.2]})  # fmt: skip
    fig = depth_plots.measured_exit_figure(runs)
    assert [t.name for t in fig.data] == ["readout: confidence", "readout: α profile", "trained mlp: confidence"]
    assert list(fig.data[0].x) == [0.2, 0.4] and list(fig.data[0].y) == [0.8, 0.7]
    assert fig.data[1].mode == "markers" and "batch 64" in fig.data[0].hovertemplate


def test_block_ablation_bars_hatch_flips_and_name_the_class_after():
    from laya.analysis.block_ablation import BlockAblation

    result = BlockAblation(torch.tensor([[0.1, 0.6, 0.0]]).double(), torch.tensor([[1, 2, 1]]), torch.tensor([1]),
                           torch.tensor([0.8]).double(), references=4)  # fmt: skip
    fig = depth_plots.block_ablation_figure(result, LAYERS, CLASSES)
    bars = fig.data[0]
    assert list(bars.x) == LAYERS and np.allclose(bars.y, [0.1, 0.6, 0.0])
    assert list(bars.marker.pattern.shape) == ["", "x", ""] and list(bars.customdata) == ["b", "c", "b"]
    assert "post hoc" in fig.layout.title.text and fig.layout.yaxis.title.text == "drop in p(b)"


def test_block_ablation_bars_name_their_intervention_where_a_block_is_skipped():
    from laya.analysis.block_ablation import BlockAblation

    result = BlockAblation(torch.tensor([[0.1, 0.6, 0.0]]).double(), torch.tensor([[1, 2, 1]]), torch.tensor([1]),
                           torch.tensor([0.8]).double(), 4, ("skip", "mean-ablation", "mean-ablation"),
                           (True, False, False))  # fmt: skip
    fig = depth_plots.block_ablation_figure(result, LAYERS, CLASSES)
    assert list(fig.data[0].text) == ["skipped", "mean-ablated", "mean-ablated"]
    assert fig.layout.title.text == depth_plots.BLOCK_SKIP_TITLE
    assert "skipped where residual" in fig.layout.xaxis.title.text
    mean = BlockAblation(*[getattr(result, f) for f in ("drops", "ablated_predictions", "prediction", "probability")],
                         4, ("mean-ablation",) * 3, (True, False, False))  # fmt: skip
    fig = depth_plots.block_ablation_figure(mean, LAYERS, CLASSES)  # every bar mean-ablated: the title says so
    assert fig.data[0].text is None and fig.layout.title.text == depth_plots.BLOCK_ABLATION_TITLE


def test_whole_test_set_figures_are_the_report_figures_and_follow_exits_json(tmp_path):
    """The figures the Depth page keeps per checkpoint are those its builders draw from ``depth.json`` and
    ``exits.json``; without measured runs there is no measured figure, and a new ``exits.json`` is a new key."""
    import shutil
    from pathlib import Path

    from laya.analysis.depth.exits_record import load_exits
    from laya.analysis.depth.report import DepthReport
    from pages.common import loading

    bundled = Path(__file__).resolve().parents[2] / "models" / "cifar10-cnn" / "laya"
    report, measured = DepthReport.load(bundled), load_exits(bundled)
    figures = depth_plots.whole_test_set_figures(report, measured)
    drawn = {"exit_curve": depth_plots.exit_curve_figure(report.table("exit_curve"), report.data["accuracy"]),
             "pruning": depth_plots.pruning_figure(report.table("pruning")),
             "class_terms": depth_plots.class_terms_figure(report.table("logit_attribution")),
             "measured": depth_plots.measured_exit_figure(pd.DataFrame(measured["runs"]))}  # fmt: skip
    for name, figure in drawn.items():
        assert getattr(figures, name).to_json() == figure.to_json(), name
    assert depth_plots.whole_test_set_figures(report, None).measured is None
    folder = tmp_path / "laya"
    folder.mkdir()
    shutil.copy(bundled / "depth.json", folder)
    for csv in bundled.glob("depth_*.csv"):
        shutil.copy(csv, folder)
    assert loading.depth_figures(folder).measured is None
    shutil.copy(bundled / "exits.json", folder)
    assert loading.depth_figures(folder).measured is not None, "exits.json written later: the figures are redrawn"
    assert loading.depth_figures(folder) is loading.depth_figures(folder), "kept, not redrawn, while the files stay"
