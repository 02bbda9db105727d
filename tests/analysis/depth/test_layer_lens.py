"""Known answers for the per-layer lens: KL, entropy, rank and probability by hand."""

import math

import pandas as pd
import pytest
import torch

from laya.analysis.depth.layer_lens import (
    Lens,
    class_trajectories,
    class_view,
    from_readouts,
    lens,
    lens_summary,
    load_lens,
    trajectory_figure,
    write_lens,
)
from laya.analysis.depth.readouts import LayerProbes
from laya.app.depth_plots import lens_caption
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


def test_from_readouts_matches_the_head_lens():
    head, h = make("laya"), hidden(batch=10)
    direct = lens(head, h)
    rebuilt = from_readouts(direct.log_q.exp(), head(h).logits, "head classifier")
    assert torch.allclose(rebuilt.kl, direct.kl, atol=1e-10) and torch.equal(rebuilt.rank, direct.rank)
    underflow = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]], dtype=torch.float64)  # a readout that underflowed to 0
    kl = from_readouts(underflow, torch.tensor([[0.0, 0.0]]), "linear probes").kl
    assert torch.isfinite(kl).all() and kl[0, 0] > 300 and kl[0, 1] == pytest.approx(0, abs=1e-12)
    with pytest.raises(ValueError, match="unknown lens source"):
        from_readouts(underflow, torch.zeros(1, 2), "tuned")
    with pytest.raises(ValueError, match=r"need readout_probs \(B, L, C\)"):
        from_readouts(underflow, torch.zeros(1, 3), "linear probes")


def test_lens_summary_round_trip_and_views(tmp_path):
    head, h = make("laya"), hidden(batch=40, seed=3)
    lens_ = lens(head, h)
    labels = torch.arange(40) % 3  # class "d" has no input: left out
    summary = lens_summary(lens_, labels, list("abcd"), ["x", "y", "z"], "python -m laya lens --limit 40", resamples=200)
    assert list(summary["class"].unique()) == ["all", "a", "b", "c"] and len(summary) == 12
    row = summary[(summary["class"] == "c") & (summary["layer"] == "z")].iloc[0]
    chosen = labels == 2
    assert row["n"] == 13 and row["kl"] == pytest.approx(float(lens_.kl[chosen, 2].mean()))
    assert row["rank"] == pytest.approx(float(lens_.rank[chosen, 2].double().mean()))
    assert row["entropy_low"] <= row["entropy"] <= row["entropy_high"] and row["prob_low"] <= row["prob"] <= row["prob_high"]
    assert set(summary["readout"]) == {"head classifier"} and set(summary["command"]) == {"python -m laya lens --limit 40"}
    with pytest.raises(ValueError, match="39 labels for 40 inputs"):
        lens_summary(lens_, labels[:39], list("abcd"), ["x", "y", "z"])

    assert load_lens(tmp_path) is None
    write_lens(summary, tmp_path)
    loaded = load_lens(tmp_path)
    pd.testing.assert_frame_equal(loaded, summary, check_dtype=False)
    view = class_view(loaded, "prob", ["all", "b"])
    assert list(view["class"].unique()) == ["all", "b"] and list(view.columns) == [
        "class", "layer", "layer_index", "n", "mean", "low", "high"]  # fmt: skip
    assert view["mean"].iloc[0] == pytest.approx(float(lens_.prob[:, 0].mean()))
    with pytest.raises(ValueError, match="unknown lens metric"):
        class_view(loaded, "loss")
    mine = lens_.table(5, list("abcd"), ["x", "y", "z"])
    figure = trajectory_figure(view, "prob", "head classifier", this_input=mine)
    assert [t.name for t in figure.data] == ["all", "b", "this input"]
    assert list(figure.data[2].y) == pytest.approx(lens_.prob[5].tolist())
    assert list(figure.data[1].error_y.array) == pytest.approx((view["high"] - view["mean"])[3:].tolist())

    (tmp_path / "lens.csv").write_text("class,layer\nall,x\n")
    with pytest.raises(ValueError, match="not a lens summary"):
        load_lens(tmp_path)


def test_lens_caption_names_kind_counts_and_mismatch(tmp_path):
    head, h = make("laya"), hidden(batch=20)
    summary = lens_summary(lens(head, h), torch.arange(20) % 2, list("abcd"), ["x", "y", "z"], "CMD", resamples=50)
    text = lens_caption("head classifier", summary, "b")
    assert "20 test inputs" in text and "10 whose true class" in text and "`CMD`" in text and "do not compare" not in text
    assert "do not compare" in lens_caption("linear probes", summary, "b")
    assert "python -m laya lens" in lens_caption("linear probes", None, "b")
