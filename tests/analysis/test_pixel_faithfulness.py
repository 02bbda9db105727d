"""Known answers of the pixel-level faithfulness metrics on a model whose logit is a weighted pixel sum."""

from __future__ import annotations

import pytest
import torch

from laya.analysis.pixel_faithfulness import (
    auc,
    deletion_auc,
    insertion_auc,
    perturbation_curve,
    pixel_order,
    road,
    sum_maps,
)

SCALE = 20.0


def score(x: torch.Tensor) -> torch.Tensor:
    """Two classes: logit_0 = sum of pixels / SCALE, logit_1 = 0, so p_0 = sigmoid(sum / SCALE)."""
    s = x.double().flatten(1).sum(1) / SCALE
    return torch.stack([s, torch.zeros_like(s)], dim=1)


@pytest.fixture
def image() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return (torch.randperm(16, generator=g).double() + 1).view(1, 1, 4, 4)  # values 1..16, distinct


def test_pixel_order_descending_and_ties_shared():
    maps = torch.tensor([[[0.1, 0.9], [0.5, 0.3]]])
    assert pixel_order(maps).tolist() == [[1, 2, 3, 0]]
    flat = torch.zeros(2, 4, 4)  # a ReLU'd map's zeros: a seeded random order, the same for every map
    order = pixel_order(flat)
    assert sorted(order[0].tolist()) == list(range(16)) and order[0].tolist() == order[1].tolist()
    assert order[0].tolist() != list(range(16))  # not raster order
    with pytest.raises(ValueError, match="B, H, W"):
        pixel_order(torch.zeros(4, 4))


def test_float64_sum_keeps_the_order_a_float32_sum_rounds_away():
    """A large per-pixel term (0.008, as block 5's on the CNN) plus small terms a float32 rounding step of it:
    summed in float32 every pixel ties and the shared permutation orders them; in float64 the small terms do."""
    big = torch.full((1, 4, 4), 0.008, dtype=torch.float64)
    small = (torch.arange(16, dtype=torch.float64) * 1e-11).view(1, 4, 4)  # far below float32's step at 0.008
    want = list(range(15, -1, -1))  # the small terms' order, largest first
    f32 = big.float() + small.float()
    assert bool((f32 == f32[0, 0, 0]).all())  # every pixel ties in float32 ...
    assert pixel_order(f32)[0].tolist() != want  # ... so the tie-break, not the map, decides
    total = sum_maps([big.float(), small])  # float32 inputs are widened before they are added
    assert total.dtype == torch.float64 and pixel_order(total)[0].tolist() == want
    with pytest.raises(ValueError, match="equally shaped"):
        sum_maps([big, torch.zeros(1, 2, 2)])
    with pytest.raises(ValueError, match="at least one"):
        sum_maps([])


def test_auc_known_values():
    assert auc(torch.full((1, 9), 0.3)).item() == pytest.approx(0.3)
    assert auc(torch.linspace(0, 1, 17).view(1, -1)).item() == pytest.approx(0.5)


def test_deletion_curve_of_the_perfect_map_is_the_analytic_one(image):
    target = torch.tensor([0])
    curve = perturbation_curve(score, image, torch.zeros_like(image), pixel_order(image[:, 0]), target, steps=16)
    top_first = image.flatten().sort(descending=True).values
    remaining = image.sum() - torch.cat([torch.zeros(1, dtype=torch.float64), top_first.cumsum(0)])
    assert torch.allclose(curve[0], torch.sigmoid(remaining / SCALE), atol=1e-12)
    # endpoints: the image itself and the baseline
    assert curve[0, 0].item() == pytest.approx(torch.sigmoid(image.sum() / SCALE).item())
    assert curve[0, -1].item() == pytest.approx(0.5)


