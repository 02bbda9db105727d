"""Known answers for the interventions on every unit at once: skip, resample (K references) and mean-ablation, of a
whole unit or of a transformer block's attention or MLP branch alone."""

import dataclasses
import threading
from pathlib import Path

import pytest
import torch

from laya.analysis.network import intervene, network_stages, network_units, reference_inputs
from laya.analysis.network.interventions import BRANCHES
from tests.analysis.test_block_ablation import _by_hand as _hand
from tests.analysis.test_block_ablation import _inputs, _own_model
from tests.model.test_own_head import logits_of, networks

FAMILIES = ["torchvision resnet18", "timm test_vit"]
VITS = ["timm test_vit", "transformers vit"]


def _setup(tmp_path: Path, family: str):
    _, network, config = next(n for n in networks(tmp_path) if n[0] == family)
    model = _own_model(config)
    return network.double().eval(), model, network_units(model.backbone), config


def _recorded(network, x, module) -> tuple[torch.Tensor, torch.Tensor]:
    store = []
    handle = module.register_forward_hook(lambda m, args, out: store.append((args[0], out)))
    with torch.no_grad():
        logits_of(network, x)
    handle.remove()
    return store[0]


def _stream(network, unit, given: torch.Tensor) -> torch.Tensor:
    """The unit's output without its branch, by hand: its input, or its shortcut module's output (through the
    block's final ReLU where it has one)."""
    if unit.shortcut is None:
        return given
    kept = network.get_submodule(unit.shortcut)(given)
    return kept.relu() if unit.rectified else kept


@pytest.mark.parametrize("family", FAMILIES)
def test_skip_of_a_residual_unit_is_the_network_without_its_branch(tmp_path: Path, family: str) -> None:
    network, model, units, config = _setup(tmp_path, family)
    x, reference = _inputs(config, 2, 0), _inputs(config, 3, 1)
    profile = intervene(model, x, units, "skip", reference)
    with torch.no_grad():
        p = torch.softmax(logits_of(network, x), -1)
    y, rows = p.argmax(-1), torch.arange(2)
    assert torch.equal(profile.prediction, y)
    for u, unit in enumerate(units):
        part = " of the whole block" if unit.branches else ""  # a ViT's blocks have branches: the part is named
        if not unit.residual:
            assert profile.methods[u] == "resample"  # the fallback, named
            continue
        assert profile.methods[u] == "skip" + part
        skipped = _hand(network, x, network.get_submodule(unit.name), lambda inp, out: _stream(network, unit, inp))
        assert torch.allclose(profile.drops[:, u], p[rows, y] - skipped[rows, y], atol=1e-10, rtol=0), unit.name
    assert profile.drops.abs().max() > 1e-3


@pytest.mark.parametrize("family", FAMILIES)
def test_resample_is_the_mean_of_k_hand_patched_runs(tmp_path: Path, family: str) -> None:
    """A residual unit's branch ``h - x`` takes each reference's, the stream kept; any other unit's whole output."""
    network, model, units, config = _setup(tmp_path, family)
    K = 4
    x, reference = _inputs(config, 2, 0), _inputs(config, K, 1)
    profile = intervene(model, x, units, "resample", reference)
    part = " of the whole block" if family == "timm test_vit" else ""
    assert profile.methods == ("resample" + part,) * len(units) and profile.references == K
    with torch.no_grad():
        p = torch.softmax(logits_of(network, x), -1)
    y, rows = p.argmax(-1), torch.arange(2)
    for u, unit in enumerate(units):
        module = network.get_submodule(unit.name)
        inputs, outputs = _recorded(network, reference, module)
        runs = []
        for k in range(K):
            if unit.residual:
                branch = outputs[k : k + 1] - _stream(network, unit, inputs[k : k + 1])
                runs.append(_hand(network, x, module, lambda inp, out, b=branch, n=unit: _stream(network, n, inp) + b))
            else:
                runs.append(_hand(network, x, module, lambda inp, out, k=k: outputs[k : k + 1].expand_as(out)))
        expected = p[rows, y] - torch.stack(runs).mean(0)[rows, y]
        assert torch.allclose(profile.drops[:, u], expected, atol=1e-10, rtol=0), unit.name
    assert profile.drops.abs().max() > 1e-3


