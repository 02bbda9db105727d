"""Exact per-layer spatial logit attribution: *where* in the image each depth voted for a class.

Where a layer's hidden state is an average over positions, ``h_i = (1/P) sum_p f_i[:, p]`` (CNN
blocks, timm feature maps, token models with ``pool="avg"``), every head is affine in ``h_i`` once
the layer weights of the full input are fixed, so layer i's logit term (``LayerHead.logit_terms``)
splits exactly over positions plus one position-free part:

* LAYA / ScalarMix  ``gamma alpha_i W_c (A_i h_i + a_i)
  = sum_p gamma alpha_i W_c A_i f_i[:, p] / P  +  gamma alpha_i W_c a_i``
  (adapter ``g_i(h) = A_i h + a_i``; ScalarMix: ``alpha = softmax(w)``)
* Concat            ``W_{c,i} h_i = sum_p W_{c,i} f_i[:, p] / P``  (CAM at every layer)
* LastLayer         CAM (Zhou et al. 2016) at the last layer, zero elsewhere.

The maps come from ONE forward pass (the feature maps the backbone pooled, which its forward hands over
in its :class:`~laya.model.backbones.calls.Call`, as pytorch-grad-cam collects activations), and no
backward pass. Layers pooled otherwise (a CLS token, an MLP layer, a LayerNorm after pooling) have no
exact map: their entry is ``None`` and ``exact`` is False; they are never called exact. A pre-logits layer
(the input of the network's own classifier) has a map only where it is a plain average of one (ResNets,
EfficientNet), whatever the family.
For CLS-pooled timm token layers, :func:`token_gradient_maps` gives a labelled approximation
(gradient x activation on the patch tokens the block's attention reads, with backward passes).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from laya.analysis.head.ablation import float64_head
from laya.codec import Encoded, stored
from laya.model.backbones import Backbone, CNNBackbone, TimmBackbone, TorchvisionBackbone, WrappedBackbone
from laya.model.backbones.calls import Call, observing
from laya.model.checkpoint import Checkpoint
from laya.model.classifier import LayerwiseClassifier, ModelOutput
from laya.model.heads import LayerHead, LinearHead, MixHead
from laya.model.hooks import Hooks


@contextlib.contextmanager
def keep_maps(backbone: Backbone) -> Iterator[list[Tensor | None]]:
    """Collect each layer's pre-pool activation during the backbone's forward passes inside the block.

    Yields a list filled, per forward, with exactly one entry per layer (:func:`layer_maps`): ``(B, C, H, W)``
    feature maps, ``(B, N, D)`` patch tokens (``pool="avg"``), or ``None`` where the layer is not an average over
    positions. Nothing is added to the model: the backbone's forward hands over its own
    :class:`~laya.model.backbones.calls.Call`, and only the forwards of the calling thread (context) are seen, so
    dashboard sessions sharing one model each keep their own maps, at the same time.
    """
    maps: list[Tensor | None] = []
    with observing(backbone, lambda call: maps.extend(layer_maps(backbone, call))):
        yield maps


def recordable(backbone: Backbone) -> bool:
    """Whether :func:`keep_maps` can record a map for some layer of ``backbone`` (False: an MLP, or a family whose
    layers are not read here; every entry would be ``None``, so a caller may skip the recording)."""
    return isinstance(backbone, (TorchvisionBackbone, WrappedBackbone, CNNBackbone, TimmBackbone))


def layer_maps(backbone: Backbone, call: Call) -> list[Tensor | None]:
    """One entry per layer of ``backbone`` from one complete forward ``call``, by one rule for every family: a
    layer's pre-pool output where its ``h_i`` is a plain average of it over positions (:func:`_averaged`), else
    None; the pre-logits layer (no positions of its own) the map whose plain average its features are
    (:func:`_pre_logits_map`: timm's ``forward_head`` input, or a recorded layer's), else None."""
    pool = "avg" if isinstance(backbone, TimmBackbone) else getattr(backbone, "pool", "avg")  # timm: prefix apart
    maps = [_averaged(out, pool) for out in call.layers]
    if backbone.config.pre_logits:
        maps.append(_pre_logits_map(call.features, [call.final, *reversed(maps)]))
    if len(maps) != len(backbone.layer_dims):
        raise RuntimeError(f"a forward of {type(backbone).__name__} recorded {len(maps)} maps for "
                           f"{len(backbone.layer_dims)} layers")  # fmt: skip
    return maps


def _averaged(out: Any, pool: str) -> Tensor | None:
    """``out`` if ``pool_hidden`` averages it over positions (a feature map, or tokens without prefix
    under ``pool="avg"``), else None."""
    if isinstance(out, Tensor) and (out.ndim == 4 or (out.ndim == 3 and pool != "cls")):
        return out
    return None


def _pre_logits_map(features: Tensor | None, candidates: Sequence[Tensor | None]) -> Tensor | None:
    """The first of ``candidates`` (feature maps ``(B, C, H, W)``, patch tokens ``(B, N, C)``) whose plain average
    over positions is ``features (B, C)`` (to float rounding), else None: a pooled map followed by anything
    else (a LayerNorm, a convolution, an MLP) gives no exact map."""
    if features is None or features.ndim != 2:
        return None
    for f in candidates:
        if f is None or f.ndim not in (3, 4) or f.shape[0] != features.shape[0]:
            continue
        width = f.shape[1] if f.ndim == 4 else f.shape[2]
        if width != features.shape[1]:
            continue
        mean = f.mean(dim=(2, 3)) if f.ndim == 4 else f.mean(dim=1)
        if torch.allclose(mean.to(features.dtype), features, rtol=1e-4, atol=1e-6):
            return f
    return None


def _grid(feature: Tensor) -> tuple[int, int]:
    """The ``(H, W)`` of a feature map ``(B, C, H, W)``; tokens ``(B, N, D)``: a square grid (else ``1 x N``)."""
    if feature.ndim == 4:
        return tuple(feature.shape[2:])
    N = feature.shape[1]
    side = int(round(N**0.5))
    return (side, side) if side * side == N else (1, N)


_READOUTS: weakref.WeakKeyDictionary[LayerHead, tuple[tuple[int, ...], tuple[Tensor, Tensor, Tensor]]] = (
    weakref.WeakKeyDictionary()
)


def _readouts(head: LayerHead) -> tuple[Tensor, Tensor, Tensor]:
    """Layer i's read-out with the layer weights fixed, ``term_i = coef_i (M_i h_i + m_i)``, in the head's dtype:
    the ``M_i (C, d_i)`` concatenated over layers ``(C, sum d_i)``, ``m (L, C)`` and the layer of each
    concatenated unit ``(sum d_i,)``. LAYA / ScalarMix:
    ``M_i = W A_i``, ``m_i = W a_i`` (classifier times adapter); Concat / LastLayer: ``W``'s block of layer i
    (zero for a layer it does not read), ``m_i = 0``. Input-independent, so kept per head until its tensors
    are modified in place (as :func:`laya.analysis.head.ablation.float64_head`)."""
    if isinstance(head, MixHead):
        tensors = [head.classifier.weight, *(t for a in head.adapters for t in (a.weight, a.bias))]
    elif isinstance(head, LinearHead):
        tensors = [head.linear.weight]
    else:
        raise ValueError(f"no spatial decomposition for head {type(head).__name__}")
    versions = tuple(t._version for t in tensors)
    cached = _READOUTS.get(head)
    if cached is not None and cached[0] == versions:
        return cached[1]
    with torch.inference_mode(False), torch.no_grad():  # plain constants, usable in and out of inference mode
        W = tensors[0]
        if isinstance(head, MixHead):
            M = [W @ a.weight for a in head.adapters]
            m = torch.stack([W @ a.bias for a in head.adapters])
        else:
            blocks = dict(zip(head.selected, W.split([head.dims[i] for i in head.selected], dim=1)))
            M = [blocks[i] if i in blocks else W.new_zeros(head.num_classes, d) for i, d in enumerate(head.dims)]
            m = W.new_zeros(head.num_layers, head.num_classes)
        layer = torch.cat([torch.full((d,), i, device=W.device) for i, d in enumerate(head.dims)])
        readouts = torch.cat(M, dim=1), m, layer
    _READOUTS[head] = versions, readouts
    return readouts


def _coefficients(head: LayerHead, hidden: Sequence[Tensor], weights: Tensor | None) -> Tensor:
    """``(B, L)`` each layer's weight in its logit term with the full input's layer weights fixed:
    ``gamma alpha_i`` (LAYA / ScalarMix; ``alpha`` = ``weights`` where given, else ``head.alpha``), 1 for
    Concat / LastLayer."""
    if isinstance(head, MixHead):
        alpha = head.alpha(head.encode(hidden)[0]) if weights is None else weights.to(hidden[0].dtype)
        return head.scale() * alpha
    return hidden[0].new_ones(hidden[0].shape[0], head.num_layers)


APPROXIMATE = "approximate (gradient × activation)"
DEFERRED = "approximate (gradient × activation), not computed yet"
KIND_LABELS = {"exact": "exact", "approximate": APPROXIMATE, "deferred": DEFERRED, "n/a": "n/a"}


@dataclass
class SpatialAttribution:
    """Per-layer maps of the logit terms of chosen classes (float64).

    ``classes``: ``(B, K)``; ``maps[i]``: ``(B, K, H_i, W_i)`` or ``None`` (no map);
    ``offsets``: ``(B, L, K)`` position-free part; ``terms``: ``(B, L, K)`` the layer's logit term
    (``logit_attribution``); ``weights``: ``(B, L)`` the head's weight of layer i in the term
    (``gamma alpha_i`` for LAYA/ScalarMix, 1 for Concat/LastLayer). Exactness:
    ``maps[i].sum((-2, -1)) + offsets[:, i] == terms[:, i]`` where ``exact[i]``; ``approximate[i]``
    marks a map from :func:`token_gradient_maps` (never exact); ``deferred[i]`` a layer that has such an
    approximation, not computed (its map is ``None``; ``laya.analysis.head.explain.explain(approximate=True)``).
    """

    classes: Tensor
    maps: list[Tensor | None] = field(metadata=stored("map.{}", index="layers"))
    offsets: Tensor
    terms: Tensor
    weights: Tensor
    approximate: tuple[bool, ...] = ()
    deferred: tuple[bool, ...] = ()

    @property
    def exact(self) -> list[bool]:
        approximate = self.approximate or (False,) * len(self.maps)
        return [m is not None and not a for m, a in zip(self.maps, approximate)]

    @property
    def kinds(self) -> list[str]:
        """Per layer ``"exact"``, ``"approximate"``, ``"deferred"`` or ``"n/a"`` (:data:`KIND_LABELS` names them)."""
        deferred = self.deferred or (False,) * len(self.maps)
        return ["exact" if e else "deferred" if d else "n/a" if m is None else "approximate"
                for e, m, d in zip(self.exact, self.maps, deferred)]  # fmt: skip

    def layer_sums(self) -> Tensor:
        """``(B, L, K)``: each map's sum plus its offset (NaN where a layer has no map)."""
        sums = [m.sum((-2, -1)) if m is not None else torch.full_like(self.offsets[:, 0], float("nan"))
                for m in self.maps]  # fmt: skip
        return torch.stack(sums, dim=1) + self.offsets

    def select(self, index: int) -> SpatialAttribution:
        """Input ``index`` as a batch of one."""
        pick = slice(index, index + 1)
        return SpatialAttribution(self.classes[pick], [None if m is None else m[pick] for m in self.maps],
                                  self.offsets[pick], self.terms[pick], self.weights[pick], self.approximate,
                                  self.deferred)  # fmt: skip

    def cpu(self) -> SpatialAttribution:
        return SpatialAttribution(self.classes.cpu(), [None if m is None else m.cpu() for m in self.maps],
                                  self.offsets.cpu(), self.terms.cpu(), self.weights.cpu(), self.approximate,
                                  self.deferred)  # fmt: skip

    def upsampled(self, layer: int, size: tuple[int, int], mode: str = "bilinear") -> Tensor:
        """Map ``layer`` resampled to the input's ``size``, ``(B, K, H, W)``, as a density: values are
        scaled by ``(H_i W_i) / (H W)``, so the sum over pixels equals the sum over the map's positions
        (exactly for ``mode="nearest"`` and sizes that are multiples of the map's)."""
        m = self.maps[layer]
        if m is None:
            raise ValueError(f"layer {layer} has no exact spatial map (not an average over positions)")
        h, w = m.shape[-2:]
        up = F.interpolate(m, size=size, mode=mode, **({"align_corners": False} if mode == "bilinear" else {}))
        return up * (h * w) / (size[0] * size[1])


