"""Known answers for the per-layer lens: KL, entropy, rank and probability by hand."""

import math

import pytest
import torch

from laya.analysis.lens import Lens, class_trajectories, lens, trajectory_figure
from laya.analysis.readouts import LayerProbes
from tests.model.test_heads import DIMS, hidden, make


def test_metrics_by_hand():
    # one input, two layers, three classes; final = class 0 with p = (0.5, 0.25, 0.25)
    p = torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64)
    q = torch.tensor([[[0.5, 0.25, 0.25], [0.2, 0.7, 0.1]]], dtype=torch.float64)
    lens_ = Lens(q.log(), p.log(), "head classifier")
    assert lens_.kl[0, 0] == pytest.approx(0, abs=1e-12)
    assert lens_.kl[0, 1] == pytest.approx(0.5 * math.log(0.5 / 0.2) + 0.25 * math.log(0.25 / 0.7)
                                           + 0.25 * math.log(0.25 / 0.1))  # fmt: skip
    assert lens_.entropy[0, 1] == pytest.approx(-(0.2 * math.log(0.2) + 0.7 * math.log(0.7) + 0.1 * math.log(0.1)))
    assert lens_.rank.tolist() == [[1, 2]] and lens_.prob[0].tolist() == pytest.approx([0.5, 0.2])
    probs, top = lens_.top_k(2)
    assert top[0, 1].tolist() == [1, 0] and probs[0, 1].tolist() == pytest.approx([0.7, 0.2])
    table = lens_.table(0, ["a", "b", "c"], ["l1", "l2"], k=2)
    assert table["top"].tolist() == ["a 0.50, b 0.25", "b 0.70, a 0.20"] and table["rank"].tolist() == [1, 2]
    with pytest.raises(ValueError, match="unknown lens metric"):
        lens_.metric("nope")


@pytest.mark.parametrize("name", ["laya", "scalarmix"])
def test_mix_heads_use_their_own_classifier(name):
    head, h = make(name), hidden(batch=8)
    lens_ = lens(head, h)
    assert lens_.source == "head classifier" and lens_.kl.shape == (8, len(DIMS))
    readout = head.readout_logits(head.encode(h))
    assert torch.allclose(lens_.log_q, torch.log_softmax(readout, -1))
    assert torch.equal(lens_.final, head(h).logits.argmax(-1))
    assert (lens_.kl >= 0).all() and ((lens_.rank == 1) == (lens_.log_q.argmax(-1) == lens_.final[:, None])).all()


def test_linear_heads_need_probes_and_say_so():
    head, h = make("concat"), hidden(batch=30)
    with pytest.raises(ValueError, match="probes"):
        lens(head, h)
    labels = torch.arange(30) % 4
    lens_ = lens(head, h, LayerProbes.fit([x.float() for x in h], labels, 4))
    assert lens_.source == "linear probes" and lens_.log_q.shape == (30, len(DIMS), 4)


def test_class_trajectories_and_figure():
    head, h = make("laya"), hidden(batch=40)
    lens_ = lens(head, h)
    groups = torch.arange(40) % 2
    table = class_trajectories(lens_, groups, ["a", "b", "c", "d"], ["x", "y", "z"], metric="prob", resamples=200)
    assert list(table["class"].unique()) == ["all", "a", "b"] and len(table) == 9
    assert table.groupby("class")["n"].first().to_dict() == {"all": 40, "a": 20, "b": 20}
    overall = table[(table["class"] == "all") & (table["layer"] == "x")].iloc[0]
    assert overall["mean"] == pytest.approx(float(lens_.prob[:, 0].mean()))
    row = table[(table["class"] == "b") & (table["layer"] == "y")].iloc[0]
    assert row["mean"] == pytest.approx(float(lens_.prob[groups == 1, 1].mean()))
    assert row["low"] <= row["mean"] <= row["high"]
    figure = trajectory_figure(table, "prob", lens_.source)
    assert len(figure.data) == 3 and "head classifier" in figure.layout.title.text
    single = trajectory_figure(lens_.table(0, list("abcd"), ["x", "y", "z"]), "kl")
    assert list(single.data[0].y) == pytest.approx(lens_.kl[0].tolist())
