"""One input explained by the network's own units, as the dashboard shows it for an attached network.

For an input ``x`` of an own-classifier checkpoint (``laya attach``), from the library's three views:

* the **unit profile** (:func:`~laya.analysis.network.interventions.intervene`): per unit (or per stage) the drop
  in ``p(ŷ)`` when it is intervened on, the intervention named per bar (``resample`` by default, ``K = 8``
  references from the training split, class-balanced and seeded; bundled example images where that split is not
  on this machine), on the whole block or, for a transformer block, on its attention or MLP branch alone;
* the **lens** (:func:`~laya.analysis.network.lens.unit_lens`): per unit its class, ``p`` of the final prediction
  and the KL to the final distribution, through the tuned lens stored beside the checkpoint (``tuned_lens.json``),
  else the logit lens where it applies, else none (``lens_source`` says why);
* **Grad-CAM** (:func:`~laya.analysis.network.gradcam.unit_gradcam`) of the predicted (or a chosen) class at
  every unit.

:func:`explain_network` returns all three as a :class:`NetworkExplanation`, which a sandboxed worker hands over
with :meth:`~NetworkExplanation.to_tensors` (an uploaded checkpoint runs there: op ``network``). The references'
recording (:func:`~laya.analysis.network.interventions.record_references`, ``K`` or ``R`` forwards) is kept per
model for the last :data:`KEPT` reference sets, and the references drawn from the training split per model, so only
a checkpoint's first input pays for them.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from laya.analysis.depth.layer_lens import Lens
from laya.analysis.network.gradcam import unit_gradcam
from laya.analysis.network.interventions import (
    DEFAULT,
    REFERENCES,
    RESAMPLES,
    Branch,
    Method,
    References,
    branched,
    intervene,
    record_references,
    reference_inputs,
)
from laya.analysis.network.lens import load_tuned_lens, own_readout, unit_lens
from laya.analysis.network.recording import as_network
from laya.analysis.network.stored_references import SEED, stored_references
from laya.analysis.network.units import Unit, network_stages, network_units
from laya.codec import Encoded
from laya.data.datasets import DatasetNotFoundError
from laya.data.images import load_image_tensor
from laya.model.attached_files import AttachedFileError
from laya.model.checkpoint import Checkpoint, CheckpointError

KEPT = 4  # recorded reference sets kept per model
_RECORDED: weakref.WeakKeyDictionary[nn.Module, OrderedDict[tuple, References]] = weakref.WeakKeyDictionary()
_DRAWN: weakref.WeakKeyDictionary[nn.Module, dict[tuple[int, int], Tensor]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
GRANULARITIES = {"unit": "units (as the network names them)", "stage": "stages (the layers the heads read)"}
TRAINING, EXAMPLES = "the training split", "the bundled example images"


@dataclass
class NetworkExplanation(Encoded):
    """One input by the network's units. Profile (``U`` bars, ``granularity`` ``"unit"`` or ``"stage"``):
    ``names``, ``stages``, ``methods`` (intervention per bar), ``residual`` (the network after the bar still sees
    the input), ``drops (U,)`` and ``ablated (U,)`` (class after the intervention), over ``references`` inputs of
    ``reference_source``. ``prediction``, ``probability``: the network's own. Lens and Grad-CAM over ``units``
    (module names): ``log_q (U', K)``/``log_p (K,)`` (None without a lens; ``lens_source`` then says why),
    ``cam (U', H, W)`` in ``[0, 1]`` of class ``cam_class``. ``branch``: what of each bar was intervened on
    (``"block"``, ``"attention"``, ``"mlp"``; ``methods`` says what each bar got); ``branched``: some bar has an
    attention and an MLP branch to choose. ``layers``: per bar, the index of its stage among the backbone's layers
    (:attr:`Unit.layer`: which of the heads' layers the bar is part of)."""

    names: tuple[str, ...]
    stages: tuple[str, ...]
    granularity: str
    methods: tuple[str, ...]
    residual: tuple[bool, ...]
    drops: Tensor
    ablated: Tensor
    prediction: int
    probability: float
    references: int
    reference_source: str
    units: tuple[str, ...]
    cam: Tensor
    cam_class: int
    log_q: Tensor | None
    log_p: Tensor | None
    lens_source: str
    branch: str = "block"
    branched: bool = False
    layers: tuple[int, ...] = ()

    @property
    def lens(self) -> Lens | None:
        """The lens of this one input (batch of one), or None."""
        if self.log_q is None or self.log_p is None:
            return None
        return Lens(self.log_q.unsqueeze(0), self.log_p.unsqueeze(0), self.lens_source)

    @classmethod
    def from_tensors(cls, tensors: dict[str, Tensor], values: dict[str, Any]) -> NetworkExplanation:
        """Inverse of :meth:`to_tensors`. Raises ``ValueError`` for a reply that does not fit."""
        explanation = super().from_tensors(tensors, values)
        names, units = explanation.names, explanation.units
        if (explanation.drops.shape != (len(names),) or explanation.cam.shape[0] != len(units)
                or len(explanation.layers) not in (0, len(names))):  # fmt: skip
            raise ValueError(f"a network reply of {len(names)} bars and {len(units)} units does not fit its tensors")
        return explanation


def profile_units(checkpoint: Checkpoint, granularity: str = "unit") -> list[Unit]:
    """The bars of the profile: the network's units (its stages where it repeats no block), or its stages, a stage
    that is itself a unit (a ViT read at ``blocks.5``) with the unit's measured branches."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {sorted(GRANULARITIES)}, got {granularity!r}")
    backbone = checkpoint.model.backbone
    units = network_units(backbone)
    if granularity == "unit" and units:
        return units
    measured = {u.name: u.branches for u in units}
    return [replace(s, branches=measured.get(s.name, ())) for s in network_stages(backbone)]


def references_for(
    checkpoint: Checkpoint, method: Method, examples: Sequence[bytes] = (), seed: int = 0
) -> tuple[Tensor, str]:
    """``uint8 (K or R, C, H, W)`` reference inputs and where they come from: a seeded, class-balanced sample of
    the training split (``K`` = 8 for resample, ``R`` = 256 for mean), as ``laya attach`` stored it beside the
    checkpoint (:mod:`~laya.analysis.network.stored_references`, seed 0: no dataset is read), else drawn from that
    split where it is on this machine (kept per model), else the decoded ``examples``. Skip needs references only
    where a unit is not residual (resample there). A stored file that cannot be used is named in the source.
    Raises ``ValueError`` with none of them."""
    size = REFERENCES if method == "mean" else RESAMPLES
    with _LOCK:
        drawn = _DRAWN.setdefault(checkpoint.model, {}).get((size, seed))
    if drawn is not None:  # the stored file or the training split is read once per model
        return drawn, TRAINING
    unusable = ""
    try:
        drawn = stored_references(checkpoint.path, method, checkpoint.meta.input) if seed == SEED else None
    except AttachedFileError as error:  # the split (or the examples) serve instead
        unusable = f" ({error}; drawn again)"
    if drawn is None:
        try:
            drawn = reference_inputs(checkpoint.load_data("train"), size, seed)
        except (DatasetNotFoundError, CheckpointError, FileNotFoundError, OSError):
            pass
    if drawn is not None:
        with _LOCK:
            _DRAWN[checkpoint.model][(size, seed)] = drawn
        return drawn, TRAINING + unusable
    if not examples:
        raise ValueError("the unit profile needs reference inputs: none are stored beside the checkpoint, the "
                         "training split is not on this machine and the checkpoint has no bundled example images"
                         + unusable)  # fmt: skip
    spec = checkpoint.meta.input
    images = [load_image_tensor(b, spec.channels, spec.source_size) for b in examples]
    return torch.stack(images), EXAMPLES + unusable


def _lens(checkpoint: Checkpoint, x: Tensor, units: Sequence[str]) -> tuple[Lens | None, str]:
    backbone = checkpoint.model.backbone
    try:
        tuned = load_tuned_lens(checkpoint.path, backbone, units)
    except AttachedFileError as error:  # only the lens is lost: the profile and Grad-CAM are drawn
        return None, f"the tuned lens beside this checkpoint cannot be used ({error})"
    if tuned is not None:
        return unit_lens(backbone, x, units, tuned), "tuned lens"
    if own_readout(as_network(backbone)).space == "residual":
        return unit_lens(backbone, x, units), "logit lens"
    return None, ("no tuned lens beside this checkpoint, and the network's units are not in the space its "
                  "classifier reads (the logit lens does not apply)")  # fmt: skip


def recorded_references(
    model: nn.Module, bars: Sequence[Unit], reference: Tensor, method: Method, branch: Branch
) -> References | Tensor:
    """``reference`` ``(R, C, H, W)`` (preprocessed) as recorded for ``bars`` and ``branch``
    (:func:`record_references`; means alone for mean-ablation), from this model's last :data:`KEPT` recordings
    where one matches it; ``reference`` itself where ``method`` is skip and every bar is residual."""
    if method == "skip" and all(u.residual for u in bars):
        return reference
    digest = hashlib.blake2b(reference.cpu().contiguous().numpy().tobytes(), digest_size=16).hexdigest()
    weights = tuple(t._version for t in model.parameters())  # a model changed in place records anew
    key = (tuple(u.name for u in bars), branch, method == "mean", tuple(reference.shape), digest, weights)
    with _LOCK:
        kept = _RECORDED.setdefault(model, OrderedDict())
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
    recorded = record_references(model, bars, reference, branch, mean=method == "mean")
    with _LOCK:
        kept[key] = recorded
        while len(kept) > KEPT:
            kept.popitem(last=False)
    return recorded


def explain_network(
    checkpoint: Checkpoint, image: Tensor, references: Tensor, reference_source: str = TRAINING,
    method: Method = DEFAULT, granularity: str = "unit", cam_class: int | None = None, branch: Branch = "block",
) -> NetworkExplanation:  # fmt: skip
    """The unit profile, lens and Grad-CAM of one ``image`` (``uint8 (C, H, W)``) by ``method`` on ``branch`` at
    ``granularity`` against ``references`` (``uint8 (R, C, H, W)``, preprocessed here as the image); Grad-CAM of
    ``cam_class`` (None: the predicted class). Raises ``ValueError`` for a backbone without its own classifier or an
    unknown branch."""
    model = checkpoint.model
    device = next(model.parameters()).device
    x = checkpoint.preprocess(torch.cat([image.unsqueeze(0), references]).to(device))
    x, reference = x[:1], x[1:]
    bars = profile_units(checkpoint, granularity)
    recorded = recorded_references(model, bars, reference, method, branch)
    profile = intervene(model, x, bars, method, recorded, branch=branch)
    units = [u for u in profile_units(checkpoint, "unit") if u.block is not None]
    names = [u.name for u in units]
    cam = unit_gradcam(model.backbone, x, names, None if cam_class is None else torch.tensor([cam_class]))
    lens, source = _lens(checkpoint, x, names)
    return NetworkExplanation(
        profile.units, profile.stages, granularity, profile.methods, profile.residual, profile.drops[0].float(),
        profile.ablated_predictions[0], int(profile.prediction[0]), float(profile.probability[0]), profile.references,
        reference_source, tuple(names), cam.maps[0].float(), int(cam.classes[0]),
        None if lens is None else lens.log_q[0].float(), None if lens is None else lens.log_p[0].float(), source,
        branch, branched(bars), tuple({u.name: u.layer for u in bars}[n] for n in profile.units),
    )  # fmt: skip


def network_bytes(
    checkpoint: Checkpoint, data: bytes, method: Method = DEFAULT, granularity: str = "unit",
    cam_class: int | None = None, examples: Sequence[bytes] = (), branch: Branch = "block",
) -> NetworkExplanation:  # fmt: skip
    """Decode an uploaded file (:mod:`laya.data.images`) and :func:`explain_network` it on ``branch``, references
    from :func:`references_for` (``examples``: the bundled example images, where the training split is absent)."""
    spec = checkpoint.meta.input
    image = load_image_tensor(data, spec.channels, spec.source_size)
    references, source = references_for(checkpoint, method, examples)
    return explain_network(checkpoint, image, references, source, method, granularity, cam_class, branch)


__all__ = ["EXAMPLES", "GRANULARITIES", "KEPT", "TRAINING", "NetworkExplanation", "explain_network",
           "network_bytes", "profile_units", "recorded_references", "references_for"]  # fmt: skip
