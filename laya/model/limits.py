"""The model size limits, read from the environment: what a checkpoint's model and its weights file may cost.

``LAYA_MAX_PARAMS`` (parameters + buffer elements), ``LAYA_MAX_ACTIVATIONS`` (float32 elements at the peak of one
input's forward pass) and ``LAYA_MAX_GFLOPS`` (GFLOP per input), with their defaults and bounds in
:mod:`laya.settings`. The size budget (:mod:`laya.model.budget`) checks a model against them; the weights reader
(:mod:`laya.model.weights`) bounds a file's bytes by the parameter limit. Neither imports the other, nor the
backbones, to read them.
"""

from __future__ import annotations

from dataclasses import dataclass

from laya import settings
from laya.model.validation import CheckpointError

DEFAULT_MAX_PARAMS = settings.SETTINGS["LAYA_MAX_PARAMS"].default  # the table's defaults, by their old names
DEFAULT_MAX_ACTIVATIONS = settings.SETTINGS["LAYA_MAX_ACTIVATIONS"].default
DEFAULT_MAX_GFLOPS = settings.SETTINGS["LAYA_MAX_GFLOPS"].default


@dataclass(frozen=True)
class Limits:
    params: int
    activations: int
    gflops: float


def limits() -> Limits:
    """:class:`Limits` from the environment (``LAYA_MAX_PARAMS``, ``LAYA_MAX_ACTIVATIONS``, ``LAYA_MAX_GFLOPS``)."""
    try:
        return Limits(settings.integer("LAYA_MAX_PARAMS"), settings.integer("LAYA_MAX_ACTIVATIONS"),
                      settings.number("LAYA_MAX_GFLOPS"))  # fmt: skip
    except settings.SettingError as error:  # refused like a checkpoint over the limits: a message on the page
        raise CheckpointError(str(error)) from error


__all__ = ["DEFAULT_MAX_ACTIVATIONS", "DEFAULT_MAX_GFLOPS", "DEFAULT_MAX_PARAMS", "Limits", "limits"]
