"""A small synthetic ImageFolder for the offline tutorial: coloured shapes on noisy backgrounds.

``make_shapes(root)`` writes ``root/{train,test}/<shape>/<nnnn>.png`` (RGB, ``size`` px): one class per
shape (:data:`SHAPES`), each image a filled shape of random colour, size, position and rotation on a
random-colour background with pixel noise, so that neither colour nor position gives the class away.
Seeded: the same arguments write the same files.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

SHAPES = ("circle", "square", "triangle", "cross")


def _polygon(shape: str, cx: float, cy: float, r: float, angle: float) -> list[tuple[float, float]]:
    if shape == "square":
        corners = [angle + math.pi / 4 + k * math.pi / 2 for k in range(4)]
        return [(cx + r * math.cos(a), cy + r * math.sin(a)) for a in corners]
    if shape == "triangle":
        return [(cx + r * math.cos(angle + k * 2 * math.pi / 3), cy + r * math.sin(angle + k * 2 * math.pi / 3)) for k in range(3)]  # fmt: skip
    # cross: a plus sign of width r / 2, rotated
    w, points = r / 2.5, []
    for k in range(4):
        a = angle + k * math.pi / 2
        for along, across in ((r, -w), (r, w), (w, w)):
            x, y = along * math.cos(a) - across * math.sin(a), along * math.sin(a) + across * math.cos(a)
            points.append((cx + x, cy + y))
    return points


def draw_shape(shape: str, size: int, rng: np.random.Generator) -> Image.Image:
    """One ``size`` x ``size`` RGB image of ``shape``."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; expected one of {list(SHAPES)}")
    background, colour = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
    while np.abs(background - colour).sum() < 200:  # keep the shape visible
        colour = rng.integers(0, 256, 3)
    image = Image.new("RGB", (size, size), tuple(int(v) for v in background))
    draw = ImageDraw.Draw(image)
    r = size * rng.uniform(0.18, 0.32)
    cx, cy = rng.uniform(r, size - r, 2)
    fill = tuple(int(v) for v in colour)
    if shape == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
    else:
        draw.polygon(_polygon(shape, cx, cy, r, rng.uniform(0, 2 * math.pi)), fill=fill)
    noisy = np.asarray(image, dtype=np.int16) + rng.integers(-25, 26, (size, size, 3))
    return Image.fromarray(noisy.clip(0, 255).astype(np.uint8))


def make_shapes(root: str | Path, train: int = 100, test: int = 40, size: int = 64, seed: int = 0) -> Path:
    """Write the ImageFolder (``train`` and ``test`` images per class) under ``root``; returns ``root``."""
    if min(train, test) < 1 or not 8 <= size <= 512:
        raise ValueError(f"need train, test >= 1 and 8 <= size <= 512; got train={train}, test={test}, size={size}")
    root = Path(root)
    rng = np.random.default_rng(seed)
    for split, n in (("train", train), ("test", test)):
        for shape in SHAPES:
            folder = root / split / shape
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                draw_shape(shape, size, rng).save(folder / f"{i:04d}.png")
    return root


__all__ = ["SHAPES", "draw_shape", "make_shapes"]