@torch.inference_mode()
def spatial_attribution(
    model: LayerwiseClassifier, x: Tensor, classes: Tensor | None = None, top_k: int = 3
) -> tuple[ModelOutput, SpatialAttribution]:
    """One forward of ``model`` on ``x (B, C, H, W)`` and the per-layer maps of ``classes (B, K)``
    (default: each input's ``top_k`` classes by logit)."""
    with keep_maps(model.backbone) as maps:
        out = model(x)
    if classes is None:
        classes = out.logits.topk(min(top_k, out.logits.shape[1]), dim=-1).indices
    return out, decompose(model.head, out.hidden, maps, classes)


@torch.inference_mode()
def decompose(
    head: LayerHead,
    hidden: Sequence[Tensor],
    features: Sequence[Tensor | None],
    classes: Tensor,
    weights: Tensor | None = None,
) -> SpatialAttribution:
    """The per-layer maps of ``classes (B, K)`` from the hidden states ``hidden`` (L tensors ``(B, d_i)``)
    and the pre-pool activations ``features`` that :func:`keep_maps` collected in the same forward, in float64.

    ``weights``: the head's layer weights of these inputs ``(B, L)`` where already computed (LAYA's ``alpha``,
    ScalarMix's ``softmax(w)``: ``leave_one_out``'s ``layer_scores``), so that the head is not encoded again;
    None: from the head's float64 copy. With ``term_i = coef_i (M_i h_i + m_i)`` (:func:`_readouts`), every
    layer's term and offset come from one product over the concatenated layers, and layer i's map is
    ``coef_i M_i f_i[:, p] / P``."""
    L, B = len(hidden), hidden[0].shape[0]
    if len(features) != L:
        raise RuntimeError(f"collected {len(features)} maps for {L} layers")
    classes = torch.as_tensor(classes, device=hidden[0].device).long()
    if classes.ndim != 2 or classes.shape[0] != B:
        raise ValueError(f"classes must be (B, K) with B={B}, got {tuple(classes.shape)}")
    head64 = float64_head(head)
    M, m, layer = _readouts(head64)
    h = [t.double() for t in hidden]
    coef = _coefficients(head64, h, weights)  # (B, L)
    Mk = M[classes]  # (B, K, sum d_i): the chosen classes' rows, every layer's units side by side
    # M_i h_i for every layer at once: the products summed within each layer's block of units
    sums = Mk.new_zeros(B, classes.shape[1], L).index_add_(2, layer, torch.cat(h, dim=1).unsqueeze(1) * Mk)
    offsets = coef.unsqueeze(-1) * m[:, classes].permute(1, 0, 2)  # (B, L, K)
    terms = coef.unsqueeze(-1) * sums.transpose(1, 2) + offsets
    positions = [1 if f is None else math.prod(_grid(f)) for f in features]
    Mk = Mk * (coef / coef.new_tensor(positions))[:, layer].unsqueeze(1)  # each unit's row times coef_i / P_i
    bounds = [0, *itertools.accumulate(head.dims)]
    spatial: list[Tensor | None] = []
    for i, feature in enumerate(features):
        if feature is None:
            spatial.append(None)
            continue
        f = feature.flatten(2) if feature.ndim == 4 else feature.transpose(1, 2)  # (B, d_i, P)
        values = torch.bmm(Mk[..., bounds[i] : bounds[i + 1]], f.double())  # (B, K, P)
        spatial.append(values.view(B, -1, *_grid(feature)))
    return SpatialAttribution(classes, spatial, offsets, terms, coef)


