"""The network by its own units: their names and stages (:mod:`~laya.analysis.network.units`) and interventions
on every unit at once that keep the input (:mod:`~laya.analysis.network.interventions`)."""

from laya.analysis.network.interventions import (
    DEFAULT,
    MEAN,
    REFERENCES,
    RESAMPLE,
    RESAMPLES,
    SKIP,
    Method,
    UnitProfile,
    intervene,
    reference_inputs,
)
from laya.analysis.network.units import Unit, network_stages, network_units

__all__ = ["DEFAULT", "MEAN", "REFERENCES", "RESAMPLE", "RESAMPLES", "SKIP", "Method", "Unit", "UnitProfile",
           "intervene", "network_stages", "network_units", "reference_inputs"]  # fmt: skip
