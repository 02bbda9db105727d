"""Which unit's Grad-CAM to trust: on a network built so that its prediction reads only the top-left quadrant, the
unit that sees only that quadrant beats a random map and is chosen; the same maps replaced by noise beat nothing."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch import nn

from laya.analysis.network import gradcam_choice as gc
from laya.analysis.network.gradcam import UnitCAM, resized

SIZE = 16
UNITS = ["stem", "region"]


class _Region(nn.Module):
    """Keeps the top-left quadrant of its input, zero elsewhere."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros_like(x)
        mask[..., : SIZE // 2, : SIZE // 2] = 1
        return x * mask


class _TopLeft(nn.Module):
    """A 1x1 conv over the whole image (``stem``, the identity), then only its top-left quadrant (``region``),
    averaged and read by a linear classifier: the class is the channel brightest in the top-left quadrant."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 3, 1, bias=False)
        self.stem.weight.data = torch.eye(3).view(3, 3, 1, 1)
        self.region = _Region()
        self.fc = nn.Linear(3, 3)
        self.fc.weight.data, self.fc.bias.data = 40 * torch.eye(3), torch.zeros(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.region(torch.relu(self.stem(x))).mean((2, 3)))


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    """Uniform noise, but in the top-left quadrant the channel of the image's class is bright (128..255) and the
    others dark (0..127): 4 images per class."""
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 256, (12, 3, SIZE, SIZE), generator=g)
    quadrant = x[..., : SIZE // 2, : SIZE // 2] // 2
    labels = torch.arange(3).repeat(4)
    quadrant[torch.arange(12), labels] += 128
    x[..., : SIZE // 2, : SIZE // 2] = quadrant
    return x.to(torch.uint8)


def _choice(images: torch.Tensor) -> gc.GradcamChoice:
    return gc.gradcam_choice(_TopLeft().eval(), lambda x: x.float() / 255.0, images, UNITS, resamples=200, seed=0,
                             batch_size=8, steps=8, fractions=(0.25, 0.5, 0.75), repeats=1)  # fmt: skip


def test_the_unit_that_sees_the_region_beats_random_and_is_chosen(images: torch.Tensor) -> None:
    choice = _choice(images)
    rows = choice.rows.set_index(["unit", "metric"])
    assert list(choice.rows.columns) == list(gc.ROW_COLUMNS) and len(rows) == 2 * len(gc.METRICS)
    # the stem's map (the class's channel over the whole frame) is informative too; the region's is better
    assert choice.winners("road") == choice.winners("deletion") == UNITS
    assert rows.loc[("region", "road"), "diff_low"] > 0.2 and rows.loc[("region", "road"), "random"] < 0.01
    assert rows.loc[("region", "road"), "diff_low"] > rows.loc[("stem", "road"), "diff_high"]
    assert choice.chosen == "region" and choice.wins["region"] == choice.wins.max() == 3
    assert rows.loc[("region", "road"), "random"] == rows.loc[("stem", "road"), "random"]  # one grid: one random map
    assert list(choice.units[["h", "w"]].itertuples(index=False, name=None)) == [(SIZE, SIZE)] * 2
    assert (choice.units["seconds"] > 0).all() and choice.forward_seconds > 0
    ratio = choice.units["seconds"] / choice.forward_seconds
    assert choice.units["x_forward"].tolist() == pytest.approx(ratio.tolist())
    assert gc.choice_line(choice).startswith("Grad-CAM to use: region, beats random on insertion, road, deletion (12 ")


def test_maps_replaced_by_noise_beat_nothing(images: torch.Tensor, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each unit's map replaced by uniform noise on its grid (another seed than the random baseline's): no unit
    beats random on any metric, none is chosen, and the line says so."""
    real = gc.unit_gradcam
    generator = torch.Generator().manual_seed(99)

    def noise(network: nn.Module, x: torch.Tensor, units, classes=None) -> UnitCAM:
        cam = real(network, x, units, classes)
        maps = torch.cat([resized(torch.rand(len(x), 1, *g, generator=generator), x.shape[-2:]) for g in cam.grids], 1)
        return UnitCAM(maps, cam.classes, cam.logits, cam.grids)

    monkeypatch.setattr(gc, "unit_gradcam", noise)
    choice = _choice(images)
    assert not choice.beats.any() and choice.chosen is None and (choice.wins == 0).all()
    assert gc.choice_line(choice).startswith("Grad-CAM: no unit's map beats a random one")


def test_the_rule_counts_metrics_then_the_road_lower_bound_then_the_earlier_unit() -> None:
    def row(unit: str, metric: str, low: float, high: float) -> list:
        return [unit, metric, 0, 0, 0, 0, 0, 0, (low + high) / 2, low, high, 0.0, 0.0]

    rows = pd.DataFrame([row("a", "insertion", 0.1, 0.2), row("a", "road", 0.01, 0.2), row("b", "insertion", 0.1, 0.2),
                         row("b", "road", 0.05, 0.2), row("c", "road", 0.3, 0.4), row("c", "deletion", 0.1, 0.2)],
                        columns=list(gc.ROW_COLUMNS))  # fmt: skip
    units = pd.DataFrame([[u, 2, 2, 0.1, 1.0] for u in "abc"], columns=list(gc.UNIT_COLUMNS))
    choice = gc.GradcamChoice(10, 0, rows, units, 0.1, 0.2)
    assert choice.beats.tolist() == [True, True, True, True, True, False]  # deletion is better lower
    assert choice.chosen == "b"  # a and b beat random on two metrics; b's ROAD lower bound is larger
    assert gc.choose(rows, choice.beats & (rows["unit"] != "b"), list("abc")) == "a"  # a: 2 wins, c: 1
    even = rows.assign(diff_low=0.05)
    assert gc.choose(even, choice.beats, list("abc")) == "a"  # every bound equal: the earlier unit
    corrected = rows.assign(holm_p=0.2)  # the CIs exclude 0, the family's correction does not
    assert not gc.GradcamChoice(10, 0, corrected, units, 0.1, 0.2).beats.any()
    assert gc.choose(rows, rows["unit"] == "z", list("abc")) is None


def test_random_maps_take_the_grid_of_the_unit() -> None:
    g = torch.Generator().manual_seed(0)
    coarse = gc.random_maps(3, (2, 2), (8, 8), 4, g)
    assert coarse.shape == (3, 4, 4) and coarse.amin() >= 0 and coarse.amax() < 1
    assert len(coarse[0].unique()) > 4  # bilinear between four cells, not four blocks
    assert (gc.random_maps(2, (1, 1), (8, 8), 4, g) == 0).all()  # a 1x1 grid orders nothing