def _same_class_pair(model, config) -> torch.Tensor:
    candidates = _inputs(config, 16, 7)
    with torch.no_grad():
        predicted = model(candidates).logits.argmax(-1)
    for i in range(16):
        for j in range(i + 1, 16):
            if predicted[i] == predicted[j]:
                return candidates[[i, j]]
    raise AssertionError("no two inputs of one class")


@pytest.mark.parametrize("family", FAMILIES)
def test_two_inputs_of_one_class_differ_under_resample_not_under_stage_mean_ablation(
    tmp_path: Path, family: str
) -> None:
    """Mean-ablating whole stages makes everything after them a constant: two inputs predicted alike differ by
    ``p_ŷ(x1) - p_ŷ(x2)`` at every stage. Resampling the units' branches keeps each input: the profiles differ."""
    network, model, units, config = _setup(tmp_path, family)
    x, reference = _same_class_pair(model, config), _inputs(config, 8, 1)
    stages = [s for s in network_stages(model.backbone)]
    by_stage = intervene(model, x, stages, "mean", reference, target="output")
    assert by_stage.prediction[0] == by_stage.prediction[1]
    gap = by_stage.probability[0] - by_stage.probability[1]
    assert torch.allclose(by_stage.drops[0] - by_stage.drops[1], gap.expand(len(stages)), atol=1e-10)
    profile = intervene(model, x, units, "resample", reference)
    difference = profile.drops[0] - profile.drops[1]
    assert (difference - difference.mean()).abs().max() > 1e-4  # not a constant shift
    assert all(profile.keeps_input)  # every unit has a shortcut (a ResNet's downsampling units a projection)


def _zeroed(out):
    """A branch module's output with its tensor zeroed (transformers' attention returns a tuple)."""
    return (torch.zeros_like(out[0]), *out[1:]) if isinstance(out, tuple) else torch.zeros_like(out)


def _first(out) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


def _with(out, value: torch.Tensor):
    return (value.expand_as(out[0]), *out[1:]) if isinstance(out, tuple) else value.expand_as(out)


@pytest.mark.parametrize("family", VITS)
def test_skip_of_a_branch_is_the_network_with_that_branch_s_output_zeroed(tmp_path: Path, family: str) -> None:
    """Skip of attention: ``h <- x + m(x)`` (the MLP recomputed without the attention output); of MLP:
    ``h <- x + a(x)``. Both equal the original network with that one module's output zeroed by a hook, and neither
    equals skipping the whole block, nor do the two add up to it."""
    network, model, units, config = _setup(tmp_path, family)
    x, reference = _inputs(config, 2, 0), _inputs(config, 3, 1)
    with torch.no_grad():
        p = torch.softmax(logits_of(network, x), -1)
    y, rows = p.argmax(-1), torch.arange(2)
    whole = intervene(model, x, units, "skip", reference)
    assert whole.methods == ("skip of the whole block",) * len(units) and whole.branches == ("",) * len(units)
    drops = {}
    for index, branch in enumerate(("attention", "mlp")):
        profile = intervene(model, x, units, "skip", reference, branch=branch)
        assert profile.methods == (f"skip of {BRANCHES[branch]}",) * len(units) and profile.references == 0
        assert profile.branches == tuple(u.branches[index] for u in units) and all(profile.keeps_input)
        for u, unit in enumerate(units):
            zeroed = _hand(network, x, network.get_submodule(unit.branches[index]), lambda inp, out: _zeroed(out))
            assert torch.allclose(profile.drops[:, u], p[rows, y] - zeroed[rows, y], atol=1e-10, rtol=0), unit.name
        drops[branch] = profile.drops
    assert drops["attention"].abs().max() > 1e-3 and drops["mlp"].abs().max() > 1e-3
    for branch_drops in (drops["attention"], drops["mlp"], drops["attention"] + drops["mlp"]):
        assert (branch_drops - whole.drops).abs().min() > 1e-6  # at every input and unit