def test_perfect_map_beats_random_beats_reversed(image):
    target, base = torch.tensor([0]), torch.zeros_like(image)
    perfect, reversed_ = image[:, 0], -image[:, 0]
    random = torch.rand(1, 4, 4, generator=torch.Generator().manual_seed(1))
    d = [deletion_auc(score, image, m, target, base, steps=16).item() for m in (perfect, random, reversed_)]
    i = [insertion_auc(score, image, m, target, base, steps=16).item() for m in (perfect, random, reversed_)]
    assert d[0] < d[1] < d[2]
    assert i[0] > i[1] > i[2]
    # insertion of the perfect order is the deletion curve of the reversed order, read backwards: equal areas
    assert i[0] == pytest.approx(deletion_auc(score, image, reversed_, target, base, steps=16).item(), abs=1e-12)


def test_road_known_answers(image):
    target = torch.tensor([0])

    def zero_fill(img: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        return img * keep

    combined, morf, lerf = road(score, image, image[:, 0], target, fractions=(0.25, 0.5), imputer=zero_fill)
    top_first = image.flatten().sort(descending=True).values
    total = image.sum()
    want_morf = (
        torch.sigmoid((total - top_first[:4].sum()) / SCALE) / 2
        + torch.sigmoid((total - top_first[:8].sum()) / SCALE) / 2
    )
    want_lerf = (
        torch.sigmoid((total - top_first[-4:].sum()) / SCALE) / 2
        + torch.sigmoid((total - top_first[-8:].sum()) / SCALE) / 2
    )
    assert morf.item() == pytest.approx(want_morf.item(), abs=1e-12)
    assert lerf.item() == pytest.approx(want_lerf.item(), abs=1e-12)
    assert combined.item() == pytest.approx((want_lerf - want_morf).item() / 2, abs=1e-12) and combined.item() > 0
    flipped, _, _ = road(score, image, -image[:, 0], target, fractions=(0.25, 0.5), imputer=zero_fill)
    assert flipped.item() == pytest.approx(-combined.item(), abs=1e-12)  # MoRF and LeRF swap
    with pytest.raises(ValueError, match="fractions"):
        road(score, image, image[:, 0], target, fractions=(0.0,), imputer=zero_fill)


def test_road_with_the_noisy_linear_imputer_is_paired_and_seeded(image):
    pytest.importorskip("pytorch_grad_cam")
    big = torch.nn.functional.interpolate(image, size=(8, 8), mode="nearest")
    target = torch.tensor([0])
    state = torch.random.get_rng_state()
    a = road(score, big, big[:, 0], target)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global RNG is left alone
    b = road(score, big, big[:, 0], target)
    assert all(torch.equal(x, y) for x, y in zip(a, b))  # same seed, same noise
    assert a[0].item() > road(score, big, -big[:, 0], target)[0].item()


def test_bad_input_is_refused(image):
    target = torch.tensor([0])
    with pytest.raises(ValueError, match="steps"):
        perturbation_curve(score, image, image, pixel_order(image[:, 0]), target, steps=0)
    with pytest.raises(ValueError, match="order"):
        perturbation_curve(score, image, image, torch.zeros(1, 3, dtype=torch.long), target)
    with pytest.raises(ValueError, match="equal"):
        perturbation_curve(score, image, image[:, :, :2], pixel_order(image[:, 0]), target)


def test_occlusion_map_is_the_probability_drop_of_each_patch():
    """A linear model reading one pixel: only the patch holding it drops the probability; patches of 2 px."""
    from laya.analysis.pixel_faithfulness import occlusion_map

    def score(x):  # (N, 1, 4, 4) -> (N, 2): logit 0 is 10 x pixel (1, 2)
        return torch.stack([10 * x[:, 0, 1, 2], torch.zeros(len(x))], dim=1)

    images = torch.ones(3, 1, 4, 4)
    maps = occlusion_map(score, images, torch.zeros(3, dtype=torch.long), torch.zeros_like(images), patch=2, batch=5)
    assert maps.shape == (3, 2, 2) and maps.dtype == torch.float64
    full = torch.softmax(torch.tensor([10.0, 0.0], dtype=torch.float64), 0)[0]
    assert torch.allclose(maps[:, 0, 1], full - 0.5) and maps[:, 0, 0].abs().max() == 0 and maps[:, 1].abs().max() == 0
    with pytest.raises(ValueError, match="divide the frame"):
        occlusion_map(score, images, torch.zeros(3, dtype=torch.long), torch.zeros_like(images), patch=3)
