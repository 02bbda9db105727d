"""Out-of-distribution image sets for a model, built from the data at hand.

* the *other* bundled dataset, converted as an upload would be (:func:`laya.data.images.to_tensor`):
  CIFAR-10 test images as greyscale 28 px for Fashion-MNIST models, Fashion-MNIST test images as RGB
  32 px for CIFAR-10 models; a class-balanced random sample (:func:`balanced_sample`, seeded), never the
  first ``n`` in file order (CIFAR-10's test split is sorted by class: its first 2,000 are airplanes and
  automobiles only);
* uniform noise (every pixel uniform in 0..255) and Gaussian noise (mean 128, std 64, clipped),
  seeded, at the model's input shape.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def balanced_sample(labels: Tensor, n: int, seed: int = 0) -> Tensor:
    """``(min(n, N),)`` indices of a class-balanced random sample of ``labels`` ``(N,)``, seeded.

    Each class gives ``n // C`` inputs (the first ``n mod C`` classes in a seeded random order one more), or all
    it has when it has fewer, the shortfall filled from the other classes' leftovers; within a class the inputs
    are a seeded random draw. The indices come out in a seeded random order (classes interleaved).
    """
    generator = torch.Generator().manual_seed(seed)
    labels = torch.as_tensor(labels).cpu()
    if n >= len(labels):
        return torch.randperm(len(labels), generator=generator)
    classes = torch.unique(labels)
    pools = [torch.nonzero(labels == c).flatten() for c in classes]
    pools = [pool[torch.randperm(len(pool), generator=generator)] for pool in pools]
    quota = torch.full((len(classes),), n // len(classes))
    quota[torch.randperm(len(classes), generator=generator)[: n % len(classes)]] += 1
    taken = [pool[: int(q)] for pool, q in zip(pools, quota)]
    missing = n - sum(len(t) for t in taken)
    if missing:  # classes smaller than their quota: fill from the leftovers at random
        rest = torch.cat([pool[int(q) :] for pool, q in zip(pools, quota)])
        taken.append(rest[torch.randperm(len(rest), generator=generator)[:missing]])
    chosen = torch.cat(taken)
    return chosen[torch.randperm(len(chosen), generator=generator)]


@dataclass
class OODSet:
    """``images`` ``uint8 (n, C, S, S)`` and what they are (size, source, classes), for reports."""

    images: Tensor
    description: str


def noise_images(kind: str, n: int, spec: InputSpec, seed: int = 0) -> Tensor:
    """``uint8 (n, C, S, S)`` uniform or Gaussian noise."""
    generator = torch.Generator().manual_seed(seed)
    shape = (n, spec.channels, spec.source_size, spec.source_size)
    if kind == "uniform":
        return torch.randint(0, 256, shape, generator=generator, dtype=torch.uint8)
    if kind == "gaussian":
        # in place: one float copy of the set, not four (at 224 px each is 300 MB for 500 images)
        return torch.randn(shape, generator=generator).mul_(64).add_(128).round_().clamp_(0, 255).to(torch.uint8)
    raise ValueError(f"noise kind must be 'uniform' or 'gaussian', got {kind!r}")


def ood_sets(dataset: str, spec: InputSpec, n: int, seed: int = 0) -> dict[str, OODSet]:
    """``name -> OODSet`` of ``n`` OOD inputs each; the other dataset (a class-balanced seeded sample) only
    where it is on this machine."""
    sets: dict[str, OODSet] = {}
    other = OTHER_DATASET.get(dataset)
    if other is not None:
        try:
            data = load_dataset(other, "test")
        except DatasetNotFoundError:
            data = None
        if data is not None:
            colour = "grey" if spec.channels == 1 else "RGB"
            index = balanced_sample(data.labels, n, seed)
            counts = torch.bincount(data.labels[index], minlength=len(data.classes)).tolist()
            per_class = ", ".join(f"{c} {k}" for c, k in zip(data.classes, counts))
            sets[f"{other} ({colour} {spec.source_size} px)"] = OODSet(
                convert_images(data.images[index], spec),
                f"{len(index)} {other} test images, class-balanced random sample (seed {seed}): {per_class}",
            )
    size = f"{n} images {spec.channels}x{spec.source_size}x{spec.source_size}, seed"
    sets["uniform noise"] = OODSet(noise_images("uniform", n, spec, seed), f"{size} {seed}, pixels uniform in 0..255")
    sets["gaussian noise"] = OODSet(
        noise_images("gaussian", n, spec, seed + 1), f"{size} {seed + 1}, pixels N(128, 64²) clipped to 0..255"
    )
    return sets


__all__ = ["OTHER_DATASET", "OODSet", "balanced_sample", "convert_images", "noise_images", "ood_sets"]
