"""Depth analytics of one input (the Depth analytics page, Inspect, the sandboxed workers): its logit attribution,
per-layer readouts and lens, exit layer and error/OOD detection scores, from one backbone pass."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import Tensor

from laya.analysis.depth.detection import SCORE_LABELS, detection_scores
from laya.analysis.depth.exits import exit_layers
from laya.analysis.depth.fit import DepthFit
from laya.analysis.depth.layer_lens import LENS_SOURCE, Lens, from_readouts
from laya.analysis.depth.readouts import Readouts, readout_source
from laya.analysis.head.ablation import float64_head
from laya.analysis.head.logit_attribution import LogitAttribution, logit_attribution
from laya.analysis.overflow import check_output
from laya.codec import Encoded
from laya.model.checkpoint import Checkpoint
from laya.model.own_head import is_own_head


@dataclass
class InputDepth(Encoded):
    """Depth analytics of one input: logit attribution, readouts (None without probes), detection scores."""

    attribution: LogitAttribution
    readouts: Readouts | None
    scores: dict[str, float]
    readout_kind: str | None = None  # a kind of laya.analysis.depth.readouts.KINDS (as depth.json's), None: none
    fit_note: str | None = None  # why the stored depth fit was not used (DepthFit.usable), for the page to show

    @property
    def prediction(self) -> int:
        return int(self.attribution.logits[0].argmax())

    def lens(self) -> Lens | None:
        """The per-layer lens of this input from its readouts (None without readouts)."""
        if self.readouts is None or self.readout_kind is None:
            return None
        return from_readouts(self.readouts.probs, self.attribution.logits, LENS_SOURCE[self.readout_kind])

    @classmethod
    def from_tensors(cls, tensors: dict[str, Tensor], values: dict[str, Any]) -> InputDepth:
        """Inverse of :meth:`to_tensors`. Raises ``ValueError`` for a reply that does not fit."""
        depth = super().from_tensors(tensors, values)
        if depth.readout_kind is not None and depth.readout_kind not in LENS_SOURCE:
            kinds = sorted(LENS_SOURCE)
            raise ValueError(f"InputDepth.readout_kind: one of {kinds} or None, got {depth.readout_kind!r}")
        return depth

    def exit_layer(self, threshold: float) -> int | None:
        """0-based layer where the exit policy stops this input (``L`` = runs the full model); None without readouts."""
        if self.readouts is None:
            return None
        return int(exit_layers(self.readouts.confidence, torch.tensor([threshold]))[0, 0])

    def score_table(self, thresholds: dict[str, float] | None = None) -> pd.DataFrame:
        """``score, value, threshold, flagged``: flagged where the value exceeds the threshold (the in-distribution
        95th percentile from ``depth.json``)."""
        thresholds = thresholds or {}
        return pd.DataFrame(
            [
                {
                    "score": SCORE_LABELS[k],
                    "value": v,
                    "threshold": thresholds.get(k),
                    "flagged": bool(thresholds.get(k) is not None and v > thresholds[k]),
                }
                for k, v in self.scores.items()
            ]
        )


@torch.inference_mode()
def input_depth(checkpoint: Checkpoint, image: Tensor, fit: DepthFit | None, fit_note: str | None = None) -> InputDepth:
    """``image``: ``uint8 (C, S, S)``; one backbone pass, then every per-input analysis. ``fit``, ``fit_note``:
    the stored depth fit and why it is not used where it cannot be (:meth:`DepthFit.usable`)."""
    device = next(checkpoint.model.parameters()).device
    hidden = checkpoint.model.backbone(checkpoint.preprocess(image.unsqueeze(0).to(device)))
    attribution = logit_attribution(checkpoint.model.head, hidden)
    check_output(checkpoint.model, attribution.logits)  # non-finite logits: OutputOverflow
    scores, readouts, kind = input_scores(checkpoint, hidden, fit)
    return InputDepth(attribution, readouts, scores, kind, fit_note)


@torch.inference_mode()
def input_scores(
    checkpoint: Checkpoint,
    hidden: Sequence[Tensor],
    fit: DepthFit | None,
    base: tuple[Tensor, Tensor | None] | None = None,
    only: Collection[str] | None = None,
) -> tuple[dict[str, float], Readouts | None, str | None]:
    """One input's error/OOD detection scores from its hidden states (L tensors ``(1, d_i)``, no backbone pass),
    with the readouts they use and their kind (:class:`InputDepth`'s ``scores``, ``readouts``, ``readout_kind``).

    ``base``: the head's float64 ``(logits (1, C), layer_scores (1, L) | None)`` on ``hidden`` where the caller
    already has them (Inspect's leave-one-out, whose first mask keeps every layer); else the head runs here.
    ``only``: compute just these scores (those a page shows; the readouts only where a readout score is asked
    for); None: every score the fit allows."""
    if base is None:
        out = float64_head(checkpoint.model.head)([h.double() for h in hidden])
        base = out.logits, out.layer_scores
    logits, layer_scores = base
    wanted = set(SCORE_LABELS) if only is None else set(only)
    readouts, kind = None, None
    if wanted & {"readout_disagreement", "prediction_depth"}:
        readout, kind = readout_source(checkpoint.model.head, hidden, fit.probes if fit else None,
                                       network=is_own_head(checkpoint.meta.train))  # fmt: skip
        readouts = None if readout is None else Readouts.of(readout, logits.argmax(-1))
    scores = detection_scores(logits, None if readouts is None else readouts.probs, hidden,
                              fit.mahalanobis if fit and "mahalanobis" in wanted else None, layer_scores,
                              fit.alpha_profile if fit and "alpha_divergence" in wanted else None)  # fmt: skip
    return {k: float(v[0]) for k, v in scores.items() if k in wanted}, readouts, kind


__all__ = ["InputDepth", "input_depth", "input_scores"]
