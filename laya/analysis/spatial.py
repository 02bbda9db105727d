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

The maps come from ONE forward pass (the feature maps are collected with hooks on the backbone's
own modules while it computes the hidden states, as pytorch-grad-cam collects activations), and no
backward pass. Layers pooled otherwise (a CLS token, an MLP layer, a LayerNorm after pooling) have no
exact map: their entry is ``None`` and ``exact`` is False; they are never called exact.
For CLS-pooled timm token layers, :func:`token_gradient_maps` gives a labelled approximation
(gradient x activation on the patch tokens entering the block, with backward passes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from laya.analysis.ablation import float64_head
from laya.analysis.logit_attribution import logit_attribution
from laya.model.backbones import Backbone, CNNBackbone, TimmBackbone, TorchvisionBackbone, WrappedBackbone
from laya.model.classifier import LayerwiseClassifier, ModelOutput
from laya.model.heads import LayerHead, LinearHead, MixHead


@contextlib.contextmanager
def keep_maps(backbone: Backbone) -> Iterator[list[Tensor | None]]:
    """Collect each layer's pre-pool activation during the backbone's forward passes inside the block.

    Yields a list filled, per forward, with one entry per layer: ``(B, C, H, W)`` feature maps,
    ``(B, N, D)`` patch tokens (``pool="avg"``), or ``None`` where the layer is not an average over
    positions. Hooks only read; the forward's outputs are unchanged.
    """
    maps: list[Tensor | None] = []
    handles: list[torch.utils.hooks.RemovableHandle] = []
    n = len(backbone.layer_dims)
    if isinstance(backbone, (TorchvisionBackbone, WrappedBackbone)):  # named layer outputs of one module call

        def record(module: nn.Module, args, out) -> None:
            outputs = out if isinstance(backbone, TorchvisionBackbone) else backbone._outputs
            for name in backbone.layers:
                o = outputs[name]
                if getattr(backbone, "channels_last", False) and o.ndim == 4:
                    o = o.permute(0, 3, 1, 2)
                maps.append(_averaged(o, backbone.pool))

        handles = [backbone.model.register_forward_hook(record)]
    elif isinstance(backbone, CNNBackbone):
        handles = [b.register_forward_hook(lambda m, a, out: maps.append(out)) for b in backbone.blocks]
    elif isinstance(backbone, TimmBackbone):
        pool = backbone._pool

        def recording_pool(out):  # the exact tensors the backbone averages
            maps.append(None if isinstance(out, tuple) else out)
            return pool(out)

        backbone._pool = recording_pool  # instance attribute shadows the static method
        if backbone.config.pre_logits:  # forward_head(final): exact where it is a plain average pool
            gp = getattr(backbone.model, "global_pool", None)
            exact = not backbone.tokens and getattr(gp, "pool_type", None) == "avg"
            head = backbone.model.forward_head

            def recording_head(final, *args, **kwargs):
                maps.append(final if exact else None)
                return head(final, *args, **kwargs)

            backbone.model.forward_head = recording_head
    else:  # MLP layers, and families whose layers are not read here: no exact map
        handles = [backbone.register_forward_pre_hook(lambda m, a: maps.extend([None] * n))]
    try:
        yield maps
    finally:
        for handle in handles:
            handle.remove()
        if isinstance(backbone, TimmBackbone):
            del backbone._pool
            backbone.model.__dict__.pop("forward_head", None)


def _averaged(out: Tensor, pool: str) -> Tensor | None:
    """``out`` if ``pool_hidden`` averages it over positions (a feature map, or tokens without prefix
    under ``pool="avg"``), else None."""
    if isinstance(out, Tensor) and (out.ndim == 4 or (out.ndim == 3 and pool != "cls")):
        return out
    return None


def _positions(feature: Tensor) -> tuple[Tensor, tuple[int, int]]:
    """``(B, C, H, W) -> (B, H*W, C)``; tokens ``(B, N, D)`` on a square grid (else ``1 x N``)."""
    if feature.ndim == 4:
        B, C, H, W = feature.shape
        return feature.flatten(2).transpose(1, 2), (H, W)
    B, N, _ = feature.shape
    side = int(round(N**0.5))
    return feature, ((side, side) if side * side == N else (1, N))


def layer_maps(head: LayerHead, encoded: Sequence[Tensor], layer: int) -> tuple[Tensor, Tensor, Tensor]:
    """Layer ``layer``'s affine read-out with the full input's layer weights fixed:
    ``coef (B,)``, ``M (C, d_i)`` and ``offset (B, C)`` with term ``= coef * M h_i + offset``."""
    if isinstance(head, MixHead):
        z, s = encoded
        coef = head.scale() * torch.softmax(s, dim=-1)[:, layer]  # (B,)
        W = head.classifier.weight.to(z.dtype)
        adapter = head.adapters[layer]
        return coef, W @ adapter.weight.to(z.dtype), coef.unsqueeze(1) * (W @ adapter.bias.to(z.dtype))
    if isinstance(head, LinearHead):
        B = encoded[0].shape[0]
        weight = head.linear.weight.to(encoded[0].dtype)
        dims = [head.dims[i] for i in head.selected]
        blocks = dict(zip(head.selected, weight.split(dims, dim=1)))
        M = blocks.get(layer, weight.new_zeros(head.num_classes, head.dims[layer]))
        return weight.new_ones(B), M, weight.new_zeros(B, head.num_classes)
    raise ValueError(f"no spatial decomposition for head {type(head).__name__}")


@dataclass
class SpatialAttribution:
    """Per-layer maps of the logit terms of chosen classes (float64).

    ``classes``: ``(B, K)``; ``maps[i]``: ``(B, K, H_i, W_i)`` or ``None`` (no exact map);
    ``offsets``: ``(B, L, K)`` position-free part; ``terms``: ``(B, L, K)`` the layer's logit term
    (``logit_attribution``). Exactness: ``maps[i].sum((-2, -1)) + offsets[:, i] == terms[:, i]``.
    """

    classes: Tensor
    maps: list[Tensor | None]
    offsets: Tensor
    terms: Tensor

    @property
    def exact(self) -> list[bool]:
        return [m is not None for m in self.maps]

    def layer_sums(self) -> Tensor:
        """``(B, L, K)``: each map's sum plus its offset (NaN where a layer has no map)."""
        sums = [m.sum((-2, -1)) if m is not None else torch.full_like(self.offsets[:, 0], float("nan"))
                for m in self.maps]  # fmt: skip
        return torch.stack(sums, dim=1) + self.offsets

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
    L = len(out.hidden)
    if len(maps) != L:
        raise RuntimeError(f"collected {len(maps)} maps for {L} layers")
    if classes is None:
        classes = out.logits.topk(min(top_k, out.logits.shape[1]), dim=-1).indices
    classes = torch.as_tensor(classes, device=out.logits.device).long()
    if classes.ndim != 2 or classes.shape[0] != x.shape[0]:
        raise ValueError(f"classes must be (B, K) with B={x.shape[0]}, got {tuple(classes.shape)}")
    head64 = float64_head(model.head)
    encoded = head64.encode([h.double() for h in out.hidden])
    terms = logit_attribution(model.head, out.hidden).terms.gather(2, classes.unsqueeze(1).expand(-1, L, -1))
    spatial: list[Tensor | None] = []
    offsets = []
    for i, feature in enumerate(maps):
        coef, M, offset = layer_maps(head64, encoded, i)
        offsets.append(offset.gather(1, classes))
        if feature is None:
            spatial.append(None)
            continue
        f, (H, W) = _positions(feature.double())  # (B, P, d_i)
        Mk = M[classes]  # (B, K, d_i)
        values = torch.einsum("bpd,bkd->bkp", f, Mk) * (coef / f.shape[1]).view(-1, 1, 1)
        spatial.append(values.reshape(*values.shape[:2], H, W))
    return out, SpatialAttribution(classes, spatial, torch.stack(offsets, dim=1), terms)


def token_gradient_maps(model: LayerwiseClassifier, x: Tensor, classes: Tensor) -> list[Tensor | None]:
    """APPROXIMATE maps for CLS-pooled timm token layers (never exact): gradient x activation of layer
    i's logit term (``logit_terms``, float64) for each class in ``classes (B, K)`` w.r.t. the patch
    tokens entering the block whose CLS token is ``h_i``, summed over channels: ``(B, K, h, w)`` per
    layer; ``None`` for layers that are not CLS-pooled blocks (use :func:`spatial_attribution`).
    Costs one forward and ``L x K`` backward passes."""
    backbone = model.backbone
    if not (isinstance(backbone, TimmBackbone) and backbone.tokens and backbone.pool == "cls"):
        raise ValueError("gradient x activation maps are for timm token models with pool='cls'")
    blocks = [backbone.model.blocks[k] for k in backbone.take]
    inputs: list[Tensor] = []
    handles = [b.register_forward_pre_hook(lambda m, a: inputs.append(a[0])) for b in blocks]
    try:
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            hidden = backbone(x)
            head64 = float64_head(model.head)
            terms, _ = head64.logit_terms(head64.encode([h.double() for h in hidden]))  # (B, L, C)
            prefix = backbone.model.num_prefix_tokens
            maps: list[Tensor | None] = [None] * len(hidden)
            for i, tokens in enumerate(inputs):
                per_class = []
                for k in range(classes.shape[1]):
                    score = terms[:, i].gather(1, classes[:, k : k + 1]).sum()
                    (grad,) = torch.autograd.grad(score, tokens, retain_graph=True, allow_unused=True)
                    grad = torch.zeros_like(tokens) if grad is None else grad
                    per_class.append((grad * tokens)[:, prefix:].sum(-1).double())  # (B, N)
                values = torch.stack(per_class, 1).detach()
                _, (H, W) = _positions(values[:, 0].unsqueeze(-1))
                maps[i] = values.reshape(*values.shape[:2], H, W)
    finally:
        for h in handles:
            h.remove()
    return maps


__all__ = ["SpatialAttribution", "token_gradient_maps", "keep_maps", "layer_maps", "spatial_attribution"]
