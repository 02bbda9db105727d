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


def test_an_attached_networks_pre_logits_readout_is_its_own_classifier(attached_resnet, image_folder):
    """The own head's last readout is the network's classifier: its prediction is the network's on every input
    (the probe it replaces, a second classifier fitted to the same features, disagreed); the layers before read
    through the probes; the depth report attach wrote says so, its pre-logits readout as accurate as the network."""
    from laya.analysis.depth.fit import DepthFit, head_pass
    from laya.analysis.depth.input_depth import input_depth
    from laya.analysis.depth.readouts import KINDS, NETWORK, PROBES, readout_source
    from laya.analysis.depth.report import DepthReport
    from laya.data.datasets import load_dataset
    from laya.model.checkpoint import load_checkpoint
    from laya.model.own_head import OWN

    own = load_checkpoint(attached_resnet.heads[OWN])
    test = load_dataset(str(image_folder), "test", image_size=32)
    x = own.preprocess(torch.stack([test.image(i) for i in range(len(test.labels))]))
    with torch.no_grad():
        hidden = own.model.backbone(x)
        network = own.model(x).logits.argmax(-1)
    probes = DepthFit.load(own.path).probes
    logits, kind = readout_source(own.model.head, hidden, probes, network=True)
    assert kind == NETWORK and torch.equal(logits[:, -1].argmax(-1), network)
    assert torch.equal(logits[:, :-1], probes.logits(hidden)[:, :-1])
    assert readout_source(own.model.head, hidden, probes, own=False, network=True)[1] == PROBES  # every head alike
    passed = head_pass(own, hidden, probes)
    assert passed.readout_kind == NETWORK and torch.equal(passed.readouts.classes[:, -1], network)
    assert (passed.readouts.depth <= len(hidden)).all()  # the last readout is the prediction: depth at most L
    one = input_depth(own, test.image(0), DepthFit.load(own.path))
    assert one.readout_kind == NETWORK and int(one.readouts.classes[0, -1]) == one.prediction
    report = DepthReport.load(own.path).data
    assert report["readout_kind"] == NETWORK and report["readout_source"] == KINDS[NETWORK]
    assert report["readout_accuracy"][-1]["estimate"] == pytest.approx(report["accuracy"])
