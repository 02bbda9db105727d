"""laya.analysis.sanity: the cascading randomisation re-draws the network from the top down, and a map method that
ignores the weights is flagged while one that reads them is not."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr
from torch import nn

from laya.analysis.sanity import THRESHOLD, barely_changes, cascading_randomization, reinitialize, spearman

GROUPS = [("head", ["head"]), ("conv2", ["conv2"]), ("conv1", ["conv1"])]


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv1, self.conv2, self.head = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1), nn.Linear(8, 4)

    def forward(self, x):
        h = F.relu(self.conv2(F.relu(self.conv1(x))))
        return self.head(h.mean((2, 3)))


def _images(n: int = 24) -> torch.Tensor:
    """Images with structure (a bright square at a random place on noise), so edges and gradients have a shape."""
    g = torch.Generator().manual_seed(1)
    x = torch.rand(n, 3, 12, 12, generator=g) * 0.2
    for b in range(n):
        i, j = torch.randint(0, 8, (2,), generator=g).tolist()
        x[b, :, i : i + 4, j : j + 4] += 0.8
    return x


def edges(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A map method that ignores the model: the image's gradient magnitude (Sobel-like finite differences)."""
    gray = x.mean(1)
    dx, dy = F.pad(gray[:, :, 1:] - gray[:, :, :-1], (0, 1)), F.pad(gray[:, 1:] - gray[:, :-1], (0, 0, 0, 1))
    return (dx**2 + dy**2).sqrt()


def saliency(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A map method that reads the model: |d logit_target / d x|, summed over channels."""
    x = x.clone().requires_grad_(True)
    model(x).gather(1, target.view(-1, 1)).sum().backward()
    return x.grad.abs().sum(1)


def test_the_cascade_re_draws_one_more_group_per_step_from_the_top_down():
    model = Tiny()
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    changed = []
    for label, net in cascading_randomization(model, GROUPS, seed=0):
        state = net.state_dict()
        changed.append((label, sorted({k.split(".")[0] for k in state if not torch.equal(state[k], trained[k])})))
    assert changed == [("head", ["head"]), ("conv2", ["conv2", "head"]), ("conv1", ["conv1", "conv2", "head"])]
    assert all(torch.equal(v, trained[k]) for k, v in model.state_dict().items())  # the model itself is untouched
    with pytest.raises(ValueError, match=r"unknown modules \['conv9'\]"):
        next(cascading_randomization(model, [("x", ["conv9"])]))


def test_reinitialize_re_draws_parameters_without_their_own_scheme_and_is_seeded():
    class Scale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(16))

    a, b = Scale(), Scale()
    reinitialize(a, seed=3)
    reinitialize(b, seed=3)
    assert not torch.equal(a.weight, torch.ones(16)) and torch.equal(a.weight, b.weight)


def test_spearman_of_maps():
    g = torch.Generator().manual_seed(0)
    a = torch.rand(5, 6, 6, generator=g)
    b = (a + 0.3 * torch.rand(5, 6, 6, generator=g)).round(decimals=1)  # ties in b
    rho = spearman(a, b)
    want = [spearmanr(a[i].flatten(), b[i].flatten()).statistic for i in range(5)]
    assert torch.allclose(rho, torch.tensor(want, dtype=torch.float64))
    assert torch.allclose(spearman(a, a), torch.ones(5, dtype=torch.float64))
    assert torch.allclose(spearman(a, -a), -torch.ones(5, dtype=torch.float64))
    flat = torch.zeros(5, 6, 6)
    assert spearman(flat, flat).tolist() == [1.0] * 5 and spearman(flat, a).tolist() == [0.0] * 5
    with pytest.raises(ValueError, match="equally shaped"):
        spearman(a, a[:, :3])


def test_a_method_that_ignores_the_weights_is_flagged_and_one_that_reads_them_is_not():
    model, x = Tiny().eval(), _images()
    target = model(x).argmax(1)
    before = {m: m(model, x, target) for m in (edges, saliency)}
    last = {}
    for _, net in cascading_randomization(model, GROUPS, seed=0):
        last = {m: spearman(before[m], m(net, x, target)) for m in before}
    ci, flagged = barely_changes(last[edges], resamples=200)
    assert flagged and ci.estimate == pytest.approx(1.0)
    ci, flagged = barely_changes(last[saliency], resamples=200)
    assert not flagged and ci.high < THRESHOLD
