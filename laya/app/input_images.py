"""The model's input as a page shows it: the pixels the model reads, de-normalised and enlarged (nearest) for the
screen, an uploaded image decoded the same way, and what the preprocessing does in one line."""

from __future__ import annotations

import math

import numpy as np
import torch

from laya.analysis.head.explain import Explanation
from laya.data.datasets import InputSpec


def input_caption(spec: InputSpec) -> str:
    """What the preprocessing does, in one line."""
    kind = "greyscale" if spec.channels == 1 else "RGB"
    resize = f", resized to {spec.size}×{spec.size}" if spec.size != spec.source_size else ""
    mean = ", ".join(f"{m:.3f}" for m in spec.mean)
    std = ", ".join(f"{s:.3f}" for s in spec.std)
    return f"{kind}, centre-cropped to {spec.source_size}×{spec.source_size}{resize}; normalised with mean ({mean}), std ({std})"


def model_view(explanation: Explanation, spec: InputSpec, min_side: int = 224) -> np.ndarray:
    """The model's input, de-normalised to ``uint8`` ``(H, W)`` or ``(H, W, 3)``, enlarged (nearest) to ``min_side``."""
    x = explanation.model_input.detach().cpu().double()
    mean = torch.tensor(spec.mean, dtype=torch.float64).view(-1, 1, 1)
    std = torch.tensor(spec.std, dtype=torch.float64).view(-1, 1, 1)
    return _enlarge(((x * std + mean).clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).numpy(), min_side)


def input_pixels(data: bytes, spec: InputSpec, min_side: int = 224) -> np.ndarray:
    """An image file decoded as the model's input is (channels, centre crop), ``uint8``, enlarged to ``min_side``.

    Raises:
        ImageError: the bytes are not a usable image.
    """
    from laya.data.images import load_image_tensor

    return _enlarge(load_image_tensor(data, spec.channels, spec.source_size).permute(1, 2, 0).numpy(), min_side)


def _enlarge(pixels: np.ndarray, min_side: int) -> np.ndarray:
    """``uint8 (H, W, C)`` enlarged (nearest) so its longer side reaches ``min_side``; ``(H, W)`` for one channel."""
    factor = max(1, math.ceil(min_side / max(pixels.shape[:2])))
    pixels = pixels.repeat(factor, axis=0).repeat(factor, axis=1)
    return pixels[:, :, 0] if pixels.shape[2] == 1 else pixels


__all__ = [
    "input_caption",
    "input_pixels",
    "model_view",
]