@pytest.mark.parametrize("family", VITS)
def test_resample_of_a_branch_is_the_mean_of_k_hand_patched_runs(tmp_path: Path, family: str) -> None:
    """Resample of a branch: its module's output takes each reference's, the rest of the block and the network run
    on (the MLP on ``x + a(r_k)`` where attention is resampled), the K results averaged."""
    network, model, units, config = _setup(tmp_path, family)
    K = 3
    x, reference = _inputs(config, 2, 0), _inputs(config, K, 1)
    with torch.no_grad():
        p = torch.softmax(logits_of(network, x), -1)
    y, rows = p.argmax(-1), torch.arange(2)
    for index, branch in enumerate(("attention", "mlp")):
        profile = intervene(model, x, units, "resample", reference, branch=branch)
        assert profile.methods == (f"resample of {BRANCHES[branch]}",) * len(units) and profile.references == K
        for u, unit in enumerate(units):
            module = network.get_submodule(unit.branches[index])
            _, outputs = _recorded(network, reference, module)
            runs = [_hand(network, x, module, lambda inp, out, k=k: _with(out, _first(outputs)[k : k + 1]))
                    for k in range(K)]  # fmt: skip
            expected = p[rows, y] - torch.stack(runs).mean(0)[rows, y]
            assert torch.allclose(profile.drops[:, u], expected, atol=1e-10, rtol=0), (branch, unit.name)


@pytest.mark.parametrize("family", VITS)
def test_two_inputs_of_one_class_differ_under_resample_of_a_branch(tmp_path: Path, family: str) -> None:
    _, model, units, config = _setup(tmp_path, family)
    x, reference = _same_class_pair(model, config), _inputs(config, 8, 1)
    for branch in ("attention", "mlp"):
        profile = intervene(model, x, units, "resample", reference, branch=branch)
        assert profile.prediction[0] == profile.prediction[1]
        difference = profile.drops[0] - profile.drops[1]
        assert (difference - difference.mean()).abs().max() > 1e-4, branch  # not a constant shift


def test_units_without_the_branch_get_the_whole_block_named_so(tmp_path: Path) -> None:
    """A ResNet's units have no attention branch: each gets what the whole-block call gives it (skip where residual,
    the resample fallback elsewhere), its label naming the whole block. A ViT's stages carry no measured branches
    (:func:`network_stages`), the pre-logits stage no module: the same. A branch with ``target="output"`` is refused."""
    _, model, units, config = _setup(tmp_path, "torchvision resnet18")
    x, reference = _inputs(config, 1, 0), _inputs(config, 3, 1)
    block = intervene(model, x, units, "skip", reference)
    chosen = intervene(model, x, units, "skip", reference, branch="attention")
    assert block.methods == tuple("skip" if u.residual else "resample" for u in units)
    assert chosen.methods == tuple(m + " of the whole block" for m in block.methods)
    assert torch.equal(chosen.drops, block.drops) and chosen.branches == ("",) * len(units)
    _, vit, _, config = _setup(tmp_path, "timm test_vit")
    x, reference = _inputs(config, 1, 0), _inputs(config, 3, 1)
    stages = network_stages(vit.backbone)
    by_stage = intervene(vit, x, stages, "resample", reference, branch="mlp")
    assert set(by_stage.methods) == {"resample of the whole block"}
    assert torch.equal(by_stage.drops, intervene(vit, x, stages, "resample", reference).drops)
    with pytest.raises(ValueError, match="branch must be one of"):
        intervene(vit, x, stages, "mean", reference, target="output", branch="mlp")
    with pytest.raises(ValueError, match="branch must be one of"):
        intervene(vit, x, stages, "mean", reference, branch="ffn")


