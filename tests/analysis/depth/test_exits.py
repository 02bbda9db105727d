import math
import time

import pandas as pd
import pytest
import torch

from laya.analysis.depth.exits import compute_saved, exit_curve, exit_layers, exit_predictions, layer_costs
from laya.analysis.depth.measured import timing_spread
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


# --- the real early-exit run (issue 18 §1) -------------------------------------------------------------------

from laya.analysis.depth.exits import (
    ExitHeads,
    ExitRunOptions,
    alpha_profile_policy,
    compare_policies,
    confidence_policy,
    count_macs,
    early_exit,
    exit_runs,
    fastest_pair,
    layer_steps,
    plain,
)
from laya.analysis.depth.readouts import LayerProbes  # noqa: E402

STEP_CONFIGS = [
    BackboneConfig(name="mlp", in_channels=1, input_size=6, widths=(10, 7, 5)),
    BackboneConfig(name="cnn", in_channels=3, input_size=16, widths=(4, 6, 8)),
    BackboneConfig(name="timm", model="test_vit", in_channels=3, input_size=32, model_kwargs={"img_size": 32}),
    BackboneConfig(name="timm", model="test_vit", in_channels=3, input_size=32, pool="avg", model_kwargs={"img_size": 32}),
    BackboneConfig(name="timm", model="test_efficientnet", in_channels=3, input_size=32,
                   intermediates_kwargs={"extra_blocks": True}, pre_logits=True),  # fmt: skip
]


@pytest.mark.parametrize("config", STEP_CONFIGS, ids=["mlp", "cnn", "vit-cls", "vit-avg", "efficientnet-prelogits"])
def test_layer_steps_give_the_full_pass_hidden_states(config):
    torch.manual_seed(0)
    backbone = build_backbone(config).eval()
    x = torch.randn(3, config.in_channels, config.input_size, config.input_size)
    steps = layer_steps(backbone)
    with torch.no_grad():
        full, state, got = backbone(x), steps.prelude(x), []
        for advance, read in zip(steps.advance, steps.read):
            state = advance(state)
            got.append(read(state))
    assert len(got) == len(full)
    for a, b in zip(got, full):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_layer_steps_refuse_what_they_cannot_step():
    backbone = build_backbone(BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=32, indices=2))
    with pytest.raises(ValueError, match="layer-by-layer execution"):
        layer_steps(backbone)


def _model(head: str = "laya", widths=(16, 12, 8), classes: int = 3) -> LayerwiseClassifier:
    torch.manual_seed(0)
    backbone = build_backbone(BackboneConfig(name="mlp", in_channels=1, input_size=4, widths=widths)).eval()
    return LayerwiseClassifier(backbone, build_head(HeadConfig(name=head, d_star=8), backbone.layer_dims, classes)).eval()


def test_early_exit_known_answers_batch_shrinks_and_the_last_layer_runs_the_head():
    model = _model()
    x = torch.randn(4, 1, 4, 4)
    probs = torch.tensor([  # input 0 exits at layer 0 (class 2), 1 at layer 1 (class 0), 2 and 3 never
        [[0.1, 0.1, 0.8], [0.3, 0.3, 0.4], [1.0, 0.0, 0.0]],
        [[0.4, 0.3, 0.3], [0.9, 0.05, 0.05], [0.0, 1.0, 0.0]],
        [[0.4, 0.3, 0.3], [0.4, 0.3, 0.3], [0.0, 0.0, 1.0]],
        [[0.4, 0.3, 0.3], [0.4, 0.3, 0.3], [0.0, 0.0, 1.0]],
    ])  # fmt: skip
    seen = []

    class Exits(torch.nn.Module):
        kind, adapted = "scripted", False

        def forward(self, layer, h):
            seen.append((layer, len(h)))
            rows = {0: [0, 1, 2, 3], 1: [1, 2, 3]}[layer]
            return probs[rows, layer].log()

    logits, layers = early_exit(model, Exits(), confidence_policy(0.75), x)
    predictions = logits.argmax(-1)
    assert layers.tolist() == [0, 1, 3, 3]  # 3 = L: the head answered
    assert predictions[:2].tolist() == [2, 0]
    assert predictions[2:].tolist() == plain(model, x[2:]).tolist()
    assert seen == [(0, 4), (1, 3)]  # the exit at the last layer never runs; exited inputs left the batch


