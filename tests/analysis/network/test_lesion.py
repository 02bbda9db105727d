"""The lesion study on tiny networks built to have a known answer: a unit whose branch is zero, and a unit the
prediction depends on alone."""

from __future__ import annotations

import pytest
import torch

from laya.analysis.network import intervene, network_units
from laya.analysis.network.lesion import CLASS_COLUMNS, INTACT, lesion_masks, lesion_study, skipped_predictions

CLASSES = ["a", "b", "c"]


class _Unit(torch.nn.Module):
    """``s(x) + f(x)``, a 1x1 projection ``s`` and a branch ``f`` of two 1x1 convolutions, each the identity or 0."""

    def __init__(self, shortcut: bool) -> None:
        super().__init__()
        self.downsample = torch.nn.Conv2d(3, 3, 1, bias=False)
        self.branch = torch.nn.Sequential(torch.nn.Conv2d(3, 3, 1, bias=False), torch.nn.Conv2d(3, 3, 1, bias=False))
        for conv, kept in ((self.downsample, shortcut), *((c, not shortcut) for c in self.branch)):
            conv.weight.data = torch.eye(3).view(3, 3, 1, 1) * float(kept)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(x) + self.branch(x)


class _Net(torch.nn.Module):
    """The class is the channel with the largest mean, read by an identity classifier after the two units."""

    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(_Unit(True), _Unit(False))  # a no-op, then decisive
        self.fc = torch.nn.Linear(3, 3)
        self.fc.weight.data, self.fc.bias.data = torch.eye(3), torch.tensor([0.0, 0.0, 1e-3])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x).mean((2, 3)))


@pytest.fixture(scope="module")
def setup():
    from laya.model.backbones.wrapped import wrap
    from laya.model.classifier import LayerwiseClassifier
    from laya.model.own_head import own_head

    backbone = wrap(_Net().eval(), ["body"], input_size=4, pre_logits=True)
    model = LayerwiseClassifier(backbone, own_head(backbone)).double().eval()
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(3).repeat(10)  # 10 inputs per class
    x = torch.randn(30, 3, 4, 4, generator=g, dtype=torch.float64)
    x[torch.arange(30), labels] += 5.0
    units = network_units(model.backbone, x)
    return model, x, labels, units


def test_units_are_measured_as_built(setup) -> None:
    _, _, _, units = setup
    assert [u.name for u in units] == ["body.0", "body.1"] and all(u.residual for u in units)
    assert [u.shortcut for u in units] == ["body.0.downsample", "body.1.downsample"]


def test_a_no_op_unit_drops_nothing_and_the_decisive_unit_drops_to_chance(setup) -> None:
    model, x, labels, units = setup
    skip = intervene(model, x, units, "skip")
    masks = torch.eye(2, dtype=torch.bool)
    assert torch.equal(skipped_predictions(model, x, units, masks), skip.ablated_predictions.T)  # as intervene
    study = lesion_study(labels, skip.prediction, {"skip": skip.ablated_predictions}, {"skip": skip.methods}, None,
                         None, [u.name for u in units], CLASSES, resamples=200)  # fmt: skip
    assert study.intact == [1.0, 1.0, 1.0]
    rows = study.single.set_index("unit")
    assert rows.loc["body.0", "accuracy"] == 1.0 and rows.loc["body.0", "drop"] == 0.0
    assert rows.loc["body.0", "drop_low"] == rows.loc["body.0", "drop_high"] == 0.0
    assert rows.loc["body.1", "accuracy"] == pytest.approx(1 / 3)  # every input the bias's class: chance
    assert rows.loc["body.1", "drop"] == pytest.approx(2 / 3) and rows.loc["body.1", "drop_low"] > 0.4
    assert list(rows["method"]) == ["skip", "skip"]


def test_the_k_curve_starts_at_the_intact_accuracy_and_ends_at_chance(setup) -> None:
    model, x, labels, units = setup
    masks, ks = lesion_masks([u.residual for u in units], draws=4, seed=1)
    assert masks.shape == (9, 2) and ks.tolist() == [0, 1, 1, 1, 1, 2, 2, 2, 2]
    assert (masks.sum(1) == ks).all()
    curve = skipped_predictions(model, x, units, masks)
    prediction = skipped_predictions(model, x, units, masks[:1])[0]
    study = lesion_study(labels, prediction, {}, {}, curve, ks, [u.name for u in units], CLASSES, resamples=50)
    points = study.curve.set_index("k")
    assert points.loc[0, "mean"] == study.intact[0] == 1.0 and points.loc[0, "sd"] == 0.0
    assert points.loc[2, "mean"] == pytest.approx(1 / 3) and points.loc[2, "draws"] == 4
    hit = (curve[1:5] == labels).double().mean(1)  # k = 1: no-op draws keep 1.0, decisive draws 1/3
    assert (points.loc[1, "min"], points.loc[1, "max"]) == pytest.approx((float(hit.min()), float(hit.max())))
    assert points.loc[1, "mean"] == pytest.approx(float(hit.mean()))
    assert sorted(set(hit.tolist())) == pytest.approx([1 / 3, 1.0])  # both units drawn


