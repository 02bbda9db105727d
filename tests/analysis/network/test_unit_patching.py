"""Activation patching by unit: the target with one unit's branch from the source, by hand; rows that differ where
the network differs; the stem's row the source's own output by construction."""

from __future__ import annotations

import pytest
import torch

from laya.analysis.network import intervene, network_units
from laya.analysis.network.unit_patching import COLUMNS, UnitPatch, patch_units, unit_patch_table
from tests.analysis.network.test_interventions import _stream
from tests.analysis.test_block_ablation import _by_hand
from tests.model.test_own_head import logits_of


@pytest.fixture(scope="module")
def resnet():
    """A timm ResNet-18 (its stem ``bn1`` read as a stage: a unit without a shortcut) with its own classifier, in
    float64, and its units."""
    import timm

    from laya.model.backbones import wrap
    from laya.model.classifier import LayerwiseClassifier
    from laya.model.own_head import own_head

    torch.manual_seed(0)
    network = timm.create_model("resnet18", pretrained=False, num_classes=3).eval()
    for norm in network.modules():  # timm zeroes each block's last norm: its branch would add nothing
        if isinstance(norm, torch.nn.BatchNorm2d):
            torch.nn.init.uniform_(norm.weight, 0.5, 1.5)
    backbone = wrap(network, ["bn1", "layer1", "layer2", "layer3", "layer4"], input_size=32, pre_logits=True)
    model = LayerwiseClassifier(backbone, own_head(backbone)).double().eval()
    units = network_units(backbone, torch.zeros(1, 3, 32, 32, dtype=torch.float64))
    return network.double(), model, units


def _pair(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 3, 32, 32, generator=g).double(), torch.randn(1, 3, 32, 32, generator=g).double()


def test_each_unit_takes_the_source_s_branch_and_keeps_the_target_s_stream(resnet) -> None:
    network, model, units = resnet
    target, source = _pair()
    patch = patch_units(model, target, source, units)
    assert patch.units == tuple(u.name for u in units) and patch.methods == ("resample",) * len(units)
    assert patch.residual == tuple(u.residual for u in units) and not patch.residual[0]  # bn1: no shortcut
    with torch.no_grad():
        source_p = torch.softmax(logits_of(network, source), -1)
    patched = torch.softmax(patch.effects.logits[0], -1)  # (U, C)
    for u, unit in enumerate(units):
        module = network.get_submodule(unit.name)
        store = []
        handle = module.register_forward_hook(lambda m, args, out: store.append((args[0], out)))
        with torch.no_grad():
            logits_of(network, source)
        handle.remove()
        given, out = store[0]
        if unit.residual:  # the target's stream, the source's branch
            branch = out - _stream(network, unit, given)
            expected = _by_hand(network, target, module, lambda inp, o, n=unit: _stream(network, n, inp) + branch)
        else:  # the whole output
            expected = _by_hand(network, target, module, lambda inp, o: out)
        assert torch.allclose(patched[u], expected[0], atol=1e-10, rtol=0), unit.name
    assert patch.constructed == (True,) + (False,) * (len(units) - 1)
    assert torch.allclose(patched[0], source_p[0], atol=1e-10)  # bn1's row: the source's own output
    changes = patch.effects.logit_diff_change(0, 1)[0, 1:]
    assert (changes - changes.mean()).abs().max() > 1e-3  # the rows differ where the network differs


def test_pairs_are_one_reference_per_input(resnet) -> None:
    """``paired``: input b with reference b alone, the same as resampling from that one reference."""
    _, model, units = resnet
    (t1, s1), (t2, s2) = _pair(1), _pair(2)
    both = intervene(model, torch.cat([t1, t2]), units, "resample", torch.cat([s1, s2]), paired=True)
    for b, (t, s) in enumerate(((t1, s1), (t2, s2))):
        alone = intervene(model, t, units, "resample", s)
        assert torch.allclose(both.drops[b], alone.drops[0], atol=1e-10)
        assert torch.allclose(both.logits[b], alone.logits[0], atol=1e-10)
    with pytest.raises(ValueError, match="one reference per input"):
        intervene(model, t1, units, "resample", torch.cat([s1, s2]), paired=True)
    with pytest.raises(ValueError, match="one reference per input"):
        intervene(model, t1, units, "mean", s1, paired=True)


def test_the_table_names_each_unit_and_what_is_fixed_by_construction(resnet) -> None:
    _, model, units = resnet
    patch = patch_units(model, *_pair(), units)
    table = unit_patch_table(patch, ["a", "b", "c"], 0, 1)
    assert list(table.columns) == list(COLUMNS) and table["unit"].tolist() == list(patch.units)
    assert table["constructed"].tolist() == list(patch.constructed)
    logits, base = patch.effects.logits[0], patch.effects.base_logits[0]
    assert table["logit_diff_change"].tolist() == pytest.approx(
        ((logits[:, 0] - logits[:, 1]) - (base[0] - base[1])).tolist(), abs=1e-12)  # fmt: skip
    again = UnitPatch.from_tensors(*patch.to_tensors())  # as a sandboxed worker hands it over
    assert again.constructed == patch.constructed and torch.equal(again.effects.logits, patch.effects.logits)
    with pytest.raises(ValueError, match="out of range"):
        unit_patch_table(patch, ["a", "b", "c"], 0, 3)