def test_early_exit_with_no_exit_is_plain_inference_and_everyone_exiting_stops_the_backbone():
    model = _model()
    x = torch.randn(32, 1, 4, 4)
    exits = ExitHeads.own(model.head)
    logits, layers = early_exit(model, exits, confidence_policy(1.01), x)
    assert logits.argmax(-1).tolist() == plain(model, x).tolist() and (layers == 3).all()
    logits, layers = early_exit(model, exits, confidence_policy(0.0), x)
    assert (layers == 0).all()
    with torch.no_grad():
        assert logits.argmax(-1).tolist() == model.head.readout_logits(model.head.encode(model.backbone(x)))[:, 0].argmax(-1).tolist()


EXIT_KINDS = ["laya-own", "scalarmix-own", "concat-probes", "laya-trained", "cnn-laya-own", "vit-scalarmix-own"]


def _exit_case(case: str) -> tuple[LayerwiseClassifier, ExitHeads, torch.Tensor]:
    """A tiny model of the case's backbone and head with its exits, and a batch for it."""
    torch.manual_seed(0)
    backbone_name, head, kind = case.split("-") if case.count("-") == 2 else ("mlp", *case.split("-"))
    config = {"mlp": BackboneConfig(name="mlp", in_channels=1, input_size=4, widths=(16, 12, 8)),
              "cnn": BackboneConfig(name="cnn", in_channels=3, input_size=8, widths=(4, 6, 8)),
              "vit": STEP_CONFIGS[2]}[backbone_name]  # fmt: skip
    backbone = build_backbone(config).eval()
    model = LayerwiseClassifier(backbone, build_head(HeadConfig(name=head, d_star=8), backbone.layer_dims, 3)).eval()
    x = torch.randn(24, config.in_channels, config.input_size, config.input_size)
    if kind == "own":
        return model, ExitHeads.own(model.head), x
    with torch.no_grad():
        hidden = [h.detach() for h in model.backbone(x)]
    labels = torch.arange(len(x)) % 3
    exits = ExitHeads.from_probes(LayerProbes.fit(hidden, labels, 3)) if kind == "probes" else ExitHeads.fit(
        hidden, labels, 3, "mlp", epochs=2)  # fmt: skip
    return model, exits, x


@pytest.mark.parametrize("case", EXIT_KINDS)
def test_inputs_reaching_the_head_get_the_full_models_logits_and_each_adapter_runs_once_per_input(case):
    model, exits, x = _exit_case(case)
    with torch.no_grad():
        full = model(x).logits
    rows = {}
    adapters = [a for a in getattr(model.head, "adapters", [])]
    hooks = [a.register_forward_hook(lambda m, i, o, k=k: rows.__setitem__(k, rows.get(k, 0) + len(i[0])))
             for k, a in enumerate(adapters)]  # fmt: skip
    try:
        thirds = lambda k, logits: torch.arange(len(logits)) < len(logits) // 3  # noqa: E731 (the first third goes)
        logits, layers = early_exit(model, exits, thirds, x)
    finally:
        for hook in hooks:
            hook.remove()
    L, alive = len(model.layer_names), [24]
    for _ in range(L - 1):
        alive.append(alive[-1] - alive[-1] // 3)
    head = layers == L
    assert layers.tolist() == sum(([k] * (alive[k] - alive[k + 1]) for k in range(L - 1)), []) + [L] * alive[-1]
    with torch.no_grad():
        first = exits(0, model.head.adapt(0, model.backbone(x[:8])[0]) if exits.adapted else model.backbone(x[:8])[0])
    torch.testing.assert_close(logits[:8], first)  # an input that exits keeps its exit's logits
    torch.testing.assert_close(logits[head], full[head], atol=1e-5, rtol=1e-5)
    reached = alive if exits.adapted else [alive[-1]] * L
    assert [rows.get(k, 0) for k in range(len(adapters))] == (reached if adapters else [])  # once per input


def test_own_exits_are_the_head_readouts_and_probe_exits_are_the_probes():
    model = _model("scalarmix")
    x = torch.randn(8, 1, 4, 4)
    exits = ExitHeads.own(model.head)
    with torch.no_grad():
        hidden = model.backbone(x)
        own = model.head.readout_logits(model.head.encode(hidden))
        for k, h in enumerate(hidden):
            torch.testing.assert_close(exits(k, model.head.adapt(k, h)), own[:, k])  # the exits read z_k
    with pytest.raises(ValueError, match="no per-layer classifier"):
        ExitHeads.own(_model("concat").head)
    labels = torch.arange(8) % 3
    probes = LayerProbes.fit([h.detach() for h in hidden], labels, 3)
    with torch.no_grad():
        torch.testing.assert_close(ExitHeads.from_probes(probes)(1, hidden[1]).double(), probes.logits(hidden)[:, 1],
                                   atol=1e-4, rtol=1e-4)  # fmt: skip


@pytest.mark.parametrize("kind", ["linear", "mlp"])
def test_trained_exits_learn_a_separable_task(kind):
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (300,), generator=g)
    centres = torch.randn(3, 5, generator=g) * 4
    hidden = [centres[labels] + torch.randn(300, 5, generator=g), torch.randn(300, 7, generator=g)]  # layer 2: noise
    exits = ExitHeads.fit(hidden, labels, 3, kind, epochs=20)
    with torch.no_grad():
        accuracy = [float((exits(k, h).argmax(-1) == labels).double().mean()) for k, h in enumerate(hidden)]
    assert accuracy[0] > 0.95 and accuracy[1] < 0.8
    with pytest.raises(ValueError, match="kind"):
        ExitHeads.fit(hidden, labels, 3, "tree")


