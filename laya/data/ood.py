"""Out-of-distribution image sets for a model, built from the data at hand.

* the *other* bundled dataset, converted as an upload would be (:func:`laya.data.images.to_tensor`):
  CIFAR-10 test images as greyscale 28 px for Fashion-MNIST models, Fashion-MNIST test images as RGB
  32 px for CIFAR-10 models;
* uniform noise (every pixel uniform in 0..255) and Gaussian noise (mean 128, std 64, clipped),
  seeded, at the model's input shape.
"""

from __future__ import annotations

import torch
from PIL import Image
from torch import Tensor

from laya.data.datasets import DatasetNotFoundError, InputSpec, load_dataset
from laya.data.images import to_tensor

OTHER_DATASET = {"fashion-mnist": "cifar10", "cifar10": "fashion-mnist"}


def convert_images(images: Tensor, spec: InputSpec) -> Tensor:
    """``uint8 (N, C', H, W)`` -> ``uint8 (N, C, S, S)`` at the spec's channels and source size."""
    arrays = images.permute(0, 2, 3, 1).numpy()
    pil = [Image.fromarray(a[:, :, 0] if a.shape[2] == 1 else a) for a in arrays]
    return torch.stack([to_tensor(p, spec.channels, spec.source_size) for p in pil])


def noise_images(kind: str, n: int, spec: InputSpec, seed: int = 0) -> Tensor:
    """``uint8 (n, C, S, S)`` uniform or Gaussian noise."""
    generator = torch.Generator().manual_seed(seed)
    shape = (n, spec.channels, spec.source_size, spec.source_size)
    if kind == "uniform":
        return torch.randint(0, 256, shape, generator=generator, dtype=torch.uint8)
    if kind == "gaussian":
        return (128 + 64 * torch.randn(shape, generator=generator)).round().clamp(0, 255).to(torch.uint8)
    raise ValueError(f"noise kind must be 'uniform' or 'gaussian', got {kind!r}")


def ood_sets(dataset: str, spec: InputSpec, n: int, seed: int = 0) -> dict[str, Tensor]:
    """``name -> uint8 images`` of ``n`` OOD inputs each; the other dataset only where it is on this machine."""
    sets: dict[str, Tensor] = {}
    other = OTHER_DATASET.get(dataset)
    if other is not None:
        try:
            images = load_dataset(other, "test").images
        except DatasetNotFoundError:
            images = None
        if images is not None:
            colour = "grey" if spec.channels == 1 else "RGB"
            sets[f"{other} ({colour} {spec.source_size} px)"] = convert_images(images[:n], spec)
    sets["uniform noise"] = noise_images("uniform", n, spec, seed)
    sets["gaussian noise"] = noise_images("gaussian", n, spec, seed + 1)
    return sets


__all__ = ["OTHER_DATASET", "convert_images", "noise_images", "ood_sets"]
