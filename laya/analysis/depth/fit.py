"""What depth analytics fit on a checkpoint's training split, and one image set through its head.

The fit (per-layer probes for every head, Mahalanobis statistics, LAYA's class alpha profiles) is stored beside the
checkpoint as ``depth_fit.safetensors`` + ``depth_fit.json`` (never pickled; reused while the checkpoint's weights
are unchanged). :func:`head_pass` runs the head once in float64 over hidden states: logits, layer weights and
per-layer readouts, from which readouts, detection scores and the lens are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from laya import __version__
from laya.analysis.depth.detection import COVARIANCE, Mahalanobis, class_alpha_profile, detection_scores
from laya.analysis.depth.readouts import LayerProbes, Readouts, readout_kind, readout_logits
from laya.analysis.head.ablation import float64_head
from laya.model.attached_files import (
    AttachedFileError,
    attached_file,
    field_error,
    read_json,
    read_tensors,
    tensor_header,
)
from laya.model.checkpoint import Checkpoint, atomic_write_json, atomic_write_tensors, read_meta
from laya.model.own_head import is_own_head

FIT_FILE = "depth_fit.safetensors"
FIT_META_FILE = "depth_fit.json"
MAX_FIT_JSON = 1 << 20  # a depth_fit.json is a few hundred bytes (the fit's provenance)


@dataclass
class DepthFit:
    """What depth analytics fit on the training split: probes (Concat/LastLayer), Mahalanobis, alpha profiles."""

    mahalanobis: Mahalanobis
    probes: LayerProbes | None = None
    alpha_profile: Tensor | None = None  # (C, L), heads whose layer weights vary per input
    info: dict[str, Any] = field(default_factory=dict)

    def save(self, directory: str | Path) -> None:
        tensors = self.mahalanobis.to_tensors() | (self.probes.to_tensors() if self.probes else {})
        if self.alpha_profile is not None:
            tensors["alpha_profile"] = self.alpha_profile
        atomic_write_tensors(Path(directory) / FIT_FILE, {k: v.float() for k, v in tensors.items()},
                             {"format": "laya-depth-fit"})  # fmt: skip
        atomic_write_json(Path(directory) / FIT_META_FILE, self.info)

    @classmethod
    def usable(cls, checkpoint: Checkpoint) -> tuple[DepthFit | None, str | None]:
        """:meth:`load` for ``checkpoint``, a broken fit given as None with the refusal's message (the analyses then
        run as without a fit: no probes, no Mahalanobis), so that only what needs the fit is lost."""
        try:
            return cls.load(checkpoint.path, checkpoint), None
        except AttachedFileError as error:
            return None, f"The stored depth fit cannot be used ({error}): shown without its probes and statistics."

    @classmethod
    def load(cls, directory: str | Path, checkpoint: Checkpoint | None = None) -> DepthFit | None:
        """The stored fit, or None if there is none or it belongs to other weights than the checkpoint's. Both
        files are untrusted (:mod:`laya.model.attached_files`): confined to the setting folder, ``depth_fit.json``
        at most :data:`MAX_FIT_JSON` bytes and an object, the tensors' header within ``LAYA_MAX_PARAMS`` and
        floating-point before one is read (given the ``checkpoint`` it is for, each of the shape its layers' widths
        and classes imply: :func:`fit_shapes`), the statistics and probes all there.

        Raises:
            AttachedFileError: a file that does not read or does not fit (its message names the file).
        """
        directory = Path(directory)
        meta_path, weights = attached_file(directory, FIT_META_FILE), attached_file(directory, FIT_FILE)
        if meta_path is None or weights is None:
            return None
        info = read_json(meta_path, FIT_META_FILE, MAX_FIT_JSON)
        if not isinstance(info, dict):
            raise field_error(FIT_META_FILE, "(the file)", info, "must be a JSON object")
        if info.get("weights_sha256") != read_meta(directory).get("weights", {}).get("sha256"):
            return None
        header = tensor_header(weights, FIT_FILE)
        odd = [k for k, (_, dtype) in header.items() if not dtype.is_floating_point]
        if checkpoint is not None:
            widths, classes = checkpoint.model.backbone.layer_dims, len(checkpoint.meta.classes)
            shapes = fit_shapes(widths, classes)
            odd += [k for k, (shape, _) in header.items() if shapes.get(k) != tuple(shape)]
        if odd:
            raise AttachedFileError(FIT_FILE, f"{FIT_FILE}: {[k[:40] for k in odd[:4]]} are not floating-point "
                                              "tensors of the shapes the checkpoint's layers and classes imply")
        tensors = {k: v.double() for k, v in read_tensors(weights, FIT_FILE).items()}
        try:
            return cls(Mahalanobis.from_tensors(tensors), LayerProbes.from_tensors(tensors),
                       tensors.get("alpha_profile"), info)  # fmt: skip
        except ValueError as error:  # a statistic or probe missing
            raise AttachedFileError(FIT_FILE, f"{FIT_FILE}: {error}") from None


def fit_shapes(widths: Sequence[int], classes: int) -> dict[str, tuple[int, ...]]:
    """The shape of every tensor a depth fit may store, for layers ``widths`` ``d_i`` wide and ``classes`` ``C``:
    per layer ``maha_mean_<i>`` and ``probe_weight_<i>`` ``(C, d_i)``, ``maha_precision_<i>`` ``(d_i, d_i)``;
    ``maha_scale`` ``(L, 2)``, ``probe_bias`` ``(L, C)``, ``alpha_profile`` ``(C, L)``."""
    L = len(widths)
    shapes = {"maha_scale": (L, 2), "probe_bias": (L, classes), "alpha_profile": (classes, L)}
    for i, d in enumerate(widths):
        shapes |= {f"maha_mean_{i}": (classes, d), f"maha_precision_{i}": (d, d), f"probe_weight_{i}": (classes, d)}
    return shapes


@dataclass
class HeadPass:
    """One image set through the head once (float64): ``logits (B, C)``, ``readout_probs (B, L, C)``,
    ``layer_scores (B, L)`` or None, the hidden states it came from, and the readouts' kind
    (:data:`~laya.analysis.depth.readouts.KINDS`)."""

    logits: Tensor
    readout_probs: Tensor
    layer_scores: Tensor | None
    hidden: list[Tensor]
    readout_kind: str

    @property
    def readouts(self) -> Readouts:
        return Readouts(self.readout_probs, self.logits.argmax(-1))

    def probe_readouts(self, probes: LayerProbes) -> Readouts:
        """Readouts through fitted probes, whatever the head (the same kind for every head)."""
        return Readouts(torch.softmax(probes.logits(self.hidden), -1), self.logits.argmax(-1))

    def scores(self, fit: DepthFit | None) -> dict[str, Tensor]:
        return detection_scores(self.logits, self.readout_probs, self.hidden, fit.mahalanobis if fit else None,
                                self.layer_scores, fit.alpha_profile if fit else None)  # fmt: skip


@torch.inference_mode()
def head_pass(
    checkpoint: Checkpoint, hidden: Sequence[Tensor], probes: LayerProbes | None, batch_size: int = 1024,
    own: bool = True,
) -> HeadPass:
    """:class:`HeadPass` of ``hidden`` in batches (the backbone does not run); ``own=False``: readouts
    through ``probes`` even where the head has its own classifier (or is an attached network's own classifier,
    whose last layer otherwise reads through it: :func:`~laya.analysis.depth.readouts.readout_source`).

    Raises:
        ValueError: the head needs probes and none were given."""
    head, network = checkpoint.model.head, is_own_head(checkpoint.meta.train)
    head64 = float64_head(head)
    logits, readouts, scores = [], [], []
    for start in range(0, len(hidden[0]), batch_size):
        h = [x[start : start + batch_size].double() for x in hidden]
        out = head64(h)
        logits.append(out.logits)
        readouts.append(torch.softmax(readout_logits(head, h, probes, own, network), -1))
        scores.append(out.layer_scores)
    layer_scores = torch.cat(scores) if scores[0] is not None else None
    kind = readout_kind(head, hidden, own, network)
    return HeadPass(torch.cat(logits), torch.cat(readouts), layer_scores, list(hidden), kind)


def fit_depth(checkpoint: Checkpoint, hidden: Sequence[Tensor], labels: Tensor) -> DepthFit:
    """Fit probes (for every head: the readouts of heads without a classifier of their own, and the
    same-kind readouts of every head), Mahalanobis and alpha profiles on training hidden states."""
    C = len(checkpoint.meta.classes)
    probes = LayerProbes.fit(hidden, labels, C)
    passed = head_pass(checkpoint, hidden, probes)
    alpha = passed.layer_scores
    varies = alpha is not None and bool(alpha.std(0).max() > 1e-9)
    readout_acc = passed.readouts.classes == labels.to(passed.logits.device).unsqueeze(1)
    return DepthFit(
        Mahalanobis.fit(hidden, labels, C),
        probes,
        class_alpha_profile(alpha, passed.logits.argmax(-1), C).cpu() if varies else None,
        {
            "weights_sha256": read_meta(checkpoint.path).get("weights", {}).get("sha256"),
            "n_train": len(labels),
            "covariance": COVARIANCE,
            "probes": probes is not None,
            "train_readout_accuracy": readout_acc.double().mean(0).tolist(),
            "laya_version": __version__,
        },
    )


def current_fit(checkpoint: Checkpoint, hidden: Sequence[Tensor], labels: Tensor) -> DepthFit:
    """The stored fit where it belongs to these weights and this many training inputs; a fit by an older
    Mahalanobis estimator (``covariance`` other than :data:`COVARIANCE`) gets a new Mahalanobis, its probes
    and α profiles kept; otherwise a new :func:`fit_depth`. A changed fit is saved beside the checkpoint."""
    fit = DepthFit.load(checkpoint.path, checkpoint)
    if fit is None or fit.info.get("n_train") != len(labels) or fit.probes is None:
        fit = fit_depth(checkpoint, hidden, labels)
    elif fit.info.get("covariance") != COVARIANCE:
        mahalanobis = Mahalanobis.fit(hidden, labels, len(checkpoint.meta.classes))
        fit = DepthFit(mahalanobis, fit.probes, fit.alpha_profile, fit.info | {"covariance": COVARIANCE})
    else:
        return fit
    fit.save(checkpoint.path)
    return fit


__all__ = ["FIT_FILE", "FIT_META_FILE", "DepthFit", "HeadPass", "current_fit", "fit_depth", "head_pass"]
