"""Known answers for the cheap per-unit scores and their agreement with an intervention."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from laya.analysis.depth.layer_lens import Lens
from laya.analysis.network import network_units
from laya.analysis.network.recording import as_network
from laya.analysis.network.scores import (
    APART_COLUMNS,
    apart_agreement,
    baselines,
    best_score,
    gradient_scores,
    integrated_gradients,
    lens_kl_drop,
    score_agreement,
)
from tests.analysis.network.test_interventions import _stream
from tests.analysis.test_block_ablation import _inputs, _own_model
from tests.model.test_own_head import logits_of, networks

FAMILIES = ["torchvision resnet18", "timm test_vit"]


def _setup(tmp_path: Path, family: str):
    _, network, config = next(n for n in networks(tmp_path) if n[0] == family)
    model = _own_model(config)
    return network.double().eval(), model.backbone, network_units(model.backbone), config


def _patched(network, x, module, output):
    handle = module.register_forward_hook(lambda m, args, out: output(args[0], out))
    try:
        with torch.no_grad():
            return logits_of(network, x)
    finally:
        handle.remove()


@pytest.mark.parametrize("family", FAMILIES)
def test_integrated_gradients_are_the_midpoint_sum_by_hand(tmp_path: Path, family: str) -> None:
    """Unit u's contribution set by hand to ``b + α_s (a - b)`` at each midpoint ``α_s``, the gradient of the
    predicted logit there averaged and dotted with ``a - b``: every unit's score, to rounding."""
    network, backbone, units, config = _setup(tmp_path, family)
    S, x, reference = 3, _inputs(config, 2, 0), _inputs(config, 3, 1)
    base = baselines(backbone, reference, units, "mean")
    ig = integrated_gradients(backbone, x, units, base, steps=S, max_rows=20)  # several chunks
    with torch.no_grad():
        y = logits_of(network, x).argmax(-1, keepdim=True)
    for u, unit in enumerate(units):
        module, store = network.get_submodule(unit.name), []
        handle = module.register_forward_hook(lambda m, args, out: store.append((args[0], out)))
        with torch.no_grad():
            logits_of(network, x)
        handle.remove()
        given, out = store[0]
        stream = _stream(network, unit, given) if unit.residual else 0
        a, total = out - stream, 0
        for s in range(S):
            point = (stream + base[u] + (s + 0.5) / S * (a - base[u])).requires_grad_(True)
            handle = module.register_forward_hook(lambda m, args, out, p=point: p)
            grad, = torch.autograd.grad(logits_of(network, x).gather(1, y).sum(), point)
            handle.remove()
            total = total + grad / S
        assert torch.allclose(ig[:, u], (total * (a - base[u])).flatten(1).sum(1), atol=1e-10, rtol=0), unit.name
    assert ig.abs().max() > 1e-3


def test_integrated_gradients_keep_memory_bounded_without_changing_a_value(tmp_path: Path, monkeypatch) -> None:
    """Under a tiny autograd budget every pass holds one unit of one input: the same scores, to rounding."""
    import laya.analysis.network.scores as scores

    _, backbone, units, config = _setup(tmp_path, "torchvision resnet18")
    x, reference = _inputs(config, 2, 0), _inputs(config, 3, 1)
    base = baselines(backbone, reference, units, "mean")
    whole = integrated_gradients(backbone, x, units, base, steps=2)
    assert scores._row_bytes(as_network(backbone), x[:1], [u.name for u in units]) > 0
    monkeypatch.setattr(scores, "GRAD_BYTES", 1)
    assert torch.allclose(integrated_gradients(backbone, x, units, base, steps=2), whole, atol=1e-10, rtol=0)


def test_integrated_gradients_are_complete_per_unit(tmp_path: Path) -> None:
    """On a smooth network (a ViT) each unit's IG sums to ``y_c(x) - y_c(x | contribution <- baseline)``, the rest
    of the network running on."""
    network, backbone, units, config = _setup(tmp_path, "timm test_vit")
    x, reference = _inputs(config, 2, 0), _inputs(config, 3, 1)
    base = baselines(backbone, reference, units, "mean")
    ig = integrated_gradients(backbone, x, units, base, steps=24)
    with torch.no_grad():
        logits = logits_of(network, x)
    y, rows = logits.argmax(-1), torch.arange(2)
    for u, unit in enumerate(units):
        patched = _patched(network, x, network.get_submodule(unit.name), lambda inp, out, u=u: inp + base[u])
        expected = logits[rows, y] - patched[rows, y]
        assert torch.allclose(ig[:, u], expected, atol=2e-3 * float(expected.abs().max()) + 1e-8), unit.name


