"""Write a synthetic ImageFolder of smooth (low-frequency) JPEGs, e.g. 100,000 images at 224 px (about 1 GB).

    python benchmarks/make_image_folder.py /tmp/laya-100k --test 100000 --train 10 --size 224

Layout ``ROOT/{train,test}/class_<k>/<n>.jpg``, ``--train``/``--test`` images per split in all (spread
over ``--classes`` classes). Each image is a sum of a few random low-frequency cosines, so JPEG
compresses it to ~10 KB. Resumable: existing files are kept. Never write this inside the repository.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image


def smooth_image(rng: np.random.Generator, size: int) -> Image.Image:
    """An RGB ``size x size`` image: per channel, a sum of three random cosines of at most 3 cycles per image,
    drawn on a 32 x 32 grid and resized bilinearly (smooth either way, and ~20x faster to make)."""
    grid = np.linspace(0.0, 2 * np.pi, 32, dtype=np.float32)
    y, x = np.meshgrid(grid, grid, indexing="ij")
    image = np.zeros((32, 32, 3), dtype=np.float32)
    for c in range(3):
        for fy, fx, phase in zip(rng.integers(0, 4, 3), rng.integers(0, 4, 3), rng.uniform(0, 2 * np.pi, 3)):
            image[:, :, c] += np.cos(fy * y + fx * x + phase)
    small = Image.fromarray(np.clip(128 + 40 * image, 0, 255).astype(np.uint8))
    return small.resize((size, size), Image.Resampling.BILINEAR)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", type=Path)
    p.add_argument("--train", type=int, default=10)
    p.add_argument("--test", type=int, default=100_000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--quality", type=int, default=85)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    for split, n in (("train", args.train), ("test", args.test)):
        for k in range(args.classes):
            (args.root / split / f"class_{k}").mkdir(parents=True, exist_ok=True)
        for i in range(n):
            path = args.root / split / f"class_{i % args.classes}" / f"{i:06d}.jpg"
            image = smooth_image(rng, args.size)  # drawn even when the file exists: resumed runs write the same images
            if not path.exists():
                image.save(path, quality=args.quality)
            if (i + 1) % 10_000 == 0:
                print(f"{split}: {i + 1:,}/{n:,}", flush=True)


if __name__ == "__main__":
    main()
