"""Explain one input: prediction, layer scores, live leave-one-layer-out, per-input faithfulness, spatial maps.

The backbone runs once. One batched float64 head call under ``L + 1`` masks gives the
prediction, the head's intrinsic scores and every LOO deletion; post-hoc methods are optional.
The same forward keeps the layers' feature maps (:func:`laya.analysis.head.spatial.keep_maps`), so the
exact per-layer spatial maps of the :data:`MAP_CLASSES` top classes cost no second pass; CLS-pooled
token layers get the labelled gradient x activation approximation (a second forward and ``L`` backward
passes, batched over classes), on request (``approximate=True``, the default; False: marked ``deferred``).
This is what the dashboard's Inspect and Compare pages show; Inspect asks for the approximation only once
its maps are opened.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from laya.analysis.head.ablation import AblationResult, float64_head, leave_one_out
from laya.analysis.head.attribution import METHOD_LABELS, intrinsic_method, layer_attributions
from laya.analysis.head.faithfulness import NOT_APPLICABLE, informative, input_metrics
from laya.analysis.head.spatial import SpatialAttribution, decompose, keep_maps, recordable, token_gradient_maps
from laya.analysis.overflow import check_output
from laya.codec import Encoded, stored
from laya.data.images import load_image_tensor
from laya.model.backbones import TimmBackbone
from laya.model.checkpoint import Checkpoint
from laya.model.heads import DEFAULT_MODE, AblationMode

if TYPE_CHECKING:
    from laya.analysis.depth.fit import DepthFit

MAP_CLASSES = 10  # spatial maps are kept for this many top classes (bounded payload: L x K x H_i x W_i)
APPROXIMATE_CLASSES = 3  # gradient x activation maps (L backward passes batched over K) for this many; NaN otherwise


@dataclass
class Explanation(Encoded):
    """Everything about one input under one checkpoint. Vectors are over layers ``(L,)``."""

    checkpoint: str
    classes: tuple[str, ...]
    layer_names: tuple[str, ...]
    image: Tensor  # uint8 (C, S, S), decoded at the dataset's image size
    model_input: Tensor  # float (C, size, size), normalised, what the backbone receives
    probs: Tensor  # (num_classes,)
    prediction: int
    mode: str
    loo: AblationResult  # batch of one
    scores: dict[str, Tensor] = field(default_factory=dict, metadata=stored(index="methods"))  # method -> (L,)
    intrinsic: str | None = None
    spatial: SpatialAttribution | None = None  # batch of one: per-layer maps of the top classes; None: no layer has any
    ood_scores: dict[str, float] | None = None  # error/OOD detection scores (depth.input_depth.input_scores), if asked
    seconds: dict[str, float] = field(default_factory=dict)  # model time per stage (STAGES), as this call measured it
    fit_note: str | None = None  # why the stored depth fit was not used for them (DepthFit.usable), for the page
    _metrics: dict[str, dict[str, float | None]] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def label(self) -> str:
        return self.classes[self.prediction]

    @property
    def confidence(self) -> float:
        return float(self.probs[self.prediction])

    @property
    def drops(self) -> Tensor:
        return self.loo.drops[0]

    @property
    def primary(self) -> str | None:
        """The method shown first: the intrinsic scores, else the first post-hoc method computed."""
        return self.intrinsic or next(iter(self.scores), None)

    def topk(self, k: int = 5) -> pd.DataFrame:
        values, index = self.probs.topk(min(k, len(self.classes)))
        return pd.DataFrame({"class": [self.classes[i] for i in index.tolist()], "probability": values.tolist()})

    @property
    def testable(self) -> bool:
        """At least two layers have a LOO drop above ε: a ranking of layers can be tested on this input."""
        return bool(informative(self.drops.view(1, -1))[1][0])

    @property
    def status(self) -> str | None:
        return None if self.testable else NOT_APPLICABLE

    def metrics(self, method: str) -> dict[str, float | None]:
        """Every per-input faithfulness metric of ``method`` (:mod:`laya.analysis.head.faithfulness`); None where
        undefined. The all-layer Spearman is also None where the input has one informative layer (tie-decided).
        Computed once per method."""
        if method not in self._metrics:
            values = input_metrics(self.scores[method].tolist(), self.drops.tolist())
            out = {k: None if math.isnan(v) else v for k, v in values.items()}
            if out["top1"] is None:  # defined (0 or 1) exactly where the input is testable
                out["spearman"] = None
            self._metrics[method] = out
        return dict(self._metrics[method])

    def spearman(self, method: str) -> float | None:
        """Spearman between ``method``'s scores and the LOO drops; None if either is constant or only one
        layer's drop exceeds ε (a tie-decided value)."""
        return self.metrics(method)["spearman"]

    def deletion_at_1(self, method: str) -> float:
        """The LOO drop of ``method``'s top layer (ties: the earlier layer)."""
        value = self.metrics(method)["deletion_at_1"]
        return math.nan if value is None else value

    def layer_table(self) -> pd.DataFrame:
        """Per layer: each method's score, LOO drop, probability and label after removal, flip."""
        after = self.loo.predictions_after[0].tolist()
        table = pd.DataFrame({"layer": list(self.layer_names)})
        for method, values in self.scores.items():
            table[METHOD_LABELS.get(method, method)] = values.double().tolist()
        table["LOO drop"] = self.drops.tolist()
        table[f"p({self.label}) after removal"] = self.loo.probs_after[0].tolist()
        table["prediction after removal"] = [self.classes[i] for i in after]
        table["label flips"] = [i != self.prediction for i in after]
        return table

    def summary(self) -> pd.DataFrame:
        """Per method: every faithfulness metric on this input (None where undefined)."""
        return pd.DataFrame([{"method": METHOD_LABELS.get(m, m), **self.metrics(m)} for m in self.scores])

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "prediction": self.label,
            "confidence": self.confidence,
            "ablation_mode": self.mode,
            "probabilities": dict(zip(self.classes, self.probs.tolist())),
            "layers": self.layer_table().to_dict("records"),
            "methods": self.summary().to_dict("records"),
        }