@pytest.mark.parametrize("family", FAMILIES)
def test_gradient_x_activation_and_gradcam_mass_by_hand(tmp_path: Path, family: str) -> None:
    network, backbone, units, config = _setup(tmp_path, family)
    x = _inputs(config, 2, 0)
    got = gradient_scores(backbone, x, units)
    for u in (0, len(units) - 1):
        unit, store = units[u], []
        module = network.get_submodule(unit.name)
        handle = module.register_forward_hook(lambda m, args, out: store.append((args[0], out)))
        xg = x.clone().requires_grad_(True)
        logits = logits_of(network, xg)
        handle.remove()
        given, out = store[0]
        grad, = torch.autograd.grad(logits.gather(1, logits.argmax(-1, keepdim=True)).sum(), out)
        contribution = out - _stream(network, unit, given) if unit.residual else out
        assert torch.allclose(got["grad_x_act"][:, u], (grad * contribution).flatten(1).sum(1).detach(), atol=1e-10)
        if out.ndim == 3:  # tokens: patches only, on their grid
            prefix = network.num_prefix_tokens
            out, grad = out[:, prefix:].transpose(1, 2), grad[:, prefix:].transpose(1, 2)
        else:
            out, grad = out.flatten(2), grad.flatten(2)
        cam = (grad.mean(2, keepdim=True) * out).sum(1).clamp(min=0).sum(1)  # ReLU(sum_k w_k A_k), summed
        assert torch.allclose(got["gradcam_mass"][:, u], cam.detach(), atol=1e-10), unit.name