SUBSETS = ("all", "correct", "incorrect")
MAX_CLASS_MAP_BYTES = 256 * 2**20  # subsets x classes x positions of every layer, float64


@dataclass
class ClassMaps(Encoded):
    """Mean exact map of each class's own logit term, per layer, over the inputs labelled that class (float64).

    ``subsets``: :data:`SUBSETS` (all, correctly classified, misclassified); ``size``: the inputs' common frame
    side (model input); ``counts``: ``(S, C)`` n per subset and class; ``maps[i]``: ``(S, C, H_i, W_i)`` or
    ``None`` (no exact map); ``offsets``, ``terms``: ``(S, C, L)`` means (NaN where n = 0). Exactness of the
    means: ``maps[i].sum((-2, -1)) + offsets[..., i] == terms[..., i]``.
    """

    subsets: tuple[str, ...]
    size: int
    counts: Tensor
    maps: list[Tensor | None] = field(metadata=stored("map.{}", index="layers"))
    offsets: Tensor
    terms: Tensor


def _add_per_group(total: Tensor | None, values: Tensor, keep: Tensor, index: Tensor, groups: int) -> Tensor:
    """``total (groups, ...)`` plus ``values (B, ...)`` masked by ``keep (S, B)`` and added at ``index (S*B,)``."""
    S = keep.shape[0]
    masked = (keep.view(S, -1, *[1] * (values.ndim - 1)) * values.unsqueeze(0)).flatten(0, 1)
    return (values.new_zeros(groups, *values.shape[1:]) if total is None else total).index_add(0, index, masked)


