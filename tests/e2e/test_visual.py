"""tests/visual.py, the screenshot comparison of the browser tests: antialias noise passes, a real change fails."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from tests import visual


def page(offset: int = 0, text: str = "Inspect an input", bar: int = 120) -> np.ndarray:
    """A page-like RGB image: a heading and a bar chart."""
    image = Image.new("RGB", (400, 300), "white")
    draw = ImageDraw.Draw(image)
    draw.text((20 + offset, 20), text, fill="black")
    draw.rectangle((60, 280 - bar, 100, 280), fill="#4C78A8")
    return np.asarray(image)


def test_one_pixel_shifts_and_antialias_noise_pass() -> None:
    reference = page()
    assert visual.compare(reference, reference).pixels == 0
    assert visual.compare(page(offset=1), reference).fraction == 0.0  # text moved by one pixel: not a change
    noise = np.clip(reference.astype(int) + np.random.default_rng(0).integers(-20, 21, reference.shape), 0, 255)
    assert visual.compare(noise.astype(np.uint8), reference).pixels == 0  # within the 10 % threshold


def test_a_changed_chart_fails_and_leaves_artifacts(tmp_path, monkeypatch) -> None:
    changed = visual.compare(page(bar=200), page())
    assert changed.pixels == pytest.approx(40 * 80, rel=0.02)  # the taller bar's new 40 x 80 px area
    monkeypatch.setattr(visual, "REFERENCES", tmp_path / "refs")
    monkeypatch.setattr(visual, "ARTIFACTS", tmp_path / "artifacts")

    def png(pixels: np.ndarray) -> bytes:  # at screen size: twice the stored reference
        buffer = io.BytesIO()
        Image.fromarray(pixels).resize((800, 600), Image.NEAREST).save(buffer, format="PNG")
        return buffer.getvalue()

    with pytest.raises(AssertionError, match="no reference screenshot"):
        visual.assert_matches(png(page()), "inspect")  # the first run writes the reference
    assert visual.assert_matches(png(page()), "inspect").pixels == 0
    with pytest.raises(AssertionError, match="of pixels differ"):
        visual.assert_matches(png(page(bar=250)), "inspect")
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == [
        "inspect-actual.png", "inspect-diff.png", "inspect-reference.png",
    ]  # fmt: skip
