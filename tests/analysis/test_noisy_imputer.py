"""ROAD's noisy linear imputer, ported: equal to pytorch-grad-cam's ``NoisyLinearImputer`` to the last bit (same
seed), a known answer without noise, kept pixels untouched."""

from __future__ import annotations

import pytest
import torch

from laya.analysis.noisy_imputer import noisy_linear_impute


@pytest.mark.parametrize("shape", [(3, 32, 32), (1, 9, 7)], ids=["rgb 32x32", "grey 9x7"])
def test_equals_the_package_with_the_same_seed(shape: tuple[int, int, int]) -> None:
    NoisyLinearImputer = pytest.importorskip("pytorch_grad_cam.metrics.road").NoisyLinearImputer
    g = torch.Generator().manual_seed(0)
    image = torch.rand(*shape, generator=g)
    keep = (torch.rand(shape[1:], generator=g) > 0.6).float()  # 60 % removed, edges and corners among them
    torch.manual_seed(5)
    theirs = NoisyLinearImputer()(image, keep)
    torch.manual_seed(5)
    ours = noisy_linear_impute(image, keep)
    assert torch.equal(ours, theirs)
    assert torch.equal(ours[:, keep.bool()], image[:, keep.bool()]) and not torch.equal(ours, image)


def test_a_removed_pixel_is_the_weighted_mean_of_its_neighbours() -> None:
    """One pixel removed in the middle of a 3x3 image: 1/6 of each edge neighbour, 1/12 of each corner (no noise)."""
    image = torch.arange(9.0).view(1, 3, 3)
    keep = torch.ones(3, 3)
    keep[1, 1] = 0
    filled = noisy_linear_impute(image, keep, noise=0.0)
    edges, corners = image[0, [0, 1, 1, 2], [1, 0, 2, 1]].sum(), image[0, [0, 0, 2, 2], [0, 2, 0, 2]].sum()
    assert filled[0, 1, 1].item() == pytest.approx((edges / 6 + corners / 12).item())
    assert torch.equal(noisy_linear_impute(image, torch.ones(3, 3)), image)  # nothing removed, nothing drawn
    with pytest.raises(ValueError, match=r"keep \(H, W\)"):
        noisy_linear_impute(image, torch.ones(2, 2))
