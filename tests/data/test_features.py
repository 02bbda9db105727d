"""The feature pass: one cache per split whichever way its pixels are handed over, and a batch run in passes
within the activation budget (issue 47: a 224 px attach's peak memory)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from laya.data import features
from laya.data.datasets import ImageArrays, InputSpec, Preprocess, cache_dir
from laya.data.features import cached_hidden_states, hidden_states
from laya.model.backbones import BackboneConfig, build_backbone


def _model() -> tuple[torch.nn.Module, Preprocess, ImageArrays]:
    torch.manual_seed(0)
    backbone = build_backbone(BackboneConfig(name="mlp", in_channels=1, input_size=4, widths=(8, 5))).eval()
    pixels = torch.randint(0, 256, (10, 1, 4, 4), generator=torch.Generator().manual_seed(1)).to(torch.uint8)
    return backbone, Preprocess(InputSpec(1, 4, 4, (0.5,), (0.5,))), ImageArrays(pixels, torch.arange(10) % 2, ("a", "b"))


def test_a_split_its_pixels_and_a_whole_subset_share_one_cache(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:  # fmt: skip
    """The attach's feature pass (a decoded split) and the depth analytics (its seeded subset, or its pixels as a
    tensor) read one cache: no second pass over the same images."""
    monkeypatch.setenv("LAYA_CACHE", str(tmp_path))
    backbone, preprocess, data = _model()
    first = cached_hidden_states(backbone, preprocess, data, batch_size=4)
    for same in (data.images, data.subset(torch.arange(len(data)))):
        again = cached_hidden_states(backbone, preprocess, same, batch_size=4)
        assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert len(list((cache_dir() / "features").iterdir())) == 1
    other = ImageArrays(data.images.flip(0), data.labels, data.classes)  # other pixels: a cache of their own
    cached_hidden_states(backbone, preprocess, other, batch_size=4)
    assert len(list((cache_dir() / "features").iterdir())) == 2


def test_a_batch_runs_in_passes_of_the_rows_that_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 8, passes of 3 rows where one row's largest activation allows only 3: the same features as one
    pass, from ceil(8 / 3) + ceil(2 / 3) = 4 forwards."""
    backbone, preprocess, data = _model()
    whole = hidden_states(backbone, preprocess, data, batch_size=8)
    calls: list[int] = []
    handle = backbone.register_forward_hook(lambda m, args, out: calls.append(len(args[0])))
    monkeypatch.setattr(features, "pass_rows", lambda network, x, rows: 3)
    parted = hidden_states(backbone, preprocess, data, batch_size=8)
    handle.remove()
    assert calls == [3, 3, 2, 2]
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(whole, parted))
