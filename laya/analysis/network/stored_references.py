"""The reference inputs of the unit profile, drawn once by ``laya attach`` and stored beside the own head.

The unit profile's resample and mean interventions replace a unit's branch by its value on reference inputs: a
seeded, class-balanced sample of the training split (:func:`~laya.analysis.network.interventions.reference_inputs`:
``K`` = :data:`RESAMPLES` for resample, ``R`` = :data:`REFERENCES` for mean). Drawing them reads the whole training
split (every file listed, checked and the chosen ones decoded), which a dashboard must not do to open a checkpoint
(about 30 s of a cold open on CIFAR-10's 50,000 images). ``laya attach`` and ``laya network`` therefore store both
draws, ``uint8`` at the dataset's side, in ``references.safetensors``::

    resample  uint8 (K, C, S, S)      mean  uint8 (R, C, S, S)      metadata: seed, source

:func:`stored_references` reads them back as untrusted input (:mod:`laya.model.attached_files`: confined to the
setting folder, the header checked against the checkpoint's input before a tensor is read).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from laya.analysis.network.interventions import REFERENCES, RESAMPLES, Method, reference_inputs
from laya.data.datasets import Images, InputSpec
from laya.model.attached_files import AttachedFileError, attached_file, read_tensors, tensor_header
from laya.model.checkpoint import atomic_write_tensors

REFERENCES_FILE = "references.safetensors"
SIZES = {"resample": RESAMPLES, "mean": REFERENCES}  # the draw each intervention takes (skip: resample's)
SEED = 0  # the dashboard's draw (:func:`~laya.analysis.network.explain.references_for`)


def write_references(dest: str | Path, train: Images) -> Path:
    """Draw the reference inputs of every intervention from ``train`` (the training split) as the dashboard would
    (seed :data:`SEED`) and store them in ``dest/references.safetensors``; returns its path."""
    path = Path(dest) / REFERENCES_FILE
    tensors = {key: reference_inputs(train, size, SEED) for key, size in SIZES.items()}
    atomic_write_tensors(path, tensors, {"seed": str(SEED), "source": "the training split"})
    return path


def stored_references(dest: str | Path, method: Method, spec: InputSpec) -> Tensor | None:
    """``uint8 (K or R, C, S, S)``: the stored draw (seed :data:`SEED`) for ``method`` (skip and resample: ``K``,
    mean: ``R``) of an input ``spec`` (``C`` channels, side ``S``); None where no file is stored.

    Raises:
        AttachedFileError: a link outside the setting folder, a header that is not the two ``uint8`` draws of this
            input, or a body that does not read.
    """
    path = attached_file(dest, REFERENCES_FILE)
    if path is None:
        return None
    header = tensor_header(path, REFERENCES_FILE)
    found = {key: list(shape) for key, (shape, _) in header.items()}
    drawn = found.get("mean", [0])[0]  # every input of a split smaller than R; K of them for resample
    expected = {key: [min(size, drawn), spec.channels, spec.source_size, spec.source_size] for key, size in SIZES.items()}
    if drawn < 1 or found != expected or any(dtype != torch.uint8 for _, dtype in header.values()):
        shown = dict(list(found.items())[:4])
        raise AttachedFileError(REFERENCES_FILE, f"{REFERENCES_FILE} holds {shown}, not the uint8 draws of this "
                                                 f"checkpoint's input (K = {RESAMPLES}, R = {REFERENCES} or every "
                                                 f"training input where fewer, {spec.channels} channels of "
                                                 f"{spec.source_size} px)")  # fmt: skip
    return read_tensors(path, REFERENCES_FILE)["mean" if method == "mean" else "resample"]


__all__ = ["REFERENCES_FILE", "SEED", "SIZES", "stored_references", "write_references"]