def class_mean_maps(
    model: LayerwiseClassifier, batches: Iterable[tuple[Tensor, Tensor]], num_classes: int
) -> ClassMaps:
    """:class:`ClassMaps` over ``batches`` of ``(x (B, C, S, S) preprocessed inputs, labels (B,))`` that share
    one frame size: one forward per batch, each input's map of its own label's logit term (exact layers only;
    no backward pass), summed per subset and class, then divided by n. Raises ``ValueError`` for frames of
    different sizes, no inputs, or means larger than :data:`MAX_CLASS_MAP_BYTES`."""
    sums: list[Tensor | None] | None = None
    size = None
    S = len(SUBSETS)
    for x, labels in batches:
        if size is None:
            size = x.shape[-1]
        if tuple(x.shape[-2:]) != (size, size):
            raise ValueError(f"inputs must share one square frame size, got {tuple(x.shape[-2:])} after {size}")
        labels = labels.to(x.device).long()
        out, spatial = spatial_attribution(model, x, classes=labels.view(-1, 1))
        if sums is None:
            need = len(SUBSETS) * num_classes * sum(m[0, 0].numel() for m in spatial.maps if m is not None) * 8
            if need > MAX_CLASS_MAP_BYTES:
                raise ValueError(f"the mean maps of {num_classes} classes would take {need / 2**20:.0f} MB; at most "
                                 f"{MAX_CLASS_MAP_BYTES / 2**20:.0f} MB are kept")  # fmt: skip
        correct = out.logits.argmax(-1) == labels
        keep = torch.stack([torch.ones_like(correct), correct, ~correct]).double()  # (S, B)
        index = (torch.arange(S, device=x.device).view(-1, 1) * num_classes + labels).flatten()  # (S*B,)

        parts = [spatial.offsets[:, :, 0], spatial.terms[:, :, 0], keep.new_ones(len(labels))]
        parts += [None if m is None else m[:, 0] for m in spatial.maps]
        sums = [None if v is None else _add_per_group(None if sums is None else sums[j], v, keep, index, S * num_classes)
                for j, v in enumerate(parts)]  # fmt: skip
    if sums is None:
        raise ValueError("no inputs for the class maps")
    counts = sums[2].view(S, num_classes)

    def mean(total: Tensor) -> Tensor:  # (S*C, ...) sums -> (S, C, ...) means, NaN where n = 0
        total = total.view(S, num_classes, *total.shape[1:])
        return total / counts.view(S, num_classes, *[1] * (total.ndim - 2))

    return ClassMaps(SUBSETS, int(size), counts.long().cpu(), [None if m is None else mean(m).cpu() for m in sums[3:]],
                     mean(sums[0]).cpu(), mean(sums[1]).cpu())  # fmt: skip


