import pytest
import torch

from laya.analysis.exits import compute_saved, exit_curve, exit_layers, exit_predictions, layer_costs
from laya.analysis.statistics import bootstrap_cis
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.classifier import LayerwiseClassifier
from laya.model.heads import HeadConfig, build_head


def test_exit_layers_and_predictions_known_answers():
    confidence = torch.tensor([[0.6, 0.9, 0.95], [0.99, 0.5, 0.7], [0.4, 0.5, 0.6]])
    layers = exit_layers(confidence, torch.tensor([0.8, 0.97]))
    assert layers.tolist() == [[1, 0, 3], [3, 0, 3]]  # 3 = no exit: the full head
    classes = torch.tensor([[0, 1, 1], [2, 2, 0], [1, 1, 1]])
    final = torch.tensor([1, 0, 2])
    assert exit_predictions(classes, final, layers).tolist() == [[1, 2, 2], [1, 2, 2]]


def test_exit_curve_and_compute_saved():
    # two inputs, two layers: input 0 confident and right at layer 1; input 1 only right at the head
    probs = torch.tensor([[[0.95, 0.05], [0.9, 0.1]], [[0.7, 0.3], [0.6, 0.4]]]).double()
    final, labels = torch.tensor([0, 1]), torch.tensor([0, 1])
    cost = torch.tensor([1.0, 3.0, 4.0], dtype=torch.float64)
    curve = exit_curve(probs, final, labels, cost, thresholds=[0.6, 0.9, 1.01], resamples=20)
    assert curve["accuracy"].tolist() == [0.5, 1.0, 1.0]  # at 0.6 input 1 exits, wrongly
    assert curve["cost"].tolist() == pytest.approx([0.25, (0.25 + 1) / 2, 1.0])
    assert curve["mean_depth"].tolist() == [1.0, 1.5, 2.0]
    assert curve["exited"].tolist() == [1.0, 0.5, 0.0]
    saved = compute_saved(curve, full_accuracy=1.0)
    assert saved["threshold"] == 0.9 and saved["saved"] == pytest.approx(0.375)
    assert compute_saved(curve.assign(accuracy=0.0), 1.0)["saved"] == 0.0


def test_layer_costs_are_measured_per_layer():
    config = BackboneConfig(name="mlp", in_channels=1, input_size=32, widths=(256, 256, 256, 256))
    backbone = build_backbone(config).eval()
    model = LayerwiseClassifier(backbone, build_head(HeadConfig(name="lastlayer"), backbone.layer_dims, 3)).eval()
    cost = layer_costs(model, torch.randn(64, 1, 32, 32), repeats=3)
    assert cost.shape == (5,) and (cost > 0).all()
    assert cost[0] < cost[3]  # one block costs less than four (the first block is the largest: 1024 inputs)
    with pytest.raises(ValueError, match="repeats"):
        layer_costs(model, torch.randn(0, 1, 32, 32))


def test_bootstrap_cis_one_interval_per_column():
    values = torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    cis = bootstrap_cis(values, resamples=200)
    assert cis[0].estimate == cis[0].low == cis[0].high == 1.0
    assert cis[1].estimate == 0.5 and cis[1].low < 0.5 < cis[1].high
