import pytest
import torch

from laya.analysis.depth.readouts import (
    LayerProbes,
    Readouts,
    depth_summary,
    fit_linear,
    overthinking,
    prediction_depth,
    readout_logits,
)
from tests.model.test_heads import hidden, make


def test_prediction_depth_and_overthinking_known_answers():
    classes = torch.tensor([[1, 1, 1], [0, 1, 1], [1, 0, 1], [1, 1, 0], [2, 2, 2]])
    final = torch.tensor([1, 1, 1, 1, 0])
    assert prediction_depth(classes, final).tolist() == [1, 2, 3, 4, 4]
    labels = torch.tensor([1, 0, 2, 0, 2])
    # input 1: layer 1 said 0 (right), final 1 (wrong); input 3: layer 3 right, final wrong; input 4: all readouts right
    assert overthinking(classes, final, labels).tolist() == [False, True, False, True, True]


def test_fit_linear_separates_and_probes_round_trip():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(3).repeat(40)
    x = (
        torch.randn(120, 5, generator=g) + 4 * torch.nn.functional.one_hot(labels, 5).float() * 100
    )  # far apart, big scale
    w, b = fit_linear(x, labels, 3)
    assert ((x @ w.T + b).argmax(1) == labels).all()
    probes = LayerProbes.fit([x, x[:, :2]], labels, 3)
    again = LayerProbes.from_tensors(probes.to_tensors())
    assert torch.equal(again.logits([x, x[:, :2]]), probes.logits([x, x[:, :2]]))
    assert LayerProbes.from_tensors({}) is None
    with pytest.raises(ValueError, match="need features"):
        fit_linear(x[:0], labels[:0], 3)


def test_mix_heads_read_out_with_their_classifier_and_linear_heads_need_probes():
    head, h = make("scalarmix"), hidden()
    head.gamma.data.fill_(2.0)
    r = readout_logits(head, h)
    (z,) = head.encode(h)
    assert torch.allclose(r[:, 1], head.classifier(2.0 * z[:, 1]))
    with pytest.raises(ValueError, match="linear probes"):
        readout_logits(make("concat"), h)
    probes = LayerProbes([torch.ones(4, d, dtype=torch.float64) for d in (5, 4, 3)], torch.zeros(3, 4))
    assert readout_logits(make("concat"), h, probes).shape == (6, 3, 4)


def test_readouts_and_summary():
    probs = torch.tensor([[[0.9, 0.1], [0.2, 0.8]], [[0.6, 0.4], [0.7, 0.3]], [[0.3, 0.7], [0.4, 0.6]]]).double()
    r = Readouts(probs, final=torch.tensor([1, 0, 0]))
    assert r.depth.tolist() == [2, 1, 3]
    assert r.disagreement.tolist() == [0.5, 0.0, 1.0]
    path = r.path(0, ["a", "b"], ["x", "y"])
    assert path["class"].tolist() == ["a", "b"] and path["agrees"].tolist() == [False, True]
    table = depth_summary(r, torch.tensor([1, 0, 1]), ["a", "b"], resamples=50)
    overall = table.set_index("class").loc["all"]
    assert overall["prediction_depth"] == pytest.approx(2.0) and overall["overthinking_rate"] == pytest.approx(1 / 3)
    assert overall["overthought_errors"] == 1.0 and overall["errors"] == 1
    assert table.set_index("class").loc["a", "n"] == 1
