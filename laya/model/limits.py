"""The model size limits, read from the environment: what a checkpoint's model and its weights file may cost.

``LAYA_MAX_PARAMS`` (default 500 M parameters + buffer elements), ``LAYA_MAX_ACTIVATIONS`` (default 200 M float32
elements at the peak of one input's forward pass) and ``LAYA_MAX_GFLOPS`` (default 200 GFLOP per input). The size
budget (:mod:`laya.model.budget`) checks a model against them; the weights reader (:mod:`laya.model.weights`) bounds
a file's bytes by the parameter limit. Neither imports the other, nor the backbones, to read them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from laya.model.validation import CheckpointError

DEFAULT_MAX_PARAMS = 500_000_000
DEFAULT_MAX_ACTIVATIONS = 200_000_000
DEFAULT_MAX_GFLOPS = 200


@dataclass(frozen=True)
class Limits:
    params: int
    activations: int
    gflops: float


def limits() -> Limits:
    """:class:`Limits` from the environment (``LAYA_MAX_PARAMS``, ``LAYA_MAX_ACTIVATIONS``, ``LAYA_MAX_GFLOPS``)."""
    values = []
    for name, default in (
        ("LAYA_MAX_PARAMS", DEFAULT_MAX_PARAMS),
        ("LAYA_MAX_ACTIVATIONS", DEFAULT_MAX_ACTIVATIONS),
        ("LAYA_MAX_GFLOPS", DEFAULT_MAX_GFLOPS),
    ):
        text = os.environ.get(name, "").replace("_", "")
        try:
            values.append(float(text) if text else default)
        except ValueError as error:
            raise CheckpointError(f"{name}={text!r} is not a number") from error
    return Limits(int(values[0]), int(values[1]), values[2])


__all__ = ["DEFAULT_MAX_ACTIVATIONS", "DEFAULT_MAX_GFLOPS", "DEFAULT_MAX_PARAMS", "Limits", "limits"]