def test_alpha_profile_policy_exits_where_the_class_mass_is_reached():
    profile = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    policy = alpha_profile_policy(profile, 0.6)
    logits = torch.tensor([[5.0, 0.0], [0.0, 5.0]])
    assert policy(0, logits).tolist() == [True, False]
    assert policy(1, logits).tolist() == [True, False]  # class 1 has 0.2 of its α on layers 1-2
    assert policy(2, logits).tolist() == [True, True]


def test_count_macs_counts_a_linear_layer():
    layer = torch.nn.Linear(10, 4)
    assert count_macs(lambda: layer(torch.randn(3, 10))) == 3 * 10 * 4


def test_fastest_pair_times_both_alternately():
    calls = []
    a, b = fastest_pair(lambda: calls.append("a"), lambda: calls.append("b"), repeats=2)
    assert calls == ["a", "b", "a", "b", "a", "b"] and a >= 0 and b >= 0
    with pytest.raises(ValueError, match="repeats"):
        fastest_pair(lambda: None, lambda: None, repeats=0)
    for bad in (float("nan"), float("inf"), -0.1):
        with pytest.raises(ValueError, match="min_seconds must be a finite number"):
            ExitRunOptions(min_seconds=bad)


def test_fastest_pair_repeats_a_short_run_until_a_timing_lasts_min_seconds():
    calls = []

    def sleeper(name: str, seconds: float):
        return lambda: (calls.append(name), time.sleep(seconds))

    a, b = fastest_pair(sleeper("a", 0.01), sleeper("b", 0.03), repeats=2, min_seconds=0.045)
    n = calls[2:].count("a") // 2  # after one warm-up each, n calls per timing, the same n for both
    assert calls[:2] == ["a", "b"] and 2 <= n <= 5 and calls[2:] == (["a"] * n + ["b"] * n) * 2
    assert 0.01 <= a < 0.03 <= b  # seconds per call, not per timing