def test_the_per_class_table_sums_to_the_whole(setup) -> None:
    model, x, labels, units = setup
    skip = intervene(model, x, units, "skip")
    study = lesion_study(labels, skip.prediction, {"skip": skip.ablated_predictions}, {"skip": skip.methods}, None,
                         None, [u.name for u in units], CLASSES, resamples=50)  # fmt: skip
    table = study.classes["skip"]
    assert list(table.index) == ["all", *CLASSES] and list(table.columns) == [INTACT, "body.0", "body.1", "n"]
    per_class = table.loc[CLASSES]
    assert per_class["n"].sum() == table.loc["all", "n"] == 30
    for column in (INTACT, "body.0", "body.1"):
        weighted = (per_class[column] * per_class["n"]).sum() / per_class["n"].sum()
        assert weighted == pytest.approx(table.loc["all", column])
    assert table.loc["c", "body.1"] == 1.0 and table.loc["a", "body.1"] == 0.0  # the bias's class keeps every input


def test_a_unit_that_does_not_keep_its_input_is_not_skipped() -> None:
    assert lesion_masks([False, True, False], draws=2)[0][:, [0, 2]].any().item() is False
    with pytest.raises(ValueError, match="at least 1"):
        lesion_masks([True], draws=0)


def test_per_class_rows_carry_a_ci_and_the_paired_drop_from_intact(setup) -> None:
    """Skipping the decisive unit sends every input to the bias's class ``c``: classes a and b lose all (drop 1 with
    a CI of [1, 1]), c loses nothing; the no-op unit drops nothing anywhere; each row agrees with the class table."""
    model, x, labels, units = setup
    skip = intervene(model, x, units, "skip")
    study = lesion_study(labels, skip.prediction, {"skip": skip.ablated_predictions}, {"skip": skip.methods}, None,
                         None, [u.name for u in units], CLASSES, resamples=200)  # fmt: skip
    rows = study.by_class.set_index(["class", "unit"])
    assert list(study.by_class.columns) == list(CLASS_COLUMNS) and set(study.by_class["intervention"]) == {"skip"}
    assert len(rows) == len(CLASSES) * 3 and (rows["n"] == 10).all()  # per class: intact and both units
    for cls in ("a", "b"):
        assert rows.loc[(cls, "body.1"), ["accuracy", "drop", "drop_low", "drop_high"]].tolist() == [0.0, 1.0, 1.0, 1.0]
    assert rows.loc[("c", "body.1"), "drop"] == 0.0 and rows.loc[("c", "body.1"), "accuracy"] == 1.0
    assert (rows.xs("body.0", level="unit")["drop"] == 0).all()
    assert rows.xs(INTACT, level="unit")["drop"].isna().all()  # intact has no drop from itself
    table = study.classes["skip"]
    for (cls, unit), row in rows.iterrows():
        assert row["accuracy"] == pytest.approx(table.loc[cls, unit])
    mixed = skip.ablated_predictions.clone()
    mixed[:5, 1] = labels[:5]  # five inputs of classes a, b, c kept: a class's CI now has width
    wide = lesion_study(labels, skip.prediction, {"skip": mixed}, {"skip": skip.methods}, None, None,
                        [u.name for u in units], CLASSES, resamples=200).by_class  # fmt: skip
    wide = wide.set_index(["class", "unit"])
    row = wide.loc[("a", "body.1")]
    assert row["drop_low"] < row["drop"] < row["drop_high"] and row["low"] < row["accuracy"] < row["high"]