def checkpoint_class_maps(checkpoint: Checkpoint, images: Tensor, labels: Tensor, batch_size: int = 100) -> ClassMaps:
    """:func:`class_mean_maps` of ``checkpoint`` on ``uint8`` ``images (N, C, S, S)`` at its source size
    (e.g. the test-set sample's thumbnails) with their ``labels (N,)``, batch by batch."""
    spec = checkpoint.meta.input
    if (
        images.dtype != torch.uint8
        or images.ndim != 4
        or tuple(images.shape[1:]) != (spec.channels, spec.source_size, spec.source_size)
    ):
        raise ValueError(f"expected uint8 images (N, {spec.channels}, {spec.source_size}, {spec.source_size}), "
                         f"got {images.dtype} {tuple(images.shape)}")  # fmt: skip
    if len(labels) != len(images):
        raise ValueError(f"{len(labels)} labels for {len(images)} images")
    batches = ((checkpoint.preprocess(images[k : k + batch_size]), labels[k : k + batch_size])
               for k in range(0, len(images), batch_size))  # fmt: skip
    return class_mean_maps(checkpoint.model, batches, len(checkpoint.meta.classes))


def sample_class_maps(checkpoint: Checkpoint, batch_size: int = 100) -> ClassMaps:
    """:func:`checkpoint_class_maps` on the checkpoint's test-set sample (``sample.safetensors`` and its sprite,
    :mod:`laya.analysis.sample`). Raises ``ValueError`` without a sample, or where its thumbnails are
    downsampled (not the inputs the model saw)."""
    from laya.analysis.sample import Sample  # the sample module pulls in depth analytics; only this needs it

    sample = Sample.load(checkpoint.path)
    images = None if sample is None else sample.images()
    if images is None:
        raise ValueError(
            f"no test-set sample beside the checkpoint (`python -m laya sample {checkpoint.path}` writes it)"
        )
    if sample.meta["tile"] != checkpoint.meta.input.source_size:
        raise ValueError(f"the sample's thumbnails are downsampled ({sample.meta['tile']} px, inputs "
                         f"{checkpoint.meta.input.source_size} px): no class maps from them")  # fmt: skip
    return checkpoint_class_maps(checkpoint, images, torch.tensor(sample.table["label"].to_numpy()), batch_size)


