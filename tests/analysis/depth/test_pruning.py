import pytest
import torch

from laya.analysis.depth.pruning import keep_masks, pooled_features, pruning_curves, pruning_mode, removal_orders
from tests.model.test_heads import hidden, make


def test_keep_masks_remove_in_order():
    assert keep_masks(torch.tensor([2, 0, 1])).tolist() == [
        [True, True, True],
        [True, True, False],
        [False, True, False],
    ]


@pytest.mark.parametrize("name", ["laya", "scalarmix", "concat", "lastlayer"])
def test_pooled_features_are_the_output_layers_input(name):
    head, h = make(name), hidden(batch=5)
    keep = torch.tensor([True, False, True])
    features, logits = pooled_features(head, h, keep)
    with torch.no_grad():
        assert torch.allclose(head.output_layer(features), logits)
        assert torch.allclose(logits, head(h, keep, pruning_mode(head)).logits)


def test_pruning_curves_full_head_is_the_head_and_deepest_removal_has_a_speedup():
    head, h = make("laya"), hidden(batch=40)
    with torch.no_grad():
        out = head(h)
    labels = out.logits.argmax(-1)
    orders = removal_orders(head, h, out.layer_scores, random_orders=3)
    assert list(orders) == ["head weight", "LOO drop", "deepest first", "random"] and len(orders["random"]) == 3
    assert orders["deepest first"][0].tolist() == [2, 1, 0]
    cost = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    table = pruning_curves(head, (h, labels), (h, labels), orders, ["a", "b", "c"], cost, refit_steps=5, resamples=20)
    assert len(table) == 4 * 3
    full = table[table["layers_kept"] == 3]
    assert (full["accuracy"] == 1.0).all()
    deepest = table[table["criterion"] == "deepest first"].set_index("layers_kept")
    assert deepest["removes_deepest"].tolist() == [False, True, True]
    assert deepest.loc[2, "speedup"] == 2.0 and deepest.loc[1, "speedup"] == 4.0
    assert deepest.loc[1, "removed"] == "b, c"
    assert (table["refit_accuracy"].between(0, 1)).all()


# --- the truncated model with its head, measured (issue 18 §2) -----------------------------------------------

from laya.analysis.depth.exits import ExitRunOptions, count_macs, plain  # noqa: E402
from laya.analysis.depth.pruning import TruncatedModel, filled, refit_output_layer, truncation_runs  # noqa: E402
from laya.model.backbones import BackboneConfig, build_backbone  # noqa: E402
from laya.model.classifier import LayerwiseClassifier  # noqa: E402
from laya.model.heads import HeadConfig, build_head  # noqa: E402


def _model(head: str) -> LayerwiseClassifier:
    torch.manual_seed(0)
    backbone = build_backbone(BackboneConfig(name="mlp", in_channels=1, input_size=4, widths=(32, 16, 8))).eval()
    model = LayerwiseClassifier(backbone, build_head(HeadConfig(name=head, d_star=8), backbone.layer_dims, 3)).eval()
    model.head.set_references([torch.full((d,), 0.1 * (i + 1)) for i, d in enumerate(backbone.layer_dims)])
    return model


@pytest.mark.parametrize("name", ["laya", "scalarmix", "concat", "lastlayer"])
def test_truncated_model_is_the_masked_head_on_the_shallow_layers_and_never_reads_deeper(name):
    model = _model(name)
    x = torch.randn(6, 1, 4, 4)
    with torch.no_grad():
        hidden = model.backbone(x)
        for kept in (1, 2, 3):
            keep = torch.arange(3) < kept
            expected = model.head(filled(model.head, hidden, kept), keep, pruning_mode(model.head)).logits
            torch.testing.assert_close(TruncatedModel(model, kept)(x), expected)
        torch.testing.assert_close(TruncatedModel(model, 3)(x), model(x).logits, atol=1e-5, rtol=1e-5)
        deep = model.backbone.blocks[2]
        model.backbone.blocks[2] = torch.nn.Identity()  # a model that cannot run block 3 still truncates to 2
        try:
            TruncatedModel(model, 2)(x)
        finally:
            model.backbone.blocks[2] = deep
    with pytest.raises(ValueError, match="kept"):
        TruncatedModel(model, 0)


def test_truncated_macs_are_the_backbone_prefix_plus_the_head():
    model = _model("lastlayer")
    x = torch.randn(5, 1, 4, 4)
    with torch.no_grad():
        macs = count_macs(lambda: TruncatedModel(model, 1)(x)) / 5
    assert macs == 16 * 32 + 8 * 3  # block 1 + the linear classifier (the removed layer is a constant)


def test_refit_output_layer_recovers_a_truncated_head():
    model = _model("concat")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 1, 4, 4, generator=g)
    with torch.no_grad():
        hidden = model.backbone(x)
    labels = hidden[0][:, :3].argmax(-1)  # a task layer 1 alone solves
    layer = refit_output_layer(model.head, hidden, labels, kept=1, steps=50)
    with torch.no_grad():
        accuracy = (TruncatedModel(model, 1, layer)(x).argmax(-1) == labels).double().mean()
        as_pruned = (TruncatedModel(model, 1)(x).argmax(-1) == labels).double().mean()
    assert accuracy > 0.9 > as_pruned
    assert model.head.output_layer.weight.data_ptr() != TruncatedModel(model, 1, layer).head.output_layer.weight.data_ptr()


def test_truncation_runs_measure_every_truncation_against_the_full_model():
    model = _model("scalarmix")
    x, labels = torch.randn(30, 1, 4, 4), torch.randint(0, 3, (30,))
    with torch.no_grad():
        hidden = model.backbone(x)
    options = ExitRunOptions(batch_sizes=(1, 8), timing_inputs={1: 3}, repeats=1, resamples=20, min_seconds=0)
    table = truncation_runs(model, (hidden, labels), x, labels, refit_steps=5, options=options)
    assert table[["layers_kept", "variant"]].values.tolist() == [[2, "pruned"], [2, "refit"], [1, "pruned"], [1, "refit"]]
    with torch.no_grad():
        full_macs = count_macs(lambda: plain(model, x)) / 30
    assert (table["full_macs"] == full_macs).all() and (table["macs_speedup"] > 1).all()
    assert table.loc[2, "macs"] < table.loc[0, "macs"]
    for b in (1, 8):
        assert table[f"speedup_b{b}"].tolist() == pytest.approx((table[f"full_ms_b{b}"] / table[f"truncated_ms_b{b}"]).tolist())
    assert table["accuracy"].between(0, 1).all()