class _Plain(torch.nn.Module):
    """A plain chain without any shortcut: a stem that widens 3 -> 4 channels, then two blocks that keep the shape
    (the first the identity, the second swapping the decisive channels), then a linear classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1, bias=False), torch.nn.Identity())
        self.stem[0].weight.data = torch.cat([torch.eye(3), torch.zeros(1, 3)]).view(4, 3, 1, 1)
        self.body = torch.nn.Sequential(*(torch.nn.Sequential(torch.nn.Conv2d(4, 4, 1, bias=False),
                                                              torch.nn.Identity()) for _ in range(2)))  # fmt: skip
        self.body[0][0].weight.data = torch.eye(4).view(4, 4, 1, 1)
        self.body[1][0].weight.data = torch.eye(4)[[1, 0, 2, 3]].view(4, 4, 1, 1)  # classes a and b swapped
        self.fc = torch.nn.Linear(4, 3)
        self.fc.weight.data, self.fc.bias.data = torch.eye(4)[:3], torch.zeros(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(self.stem(x)).mean((2, 3)))


def test_a_plain_networks_blocks_are_deleted_by_passing_their_input_on() -> None:
    """Veit et al. delete a plain network's layer: a block without a shortcut that keeps the shape is skipped by
    passing its input on (the identity block changes nothing, the swapping one swaps the prediction of classes a and
    b), alone and in the k-curve; the stem, which widens, cannot be skipped and gets the resample fallback."""
    from laya.analysis.network.interventions import record_references
    from laya.analysis.network.lesion import PASSED_ON, lesion_batch, skippable
    from laya.model.backbones.wrapped import wrap
    from laya.model.classifier import LayerwiseClassifier
    from laya.model.own_head import own_head

    backbone = wrap(_Plain().eval(), ["stem", "body"], input_size=4, pre_logits=True)
    model = LayerwiseClassifier(backbone, own_head(backbone)).double().eval()
    g = torch.Generator().manual_seed(1)
    labels = torch.arange(3).repeat(6)
    x = torch.randn(18, 3, 4, 4, generator=g, dtype=torch.float64)
    x[torch.arange(18), labels] += 5.0
    units = network_units(model.backbone, x)
    assert [u.name for u in units] == ["stem", "body.0", "body.1"] and not any(u.residual for u in units)
    skips = skippable(model, x, units)
    assert skips == [False, True, True]
    masks, ks = lesion_masks(skips, draws=2, seed=0)
    assert ks.tolist() == [0, 1, 1, 2, 2] and not masks[:, 0].any()
    recorded = record_references(model, units, x[:4])
    got, methods = lesion_batch(model, x, units, recorded, masks, skips)
    swapped = torch.tensor([1, 0, 2])[labels]
    assert torch.equal(got["predictions"], swapped)  # the intact network swaps a and b
    assert torch.equal(got["skip"][:, 1], swapped) and torch.equal(got["skip"][:, 2], labels)  # deleted: unswapped
    assert methods["skip"] == ("resample", PASSED_ON, PASSED_ON)
    assert torch.equal(got["curve"][:, 0], swapped) and torch.equal(got["curve"][:, -1], labels)  # k = 0 and k = 2
    study = lesion_study(labels, got["predictions"], {"skip": got["skip"]}, methods, got["curve"].T, ks,
                         [u.name for u in units], CLASSES, resamples=200)  # fmt: skip
    rows = study.single.set_index("unit")
    assert rows.loc["body.0", "drop"] == 0.0 and rows.loc["body.1", "accuracy"] == 1.0  # a and b right again
    assert study.intact[0] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="changes the shape without a shortcut"):
        skipped_predictions(model, x, units, torch.tensor([[True, False, False]]))


def test_a_pass_too_large_for_memory_is_split_and_gives_the_same_curve(setup, monkeypatch) -> None:
    """Rows per pass are capped by the largest activation of one row (``pass_rows``), never by a count alone: a
    budget of one row's activations gives passes of one setting each (here ``len(x)`` rows) and the same classes."""
    import laya.analysis.network.lesion as lesion
    from laya.model.hooks import pass_rows

    model, x, labels, units = setup
    masks, _ = lesion_masks([u.residual for u in units], draws=4, seed=1)
    whole = skipped_predictions(model, x, units, masks)
    row = x[:1].numel() * x.element_size()  # its largest activation: every module keeps the input's shape
    assert pass_rows(model.backbone, x, 512, budget=10**9) == 512 and pass_rows(model.backbone, x, 512, budget=1) == 1
    assert pass_rows(model.backbone, x, 512, budget=3 * row) == 3
    sizes: list[int] = []
    original = lesion._skipped
    monkeypatch.setattr(lesion, "_skipped", lambda m, x_, u, part: sizes.append(len(part)) or original(m, x_, u, part))
    monkeypatch.setattr(lesion, "pass_rows", lambda network, x_, rows: pass_rows(network, x_, rows, budget=row))
    assert torch.equal(skipped_predictions(model, x, units, masks), whole)
    assert sizes == [1] * len(masks)  # a budget of one row: one setting (len(x) rows, at least one) per pass