def test_mean_and_reference_inputs(tmp_path: Path) -> None:
    """Mean-ablation: a residual unit's branch takes its mean over the references; reference inputs are a seeded,
    class-balanced sample of the training split."""
    from laya.data.datasets import ImageArrays

    network, model, units, config = _setup(tmp_path, "torchvision resnet18")
    x, reference = _inputs(config, 1, 0), _inputs(config, 5, 1)
    profile = intervene(model, x, units, "mean", reference)
    unit = units[1]  # layer1.1, residual
    module = network.get_submodule(unit.name)
    inputs, outputs = _recorded(network, reference, module)
    branch = (outputs - inputs).mean(0, keepdim=True)
    with torch.no_grad():
        p = torch.softmax(logits_of(network, x), -1)[0]
    y = int(p.argmax())
    expected = p[y] - _hand(network, x, module, lambda inp, out: inp + branch)[0, y]
    assert abs(float(profile.drops[0, 1]) - float(expected)) < 1e-10 and profile.methods[1] == "mean-ablation"
    data = ImageArrays(torch.arange(20 * 3 * 4 * 4).view(20, 3, 4, 4).to(torch.uint8),
                       torch.arange(20) % 4, ("a", "b", "c", "d"))  # fmt: skip
    chosen = reference_inputs(data, 8, seed=3)
    assert chosen.shape == (8, 3, 4, 4) and torch.equal(chosen, reference_inputs(data, 8, seed=3))
    labels = [int(data.labels[(data.images.flatten(1) == c.flatten()).all(1).nonzero()[0, 0]]) for c in chosen]
    assert sorted(labels) == [0, 0, 1, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match="needs reference inputs"):
        intervene(model, x, units, "resample")
    with pytest.raises(ValueError, match="method must be one of"):
        intervene(model, x, units, "zero", reference)


@pytest.mark.parametrize(("family", "branch"), [("torchvision resnet18", "block"), ("timm test_vit", "attention")])
def test_twelve_concurrent_calls_give_the_single_call_result(tmp_path: Path, family: str, branch: str) -> None:
    _, model, units, config = _setup(tmp_path, family)
    reference = _inputs(config, 4, 1)
    inputs = [_inputs(config, 1, seed % 3) for seed in range(12)]
    alone = [intervene(model, x, units, "resample", reference, branch=branch).drops for x in inputs[:3]] * 4
    got: dict[int, torch.Tensor] = {}

    def run(i: int) -> None:
        got[i] = intervene(model, inputs[i], units, "resample", reference, branch=branch).drops

    threads = [threading.Thread(target=run, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(torch.equal(got[i], alone[i]) for i in range(12))


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, str]]:
    """Each rows pass of :func:`intervene` as ``(grown, "ok" or the error it raised)``."""
    from laya.analysis.network import interventions

    calls: list[tuple[bool, str]] = []
    run = interventions.rows_pass

    def spy(*args, grown: bool, **kwargs):
        try:
            hidden = run(*args, grown=grown, **kwargs)
        except RuntimeError as error:
            calls.append((grown, type(error).__name__))
            raise
        calls.append((grown, "ok"))
        return hidden

    monkeypatch.setattr(interventions, "rows_pass", spy)
    return calls


GROWN = [("torchvision resnet18", "block"), ("timm test_vit", "block"), ("timm test_vit", "mlp"),
         ("transformers vit", "attention")]


@pytest.mark.parametrize(("family", "branch"), GROWN)
def test_rows_join_where_they_part_from_the_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, family: str, branch: str
) -> None:
    """Every family carries the grown batch (no row reruns the modules before its unit): one rows pass, grown,
    whose profile is the one of every row run through the whole network."""
    from laya.analysis.network import interventions

    _, model, units, config = _setup(tmp_path, family)
    x, reference = _inputs(config, 2, 0), _inputs(config, 3, 1)
    calls = _spied(monkeypatch)
    profile = intervene(model, x, units, "resample", reference, branch=branch)
    assert calls == [(True, "ok")]
    run = interventions.rows_pass
    monkeypatch.setattr(interventions, "rows_pass", lambda *a, grown, **k: run(*a, grown=False, **k))
    whole = intervene(model, x, units, "resample", reference, branch=branch)
    assert torch.allclose(profile.drops, whole.drops, atol=1e-10, rtol=0) and profile.drops.abs().max() > 1e-3


