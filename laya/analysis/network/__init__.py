"""The network by its own units: their names and stages (:mod:`~laya.analysis.network.units`), interventions
on every unit at once that keep the input (:mod:`~laya.analysis.network.interventions`), one forward recording every
unit (:mod:`~laya.analysis.network.recording`), Grad-CAM at every unit (:mod:`~laya.analysis.network.gradcam`),
the network's own logit and tuned lens (:mod:`~laya.analysis.network.lens`), cheap per-unit scores and their agreement
with the interventions (:mod:`~laya.analysis.network.scores`), the lesion study over test inputs
(:mod:`~laya.analysis.network.lesion`), activation patching by unit (:mod:`~laya.analysis.network.unit_patching`) and
the network report that ``laya attach`` writes beside the own head (:mod:`~laya.analysis.network.report`; on disk:
:mod:`~laya.analysis.network.report_files`)."""

from laya.analysis.network.interventions import (
    DEFAULT,
    MEAN,
    REFERENCES,
    RESAMPLE,
    RESAMPLES,
    SKIP,
    Method,
    References,
    UnitProfile,
    intervene,
    record_references,
    reference_inputs,
)
from laya.analysis.network.units import Unit, network_stages, network_units

__all__ = ["DEFAULT", "MEAN", "REFERENCES", "RESAMPLE", "RESAMPLES", "SKIP", "Method", "References", "Unit",
           "UnitProfile", "intervene", "network_stages", "network_units", "record_references",
           "reference_inputs"]  # fmt: skip
