"""Screenshot comparison for the browser tests, pixelmatch-style, robust to font and antialias noise.

A screenshot is halved (2 x 2 box average, which also smooths subpixel text) and compared with its
reference in ``tests/e2e/screenshots/``. A pixel differs when its largest channel difference exceeds
``threshold`` (a fraction of 255) against *every* reference pixel in its 3 x 3 neighbourhood, so edges
moved by one pixel (antialiasing, hinting) do not count; the screenshots match when at most
``max_fraction`` of the pixels differ. On a mismatch the actual image, the reference and a diff
(differing pixels in red over a faded reference) go to ``test-artifacts/screenshots/``.

Regenerate the references after an intended change (then review and commit the PNGs)::

    LAYA_UPDATE_SCREENSHOTS=1 .venv/bin/python -m pytest tests/e2e/test_e2e_browser.py -k looks
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
REFERENCES = REPO / "tests" / "e2e" / "screenshots"
ARTIFACTS = REPO / "test-artifacts" / "screenshots"
UPDATE = "LAYA_UPDATE_SCREENSHOTS"


@dataclass(frozen=True)
class Comparison:
    """``fraction`` of differing pixels out of ``pixels``; ``mask`` ``(H, W)`` bool marks them."""

    fraction: float
    pixels: int
    mask: np.ndarray


def shrink(png: bytes) -> Image.Image:
    """A screenshot halved in each direction (2 x 2 box average), RGB: what references store."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return image.reduce(2)


def compare(actual: np.ndarray, reference: np.ndarray, threshold: float = 0.1) -> Comparison:
    """Differing pixels of ``actual`` vs ``reference`` (``uint8 (H, W, 3)``, the same shape): a pixel differs
    when it differs by more than ``threshold`` from every reference pixel in its 3 x 3 neighbourhood."""
    if actual.shape != reference.shape:
        raise ValueError(f"screenshot sizes differ: {actual.shape} vs reference {reference.shape}")
    a = actual.astype(np.int16)
    padded = np.pad(reference.astype(np.int16), ((1, 1), (1, 1), (0, 0)), mode="edge")
    h, w = a.shape[:2]
    best = np.full((h, w), np.iinfo(np.int16).max, dtype=np.int16)
    for dy in range(3):
        for dx in range(3):
            shifted = padded[dy : dy + h, dx : dx + w]
            best = np.minimum(best, np.abs(a - shifted).max(axis=-1))
    mask = best > threshold * 255
    return Comparison(float(mask.mean()), int(mask.sum()), mask)


def diff_image(reference: np.ndarray, mask: np.ndarray) -> Image.Image:
    """The reference faded to 30 %, differing pixels in red."""
    faded = (255 - 0.3 * (255 - reference.astype(float))).astype(np.uint8)
    faded[mask] = (228, 26, 28)
    return Image.fromarray(faded)


def assert_matches(png: bytes, name: str, max_fraction: float = 0.01, threshold: float = 0.1) -> Comparison | None:
    """Compare the screenshot ``png`` with reference ``name``.png; with ``LAYA_UPDATE_SCREENSHOTS=1`` (or no
    reference yet) write the reference instead. Raises AssertionError, with the artifacts' paths, on a mismatch."""
    actual = shrink(png)
    reference_path = REFERENCES / f"{name}.png"
    if os.environ.get(UPDATE) == "1" or not reference_path.is_file():
        REFERENCES.mkdir(parents=True, exist_ok=True)
        actual.save(reference_path, optimize=True)
        if os.environ.get(UPDATE) != "1":
            raise AssertionError(f"no reference screenshot {reference_path.name}: wrote it; review and commit it")
        return None
    reference = np.asarray(Image.open(reference_path).convert("RGB"))
    pixels = np.asarray(actual)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    if pixels.shape != reference.shape:
        actual.save(ARTIFACTS / f"{name}-actual.png")
        raise AssertionError(f"{name}: screenshot {pixels.shape[:2]} vs reference {reference.shape[:2]} "
                             f"(actual in {ARTIFACTS})")  # fmt: skip
    result = compare(pixels, reference, threshold)
    if result.fraction > max_fraction:
        actual.save(ARTIFACTS / f"{name}-actual.png")
        Image.fromarray(reference).save(ARTIFACTS / f"{name}-reference.png")
        diff_image(reference, result.mask).save(ARTIFACTS / f"{name}-diff.png")
        raise AssertionError(
            f"{name}: {result.fraction:.2%} of pixels differ (> {max_fraction:.2%}); actual, reference and diff in "
            f"{ARTIFACTS}. If the change is intended: {UPDATE}=1 pytest tests/e2e/test_e2e_browser.py -k looks"
        )
    return result