_LOCKS: weakref.WeakKeyDictionary[nn.Module, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _lock(backbone: nn.Module) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(backbone, threading.Lock())


def token_gradient_maps(model: LayerwiseClassifier, x: Tensor, classes: Tensor) -> list[Tensor | None]:
    """APPROXIMATE maps for CLS-pooled timm token layers (never exact): gradient x activation of layer
    i's logit term (``logit_terms``, float64) for each class in ``classes (B, K)`` w.r.t. the patch
    tokens as the attention of the block whose CLS token is ``h_i`` reads them (the output of its ``norm1``;
    the block's input where it has none), summed over channels: ``(B, K, h, w)`` per layer; ``None`` for
    layers that are not CLS-pooled blocks (use :func:`spatial_attribution`). Not the block's input tokens:
    a pre-norm block sees the patch tokens only through LayerNorm, which is scale-invariant, so their
    gradient x activation is 0 up to LayerNorm's eps (Euler). Costs one forward and ``L`` backward passes,
    each batched over the ``K`` classes (``is_grads_batched``)."""
    backbone = model.backbone
    if not (isinstance(backbone, TimmBackbone) and backbone.tokens and backbone.pool == "cls"):
        raise ValueError("gradient x activation maps are for timm token models with pool='cls'")
    with _lock(backbone):  # hooks on a model dashboard sessions share: one thread at a time, its forward only
        return _token_maps(model, x, classes)


def _token_maps(model: LayerwiseClassifier, x: Tensor, classes: Tensor) -> list[Tensor | None]:
    backbone = model.backbone
    inputs: list[Tensor] = []
    with Hooks() as hooks:  # the calling thread's forward only
        for b in (backbone.model.blocks[k] for k in backbone.take):
            if hasattr(b, "norm1"):
                hooks.after(b.norm1, lambda m, a, out: inputs.append(out))
            else:
                hooks.before(b, lambda m, a: inputs.append(a[0]))
        with torch.enable_grad():
            x = x.detach().clone().requires_grad_(True)  # a normal tensor even from inference mode
            hidden = backbone(x)
            head64 = float64_head(model.head)
            terms, _ = head64.logit_terms(head64.encode([h.double() for h in hidden]))  # (B, L, C)
            prefix = backbone.model.num_prefix_tokens
            maps: list[Tensor | None] = [None] * len(hidden)
            B, K = classes.shape
            pick = torch.zeros(K, *terms[:, 0].shape, dtype=terms.dtype, device=terms.device)  # (K, B, C) one-hot
            ks, bs = torch.arange(K, device=terms.device), torch.arange(B, device=terms.device)
            pick[ks.view(-1, 1), bs.view(1, -1), classes.T.to(terms.device)] = 1
            for i, tokens in enumerate(inputs):  # one backward per layer, batched over the K classes
                (grad,) = torch.autograd.grad(terms[:, i], tokens, grad_outputs=pick, is_grads_batched=True,
                                              retain_graph=True, allow_unused=True)  # fmt: skip
                grad = tokens.new_zeros(K, *tokens.shape) if grad is None else grad  # (K, B, N, D)
                values = (grad * tokens).sum(-1)[..., prefix:].transpose(0, 1).double().detach()  # (B, K, N)
                H, W = _grid(values[:, 0].unsqueeze(-1))
                maps[i] = values.reshape(B, K, H, W)
    return maps


__all__ = [
    "APPROXIMATE",
    "DEFERRED",
    "KIND_LABELS",
    "MAX_CLASS_MAP_BYTES",
    "SUBSETS",
    "ClassMaps",
    "SpatialAttribution",
    "checkpoint_class_maps",
    "class_mean_maps",
    "decompose",
    "keep_maps",
    "layer_maps",
    "recordable",
    "sample_class_maps",
    "spatial_attribution",
    "token_gradient_maps",
]