class _Residual(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.branch = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Conv2d(width, width, 3, padding=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.branch(x)


class _LongSkip(torch.nn.Module):
    """Two residual units under a skip of their own: ``h + body(h)`` keeps ``h`` from before the units; ``cat``:
    joined as a DenseNet joins its features, ``cat([h, body(h)], 1)``; ``in_place``: added in place to a copy of
    ``h``."""

    def __init__(self, join: str = "add") -> None:
        super().__init__()
        self.join = join
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.body = torch.nn.Sequential(_Residual(8), _Residual(8))
        self.fc = torch.nn.Linear(16 if join == "cat" else 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        if self.join == "in_place":
            kept = h * 1  # not the units' input itself
            kept += self.body(h)
            h = kept
        else:
            h = torch.cat([h, self.body(h)], 1) if self.join == "cat" else h + self.body(h)
        return self.fc(h.mean((2, 3)))


@pytest.mark.parametrize(("join", "batch"), [("add", 1), ("add", 2), ("cat", 2), ("in_place", 1), ("in_place", 2)])
def test_a_tensor_kept_across_the_units_is_carried_to_their_rows(
    monkeypatch: pytest.MonkeyPatch, join: str, batch: int
) -> None:
    """``h + body(h)`` and ``cat([h, body(h)], 1)`` combine a batch of ``B`` from before the units with the grown
    one: ``h`` is carried to the units' rows (each row's ``h`` is its input's) and the pass stays grown, with the
    drops of the hand-patched network (the carry tried where the plain grown pass fails, then kept for the
    backbone). An in-place addition ``h' += body(h)`` is not carried (``h'`` may have other owners):
    its size mismatch sends every row through the whole network, with the same drops."""
    from laya.analysis.network import interventions
    from laya.model.backbones.wrapped import wrap
    from laya.model.classifier import LayerwiseClassifier
    from laya.model.own_head import own_head

    torch.manual_seed(0)
    network = _LongSkip(join).eval()
    backbone = wrap(network, ["body"], input_size=8, pre_logits=True)
    model = LayerwiseClassifier(backbone, own_head(backbone)).double().eval()  # the network's weights too
    g = torch.Generator().manual_seed(0)
    x, reference = (torch.randn(n, 3, 8, 8, generator=g, dtype=torch.float64) for n in (batch, 3))
    units = network_units(model.backbone, x)
    assert [u.name for u in units] == ["body.0", "body.1"] and all(u.residual for u in units)
    calls = _spied(monkeypatch)
    profile = intervene(model, x, units, "resample", reference)
    expected = {"add": [(True, "ok")] if batch == 1 else [(True, "RuntimeError"), (True, "ok")],  # plain, carried
                "cat": [(True, "RuntimeError"), (True, "ok")],
                "in_place": [(True, "RuntimeError"), (True, "RuntimeError"), (False, "ok")]}[join]  # then whole
    assert calls == expected
    if join != "in_place":  # a backbone that needed the carry gets it at once from then on
        assert intervene(model, x, units, "resample", reference).drops.equal(profile.drops)
        assert calls[len(expected):] == [(True, "ok")] and bool(
            interventions.CARRIES.get(model.backbone)) == (len(expected) == 2)
    with torch.no_grad():
        p = torch.softmax(network(x), -1)
    y, rows = p.argmax(-1), torch.arange(batch)
    for u, unit in enumerate(units):
        module = network.get_submodule(unit.name)
        inputs, outputs = _recorded(network, reference, module)
        runs = [_hand(network, x, module, lambda inp, out, b=outputs[k : k + 1] - inputs[k : k + 1]: inp + b)
                for k in range(3)]  # fmt: skip
        expected = p[rows, y] - torch.stack(runs).mean(0)[rows, y]
        assert torch.allclose(profile.drops[:, u], expected, atol=1e-10, rtol=0), unit.name
    assert profile.drops.abs().max() > 1e-4


def test_a_densenet_carries_the_grown_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A torchvision DenseNet's layers concatenate the features of every layer before them: the features from before
    a unit are carried to its rows, so its units' rows join where they part from the input (one grown pass, issue
    47's breadth run: every row ran the whole network before), with the profile of every row run whole."""
    from torchvision.models import DenseNet

    from laya.analysis.network import interventions
    from laya.model.backbones.wrapped import wrap
    from laya.model.classifier import LayerwiseClassifier
    from laya.model.own_head import own_head

    torch.manual_seed(0)
    network = DenseNet(growth_rate=4, block_config=(2, 2), num_init_features=8, bn_size=2, num_classes=5).eval()
    backbone = wrap(network, ["features.denseblock1", "features.denseblock2"], input_size=16, pre_logits=True)
    model = LayerwiseClassifier(backbone, own_head(backbone)).double().eval()
    g = torch.Generator().manual_seed(0)
    x, reference = (torch.randn(n, 3, 16, 16, generator=g, dtype=torch.float64) for n in (2, 3))
    units = network_units(model.backbone, x)
    assert len(units) >= 4
    calls = _spied(monkeypatch)
    profile = intervene(model, x, units, "resample", reference)
    assert calls == [(True, "RuntimeError"), (True, "ok")]  # the plain grown pass, then carried
    run = interventions.rows_pass
    monkeypatch.setattr(interventions, "rows_pass", lambda *a, grown, **k: run(*a, grown=False, **k))
    whole = intervene(model, x, units, "resample", reference)
    assert torch.allclose(profile.drops, whole.drops, atol=1e-10, rtol=0) and profile.drops.abs().max() > 1e-4


@pytest.mark.parametrize(("family", "branch"), [("torchvision resnet18", "block"), ("timm test_vit", "attention")])
def test_references_recorded_once_serve_every_input(tmp_path: Path, family: str, branch: str) -> None:
    """:func:`record_references` then any number of inputs gives what passing the reference images gives, for each
    method; means alone serve mean-ablation; references of other units or another branch are refused."""
    from laya.analysis.network import record_references

    _, model, units, config = _setup(tmp_path, family)
    reference = _inputs(config, 4, 1)
    recorded = record_references(model, units, reference, branch)
    means = record_references(model, units, reference, branch, mean=True)
    assert recorded.count == means.count == 4 and all(len(v) == 1 for v in means.values)
    assert set(recorded.kinds) == ({"part"} if branch != "block" else {"branch"})  # one per unit; all keep the input
    for seed in (0, 1):
        x = _inputs(config, 2, seed)
        for method, given in [("resample", recorded), ("skip", recorded), ("mean", recorded), ("mean", means)]:
            expected = intervene(model, x, units, method, reference, branch=branch)
            got = intervene(model, x, units, method, given, branch=branch)
            assert got.methods == expected.methods and got.references == expected.references, method
            assert torch.allclose(got.drops, expected.drops, atol=1e-12, rtol=0), method
    with pytest.raises(ValueError, match="keep only their means"):
        intervene(model, x, units, "resample", means, branch=branch)
    with pytest.raises(ValueError, match="were recorded for units"):
        intervene(model, x, units[1:], "resample", recorded, branch=branch)
    with pytest.raises(ValueError, match="were recorded for units"):
        intervene(model, x, units, "resample", recorded, branch="mlp" if branch != "mlp" else "block")
    with pytest.raises(ValueError, match="target 'output', not for these"):
        intervene(model, x, units, "resample", record_references(model, units, reference, target="output"))
    with pytest.raises(ValueError, match="the references hold unit"):  # measured otherwise on the references
        swapped = tuple("output" if k != "output" else "branch" for k in recorded.kinds)
        intervene(model, x, units, "resample", dataclasses.replace(recorded, kinds=swapped), branch=branch)
    with pytest.raises(ValueError, match="at least one input"):
        record_references(model, units, reference[:0])


def test_out_of_memory_is_not_retried_with_more_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole-row pass holds more than the grown one: a device out of memory is raised, not retried."""
    from laya.analysis.network import interventions

    _, model, units, config = _setup(tmp_path, "torchvision resnet18")
    calls = []

    def full(*args, grown: bool, **kwargs):
        calls.append(grown)
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(interventions, "rows_pass", full)
    with pytest.raises(torch.OutOfMemoryError):
        intervene(model, _inputs(config, 1, 0), units, "resample", _inputs(config, 2, 1))
    assert calls == [True]


@pytest.mark.parametrize("family", ["torchvision", "timm"])
def test_every_unit_but_the_stem_keeps_the_input_of_a_resnet18(family: str) -> None:
    """A ResNet-18's downsampling units keep the input through their projection shortcut: skip is the network with
    the unit's output replaced by ``relu(downsample(x))``, and no two inputs of one predicted class share a bar
    there (``drop_i - drop_j = p_i - p_j`` only where the rest of the network no longer sees the input: the stem)."""
    import timm
    import torchvision

    from laya.model.backbones import wrap
    from laya.model.classifier import LayerwiseClassifier
    from laya.model.own_head import own_head

    torch.manual_seed(0)
    network = (torchvision.models.resnet18(num_classes=3) if family == "torchvision"
               else timm.create_model("resnet18", pretrained=False, num_classes=3)).eval()  # fmt: skip
    backbone = wrap(network, ["bn1", "layer1", "layer2", "layer3", "layer4"], input_size=32, pre_logits=True)
    model = LayerwiseClassifier(backbone, own_head(backbone)).double().eval()
    network, units = network.double(), network_units(backbone, torch.zeros(1, 3, 32, 32, dtype=torch.float64))
    assert [u.name for u in units if not u.residual] == ["bn1"]
    assert [u.shortcut for u in units if u.shortcut] == [f"layer{s}.0.downsample" for s in (2, 3, 4)]
    g = torch.Generator().manual_seed(0)
    x, reference = torch.randn(6, 3, 32, 32, generator=g).double(), torch.randn(4, 3, 32, 32, generator=g).double()
    skip = intervene(model, x, units, "skip", reference)
    with torch.no_grad():
        p = torch.softmax(logits_of(network, x), -1)
    y, rows = p.argmax(-1), torch.arange(len(x))
    for u, unit in enumerate(units):
        if unit.shortcut:
            module = network.get_submodule(unit.name)
            skipped = _hand(network, x, module, lambda inp, out, n=unit: _stream(network, n, inp))
            assert torch.allclose(skip.drops[:, u], p[rows, y] - skipped[rows, y], atol=1e-6, rtol=0), unit.name
    profile = intervene(model, x, units, "resample", reference)
    pairs = [(i, j) for i in range(len(x)) for j in range(i + 1, len(x)) if y[i] == y[j]]
    assert pairs
    for i, j in pairs:
        shared = (profile.drops[i] - profile.drops[j] - (profile.probability[i] - profile.probability[j])).abs()
        assert shared[0] < 1e-9 and (shared[1:] > 1e-7).all(), (i, j, shared)


@pytest.mark.parametrize(("family", "branch"), [("torchvision resnet18", "block"), ("timm test_vit", "attention")])
def test_units_whose_rows_would_not_fit_run_in_groups_with_the_same_profile(
    tmp_path: Path, family: str, branch: str, monkeypatch: pytest.MonkeyPatch
) -> None:  # fmt: skip
    """A network of many units at a large size (a DenseNet's 58 at 224 px: 465 rows an input, over 3 GB) runs its
    units in groups whose rows fit: the same drops, predictions, logits and names as one pass of them all."""
    from laya.analysis.network import interventions, record_references

    _, model, units, config = _setup(tmp_path, family)
    x, reference = _inputs(config, 2, 0), _inputs(config, 3, 1)
    recorded = record_references(model, units, reference, branch)
    whole = {m: intervene(model, x, units, m, recorded, branch=branch) for m in ("resample", "skip", "mean")}
    passes: list[int] = []
    real = interventions.rows_pass
    monkeypatch.setattr(interventions, "rows_pass", lambda *a, **k: passes.append(len(a[1])) or real(*a, **k))
    monkeypatch.setattr(interventions, "pass_rows", lambda network, x_, rows: 2 * (1 + 3 * 2))  # two units a pass
    for method, expected in whole.items():
        passes.clear()
        got = intervene(model, x, units, method, recorded, branch=branch)
        if method == "resample":  # 3 rows an input per unit: two units a pass
            assert len(passes) >= (len(units) + 1) // 2, passes
        for name in ("units", "stages", "methods", "branches", "residual", "references"):
            assert getattr(got, name) == getattr(expected, name), (method, name)
        for name in ("drops", "logits", "base_logits", "probability"):
            torch.testing.assert_close(getattr(got, name), getattr(expected, name), rtol=0, atol=1e-12)
        assert torch.equal(got.ablated_predictions, expected.ablated_predictions)
