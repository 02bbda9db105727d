"""The tutorial's synthetic ImageFolder (laya.data.synthetic): layout, determinism, and that it loads as a dataset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from laya.data.datasets import load_dataset
from laya.data.synthetic import SHAPES, draw_shape, make_shapes


def test_layout_is_an_image_folder_that_loads(tmp_path: Path) -> None:
    root = make_shapes(tmp_path / "shapes", train=3, test=2, size=16, seed=1)
    assert sorted(p.name for p in (root / "train").iterdir()) == sorted(SHAPES)
    test = load_dataset(str(root), "test", image_size=16)
    assert len(test) == 2 * len(SHAPES) and tuple(test.images.shape[1:]) == (3, 16, 16)
    assert sorted(test.classes) == sorted(SHAPES)


def test_seeded_and_shapes_differ(tmp_path: Path) -> None:
    a = make_shapes(tmp_path / "a", train=1, test=1, size=16, seed=3)
    b = make_shapes(tmp_path / "b", train=1, test=1, size=16, seed=3)
    assert (a / "test/circle/0000.png").read_bytes() == (b / "test/circle/0000.png").read_bytes()
    rng = np.random.default_rng(0)
    images = {s: np.asarray(draw_shape(s, 32, np.random.default_rng(0))) for s in SHAPES}
    assert len({im.tobytes() for im in images.values()}) == len(SHAPES)  # same colours and place, other shapes
    assert isinstance(draw_shape("cross", 8, rng), Image.Image)


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown shape"):
        draw_shape("hexagon", 16, np.random.default_rng(0))
    with pytest.raises(ValueError, match="8 <= size <= 512"):
        make_shapes(tmp_path, size=4)