def test_exit_runs_measure_each_policy_with_macs_and_paired_comparison():
    model = _model(widths=(64, 8, 8))  # the first block dominates the MACs
    x, labels = torch.randn(40, 1, 4, 4), torch.randint(0, 3, (40,))
    exits = ExitHeads.own(model.head)
    options = ExitRunOptions(batch_sizes=(1, 16), timing_inputs={1: 4}, repeats=1, resamples=50, min_seconds=0)
    policies = {"confidence 0.0": (0.0, confidence_policy(0.0)), "confidence 1.01": (1.01, confidence_policy(1.01)),
                "α profile 0.5": (0.5, alpha_profile_policy(torch.full((3, 3), 1 / 3), 0.5))}  # fmt: skip
    table, correct = exit_runs(model, exits, policies, x, labels, options)
    rows = table.set_index("policy")
    full = rows.loc["full model"]
    backbone, adapters, scorer = 16 * 64 + 64 * 8 + 8 * 8, 64 * 8 + 8 * 8 + 8 * 8, 3 * 8 * 192 + 192 * 3
    mix, classifier = 3 * 8, 8 * 3  # alpha^T z (a bmm), W h_agg
    with torch.no_grad():  # by hand: every matmul of the plain model, per input
        assert full["macs"] == count_macs(lambda: model(x)) / len(x) == backbone + adapters + scorer + mix + classifier
    never = rows.loc["confidence 1.01"]
    assert never["exited"] == 0 and never["mean_layers"] == 3
    readouts = 8 * 3 + 8 * 3  # the classifier on z_1 and z_2: paid, never used; the head reuses z_1 and z_2
    assert never["macs"] == full["macs"] + readouts and never["macs_saved"] < 0
    assert never["accuracy"] == full["accuracy"]
    always = rows.loc["confidence 0.0"]
    assert always["exited"] == 1 and always["mean_layers"] == 1
    assert always["macs"] == 16 * 64 + 64 * 8 + 8 * 3  # block 1, adapter 1, classifier: nothing deeper
    for b in (1, 16):
        assert {f"plain_ms_b{b}", f"exit_ms_b{b}", f"saved_b{b}"} <= set(table.columns)
        assert rows.loc["confidence 0.0", f"saved_b{b}"] == pytest.approx(1 - rows.loc["confidence 0.0", f"exit_ms_b{b}"] / rows.loc["confidence 0.0", f"plain_ms_b{b}"])
    assert set(correct) == set(rows.index) and correct["confidence 1.01"].tolist() == correct["full model"].tolist()
    versus = compare_policies(table, correct, ["α profile 0.5"], resamples=50)
    assert versus.loc[0, "versus"] in {"confidence 0.0", "confidence 1.01"}
    assert {"accuracy_difference", "difference_low", "difference_high", "verdict"} <= set(versus.columns)


def test_timing_spread_is_the_half_range_of_the_plain_timings_over_their_median():
    runs = pd.DataFrame({"policy": ["full model", "confidence 0.5", "confidence 0.9", "α profile 0.2"],
                         "plain_ms_b64": [0.1, 0.8, 1.0, 1.2]})  # fmt: skip
    assert timing_spread(runs, 64) == pytest.approx((1.2 - 0.8) / (2 * 1.0))  # the full-model row is their minimum
    assert math.isnan(timing_spread(runs.iloc[:2], 64))  # one timing: no spread to tell
    truncation = pd.DataFrame({"layers_kept": [2, 2, 1, 1], "full_ms_b1": [2.0, 2.2, 1.8, 2.1]})  # no full-model row
    assert timing_spread(truncation, 1, "full_ms") == pytest.approx((2.2 - 1.8) / (2 * 2.05))


def test_the_timed_batch_keeps_a_full_forward_within_a_quarter_second(monkeypatch):
    """All of a fast model's batch; of one whose forward costs 0.1 s a row, the two rows that fit; one at least."""
    from laya.analysis.depth import exits

    config = BackboneConfig(name="mlp", in_channels=1, input_size=8, widths=(16, 16))
    backbone = build_backbone(config).eval()
    model = LayerwiseClassifier(backbone, build_head(HeadConfig(name="lastlayer"), backbone.layer_dims, 3)).eval()
    x = torch.randn(64, 1, 8, 8)
    assert len(exits.timed_batch(model, x)) == 64
    monkeypatch.setattr(exits, "fastest_seconds", lambda runs, repeats, device=None, min_seconds=0.0: [0.1])
    assert torch.equal(exits.timed_batch(model, x), x[:2])
    monkeypatch.setattr(exits, "fastest_seconds", lambda runs, repeats, device=None, min_seconds=0.0: [9.0])
    assert len(exits.timed_batch(model, x)) == 1
    with pytest.raises(ValueError, match="at least one input"):
        exits.timed_batch(model, x[:0])