STAGES = ("forward", "leave-one-out", "maps", "post hoc", "OOD status")  # Explanation.seconds' keys, in order


class _Stopwatch:
    """Model time per stage: :meth:`mark` adds the time since the previous mark to ``seconds[stage]``. On a GPU
    each mark first waits for the kernels queued so far, so that a stage is charged for its own work."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds: dict[str, float] = {}
        self._last = self._now()

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def mark(self, stage: str) -> None:
        now = self._now()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self._last
        self._last = now


@torch.inference_mode()
def _forward_and_loo(
    checkpoint: Checkpoint, image: Tensor, mode: AblationMode, maps: bool, clock: _Stopwatch
) -> tuple[Tensor, list[Tensor], AblationResult, SpatialAttribution | None]:
    x = checkpoint.preprocess(image.unsqueeze(0))  # on the model's device
    if not maps or not recordable(checkpoint.model.backbone):  # no layer has positions (an MLP): no hooks
        hidden = checkpoint.model.backbone(x)
        clock.mark("forward")
        loo = leave_one_out(checkpoint.model.head, hidden, mode)
        clock.mark("leave-one-out")
        return x[0], hidden, loo, None
    with keep_maps(checkpoint.model.backbone) as features:
        hidden = checkpoint.model.backbone(x)
    clock.mark("forward")
    loo = leave_one_out(checkpoint.model.head, hidden, mode)
    clock.mark("leave-one-out")
    if all(f is None for f in features) and not _cls_tokens(checkpoint.model.backbone):
        return x[0], hidden, loo, None  # no layer averages positions: no maps, nothing to compute
    classes = loo.base_probs.topk(min(MAP_CLASSES, loo.base_probs.shape[1]), dim=-1).indices
    spatial = decompose(checkpoint.model.head, hidden, features, classes, loo.layer_scores)
    clock.mark("maps")
    return x[0], hidden, loo, spatial


def _cls_tokens(backbone: object) -> bool:
    """A timm token model pooled by its CLS token: its layers get the gradient x activation approximation."""
    return isinstance(backbone, TimmBackbone) and backbone.tokens and backbone.pool == "cls"


def _approximate(
    checkpoint: Checkpoint, x: Tensor, spatial: SpatialAttribution, compute: bool = True
) -> SpatialAttribution:
    """Fill the layers without an exact map of a CLS-pooled timm token model with gradient x activation, for
    the :data:`APPROXIMATE_CLASSES` top classes (the other classes' approximate maps are NaN). ``compute=False``:
    mark those layers ``deferred`` instead (no backward pass)."""
    backbone = checkpoint.model.backbone
    if not _cls_tokens(backbone):
        return spatial
    if not compute:  # the blocks of ``take`` are the layers token_gradient_maps maps (pre-logits: not)
        return replace(spatial, deferred=tuple(m is None and i < len(backbone.take) for i, m in enumerate(spatial.maps)))
    K = spatial.classes.shape[1]
    top = spatial.classes[:, :APPROXIMATE_CLASSES].clone()  # not an inference tensor
    approx = [None if a is None else F.pad(a, (0, 0, 0, 0, 0, K - a.shape[1]), value=float("nan"))
              for a in token_gradient_maps(checkpoint.model, x.unsqueeze(0), top)]  # fmt: skip
    maps = [m if m is not None else a for m, a in zip(spatial.maps, approx)]
    flags = tuple(m is None and a is not None for m, a in zip(spatial.maps, approx))
    return replace(spatial, maps=maps, approximate=flags)


def _on_cpu(result: AblationResult) -> AblationResult:
    if result.drops.device.type == "cpu":
        return result
    return replace(
        result, **{f.name: getattr(result, f.name).cpu() for f in fields(result) if getattr(result, f.name) is not None}
    )


def explain(
    checkpoint: Checkpoint,
    image: Tensor,
    mode: AblationMode = DEFAULT_MODE,
    posthoc: Sequence[str] = (),
    ig_steps: int = 32,
    maps: bool = True,
    approximate: bool = True,
    ood: bool | Collection[str] = False,
    fit: DepthFit | None = None,
    fit_note: str | None = None,
) -> Explanation:
    """Explain ``image`` (``uint8 (C, S, S)`` at the checkpoint's source size).

    ``posthoc``: extra methods (``integrated_gradients``, ``input_x_gradient``, ``saliency``);
    heads without intrinsic scores get Integrated Gradients when none is asked for. ``maps``: keep the
    per-layer spatial maps (``Explanation.spatial``; False: None, e.g. to time what they cost).
    ``approximate``: also compute the gradient x activation maps of CLS-token layers (False: those layers are
    ``deferred``; every other number is the same either way). ``ood``: also the input's error/OOD detection
    scores under depth analytics' ``fit`` (``Explanation.ood_scores``, ``fit_note`` why a stored one is not used:
    :meth:`~laya.analysis.depth.fit.DepthFit.usable`; those of
    :func:`laya.analysis.depth.input_depth.input_depth`), from this explanation's own backbone pass; names of scores
    (``("msp", "mahalanobis")``, what a page shows): only those.
    ``Explanation.seconds``: the model time of each of :data:`STAGES` in this call.
    """
    spec = checkpoint.meta.input
    if image.dtype != torch.uint8 or tuple(image.shape) != (spec.channels, spec.source_size, spec.source_size):
        raise ValueError(
            f"expected a uint8 image of shape {(spec.channels, spec.source_size, spec.source_size)}, "
            f"got {image.dtype} {tuple(image.shape)}"
        )
    head = checkpoint.model.head
    float64_head(head)  # built on a checkpoint's first call and kept: its setup, not this view's cost
    clock = _Stopwatch(checkpoint.preprocess.mean.device)
    x, hidden, loo, spatial = _forward_and_loo(checkpoint, image, mode, maps, clock)
    if math.isnan(float(loo.base_prob[0])):  # a softmax row with Inf or NaN logits is NaN throughout
        check_output(checkpoint.model, loo.base_probs)  # OutputOverflow, unless the weights themselves are not finite
    prediction = int(loo.prediction[0])
    scores: dict[str, Tensor] = {}
    intrinsic = intrinsic_method(head)
    if intrinsic:
        scores[intrinsic] = loo.layer_scores[0].float()
    methods = list(posthoc) or ([] if intrinsic else ["integrated_gradients"])
    target = loo.prediction
    for method in methods:
        scores[method] = layer_attributions(head, hidden, method, target, steps=ig_steps)[0]
    if methods:
        clock.mark("post hoc")
    ood_scores = None
    if ood:
        # depth analytics pull in much this module does not need
        from laya.analysis.depth.input_depth import input_scores

        only = None if ood is True else tuple(ood)
        ood_scores = input_scores(checkpoint, hidden, fit, (loo.base_logits, loo.layer_scores), only)[0]
        clock.mark("OOD status")
    if spatial is not None:
        spatial = _approximate(checkpoint, x, spatial, approximate).cpu()
        if approximate:
            clock.mark("maps")
    return Explanation(  # computed on the model's device, handed over on the CPU
        checkpoint=checkpoint.name,
        classes=tuple(checkpoint.meta.classes),
        layer_names=tuple(checkpoint.layer_names),
        image=image,
        model_input=x.cpu(),
        probs=loo.base_probs[0].float().cpu(),
        prediction=prediction,
        mode=mode,
        loo=_on_cpu(loo),
        scores={method: values.cpu() for method, values in scores.items()},
        intrinsic=intrinsic,
        spatial=spatial,
        ood_scores=ood_scores,
        fit_note=fit_note if ood else None,
        seconds=clock.seconds,
    )


def explain_bytes(checkpoint: Checkpoint, data: bytes, **kwargs: Any) -> Explanation:
    """Decode an uploaded file (see :mod:`laya.data.images`) and :func:`explain` it."""
    spec = checkpoint.meta.input
    return explain(checkpoint, load_image_tensor(data, spec.channels, spec.source_size), **kwargs)


__all__ = ["APPROXIMATE_CLASSES", "MAP_CLASSES", "STAGES", "Explanation", "explain", "explain_bytes"]