def test_lens_kl_drop_numbers() -> None:
    log_p = torch.log(torch.tensor([[0.7, 0.2, 0.1]], dtype=torch.float64))
    q = torch.tensor([[[0.4, 0.3, 0.3], [0.6, 0.3, 0.1], [0.7, 0.2, 0.1]]], dtype=torch.float64)
    lens = Lens(q.log(), log_p, "tuned lens")
    p = log_p.exp()[0]

    def kl(r):
        return float((p * (p.log() - r.log())).sum())

    uniform = kl(torch.full((3,), 1 / 3, dtype=torch.float64))
    assert uniform == pytest.approx(math.log(3) + float((p * p.log()).sum()))
    expected = [uniform - kl(q[0, 0]), kl(q[0, 0]) - kl(q[0, 1]), kl(q[0, 1]) - kl(q[0, 2])]
    assert lens_kl_drop(lens)[0].tolist() == pytest.approx(expected)


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_agreement_is_the_mean_per_input_spearman_with_its_bootstrap_ci() -> None:
    drops = torch.tensor([[0.5, 0.1, 0.3, 0.0], [0.2, 0.4, 0.1, 0.3], [0.0, 0.1, 0.2, 0.3], [0.3, 0.3, 0.1, 0.0],
                          [0.9, 0.1, 0.5, 0.2]], dtype=torch.float64)  # fmt: skip
    scores = {"same": drops * 2, "reversed": -drops, "mixed": torch.tensor([[1.0, 2, 3, 4], [4, 3, 2, 1],
              [1, 3, 2, 4], [2, 2, 2, 2], [1, 0, 3, 2]], dtype=torch.float64)}  # fmt: skip
    table = score_agreement(scores, drops, "resample", resamples=400, seed=3)
    assert list(table.columns) == ["score", "intervention", "spearman_mean", "ci_low", "ci_high", "n"]
    rho = np.array([[spearmanr(s[i], drops[i]).statistic for s in scores.values()] for i in range(5)])
    assert np.isnan(rho[3, 2])  # a constant row is left out
    assert table["spearman_mean"].tolist() == pytest.approx(np.nanmean(rho, 0).tolist())
    assert table["n"].tolist() == [5, 5, 4]
    assert table.loc[0, "spearman_mean"] == pytest.approx(1.0) and table.loc[1, "spearman_mean"] == pytest.approx(-1.0)
    generator = torch.Generator().manual_seed(3)  # the resamples of laya.analysis.statistics
    draws = torch.cat([torch.randint(5, (100, 5), generator=generator) for _ in range(4)]).numpy()
    means = np.array([np.nanmean(rho[d, 2]) for d in draws])
    means = means[~np.isnan(means)]
    low, high = np.quantile(means, [0.025, 0.975])
    assert (table.loc[2, "ci_low"], table.loc[2, "ci_high"]) == pytest.approx((low, high))
    assert best_score(table, "resample")["score"] == "same"
    assert best_score(table[table["score"] != "same"], "resample") is None  # no CI above 0 but "same"'s
    masked = score_agreement({"mixed": scores["mixed"]}, drops, "skip", torch.tensor([True, True, False, True]), 50)
    by_hand = [spearmanr(scores["mixed"][i, [0, 1, 3]], drops[i, [0, 1, 3]]).statistic for i in range(5)]
    assert masked.loc[0, "spearman_mean"] == pytest.approx(np.nanmean(by_hand))


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_a_score_is_trusted_only_where_it_beats_what_structure_alone_gives() -> None:
    """Drops that are mostly a per-unit constant: a score equal to that constant agrees with them (its CI above 0)
    but is no better than the per-unit baseline, so it is not trusted; the true drops are. Agreement is over the
    units of the mask alone, and the table says how many."""
    from laya.analysis.network.scores import baseline_scores, trusted_agreement

    g = torch.Generator().manual_seed(0)
    N, U = 60, 6
    structure = torch.tensor([0.6, 0.1, 0.5, 0.2, 0.4, 0.3], dtype=torch.float64)
    drops = structure + 0.15 * torch.randn(N, U, generator=g, dtype=torch.float64)
    drops[:, 0] = 0.72  # a unit that does not keep the input: left out
    mask = torch.tensor([False, True, True, True, True, True])
    base = baseline_scores(structure, N, seed=1)
    assert torch.equal(base["unit_mean"], structure.expand(N, U)) and base["random"].shape == (N, U)
    assert torch.equal(baseline_scores(structure, N, seed=1)["random"], base["random"])  # seeded
    table = trusted_agreement({"constant": structure.expand(N, U).clone(), "true": drops.clone()}, base, drops,
                              "resample", mask, resamples=300, seed=0)  # fmt: skip
    rows = table.set_index("score")
    assert rows["kind"].to_dict() == {"constant": "score", "true": "score", "unit_mean": "baseline",
                                      "random": "baseline"}  # fmt: skip
    assert (rows["units"] == 5).all()
    assert rows.loc["constant", "ci_low"] > 0 and not rows.loc["constant", "trusted"]
    assert rows.loc["constant", "vs_baseline"] == pytest.approx(0.0)
    assert rows.loc["true", "trusted"] and rows.loc["true", "vs_low"] > 0
    assert rows.loc["true", "spearman_mean"] == pytest.approx(1.0)
    by_hand = [spearmanr(structure[1:], drops[i, 1:]).statistic for i in range(N)]
    assert rows.loc["unit_mean", "spearman_mean"] == pytest.approx(np.mean(by_hand))
    assert best_score(table, "resample")["score"] == "true"
    assert best_score(table[table["score"] != "true"], "resample") is None  # agreeing is not enough


def test_units_left_out_of_the_agreement_get_their_own_numbers_over_inputs() -> None:
    """A unit that does not keep the input: its mean drop and each score's Spearman over the inputs (scipy's) with
    its drop, each with a bootstrap CI; the units that keep the input give no row."""
    g = torch.Generator().manual_seed(1)
    drops = torch.rand(30, 3, generator=g, dtype=torch.float64)
    scores = {"a": torch.rand(30, 3, generator=g, dtype=torch.float64), "b": drops.round(decimals=1)}  # b: ties
    table = apart_agreement(scores, drops, "resample", torch.tensor([True, False, True]), ["x", "y", "z"], 300, 0)
    assert list(table.columns) == list(APART_COLUMNS) and table["unit"].tolist() == ["y", "y"]
    assert table["drop"].tolist() == pytest.approx([float(drops[:, 1].mean())] * 2)
    for row, name in zip(table.itertuples(), scores):
        assert row.spearman == pytest.approx(spearmanr(scores[name][:, 1], drops[:, 1]).statistic, abs=1e-12)
        assert row.ci_low <= row.spearman <= row.ci_high and row.ci_low < row.ci_high and row.n == 30
    assert row.drop_low < row.drop < row.drop_high
    assert apart_agreement(scores, drops, "resample", torch.ones(3, dtype=torch.bool), ["x", "y", "z"]).empty
