"""Where each unit looked: Grad-CAM (Selvaraju et al., 2017, https://arxiv.org/abs/1610.02391) at every unit,
from one forward and one backward.

For unit ``u`` with output maps ``A: (B, C, h, w)`` (tokens ``(B, N, D)`` laid out as a patch grid, prefix tokens
dropped: :func:`~laya.analysis.network.recording.spatial`) and the logit ``y_c`` of the chosen class ``c``
(default the network's prediction)::

    w_k   = mean_{i,j} dy_c / dA_k[i, j]                   (B, C)   channel weights
    L     = ReLU(sum_k w_k A_k)                             (B, h, w)
    map   = scale(resize(scale(L)))                         (B, H, W) bilinear, half-pixel centres,
    scale(L) = (L - min L) / (1e-7 + max (L - min L))                per map

exactly as pytorch-grad-cam's ``GradCAM`` with that unit as its one target layer (and ``vit_reshape_transform``
for tokens), but for every unit at once: the network runs once with its units recorded
(:func:`~laya.analysis.network.recording.run_units`) and ``torch.autograd.grad`` takes ``dy_c / dA`` of all units
in one backward pass. Nothing accumulates in the model's ``.grad`` and its mode is left as it is (run it in eval
mode, as Grad-CAM does).

A unit's output that a later module overwrites in place (timm ResNet's stem ``bn1``, then ``act1 =
ReLU(inplace=True)``) is read as overwritten, values and gradient alike: the tensor the rest of the network goes on
with, the package's Grad-CAM on the module that writes it last (``act1``). The package hooked on ``bn1`` itself
would mix the overwritten values with the gradient of the values before (on the CPU, where it keeps no copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from laya.analysis.network.recording import as_network, prefix_tokens, run_units, spatial


@dataclass
class UnitCAM:
    """``maps`` ``(B, U, H, W)`` in ``[0, 1]`` per unit; ``classes`` ``(B,)`` the class explained; ``logits``
    ``(B, K)`` the network's own; ``grids`` per unit the ``(h, w)`` of its own map before the resize."""

    maps: Tensor
    classes: Tensor
    logits: Tensor
    grids: list[tuple[int, int]] = field(default_factory=list)


def unit_gradcam(model: nn.Module, x: Tensor, units: Sequence[str], classes: Tensor | None = None) -> UnitCAM:
    """Grad-CAM of ``classes`` (``(B,)``; None: each input's predicted class) at every unit of ``model`` (a network,
    or an attached backbone: :func:`~laya.analysis.network.recording.as_network`) for ``x: (B, C, H, W)``.

    Raises:
        ValueError: unknown units, a unit whose output is no map or token grid, ``classes`` of the wrong shape.
    """
    network = as_network(model)
    x = x.detach().requires_grad_(True)  # a frozen network's units then carry a graph; x's own grad is not taken
    with torch.enable_grad():
        run = run_units(network, x, units)
        chosen = run.logits.argmax(-1) if classes is None else torch.as_tensor(classes, device=x.device).long()
        if chosen.shape != (x.shape[0],):
            raise ValueError(f"classes must be (B,) = ({x.shape[0]},), got {tuple(chosen.shape)}")
        score = run.logits.gather(1, chosen.view(-1, 1)).sum()  # each input's logit depends on that input alone
        grads = torch.autograd.grad(score, run.outputs, allow_unused=True)
    cams = raw_cams(network, run.outputs, grads)
    grids = [(cam.shape[-2], cam.shape[-1]) for cam in cams]
    return UnitCAM(torch.cat([resized(cam, x.shape[-2:]) for cam in cams], 1), chosen, run.logits.detach(), grids)


def resized(cam: Tensor, size: Sequence[int]) -> Tensor:
    """A map ``(B, 1, h, w)`` on its grid as Grad-CAM shows it at ``size`` ``(H, W)``: scaled, resized bilinearly
    (half-pixel centres), scaled again (resized values miss the grid's extremes, as the package does)."""
    return scaled(F.interpolate(scaled(cam), size=tuple(size), mode="bilinear", align_corners=False))


def raw_cams(network: nn.Module, outputs: Sequence[Tensor], grads: Sequence[Tensor | None]) -> list[Tensor]:
    """Per unit ``L = ReLU(sum_k w_k A_k)`` ``(B, 1, h, w)`` on the unit's own grid, before any scaling, from its
    output ``A`` and the gradient ``dy_c / dA`` (None: no path to the logit, all 0)."""
    cams = []
    for out, grad in zip(outputs, grads):
        prefix = prefix_tokens(network, out.shape[1]) if out.ndim == 3 else 0
        act = spatial(out.detach(), prefix)  # (B, C, h, w)
        grad = torch.zeros_like(act) if grad is None else spatial(grad, prefix)
        cams.append((grad.mean(dim=(2, 3), keepdim=True) * act).sum(1, keepdim=True).clamp(min=0))  # (B, 1, h, w)
    return cams


def scaled(cam: Tensor) -> Tensor:
    """Each map of ``cam (B, 1, h, w)`` shifted to minimum 0 and divided by ``1e-7 +`` its maximum (grad-cam's
    ``scale_cam_image``): ``[0, 1)``, an all-equal map all 0."""
    cam = cam - cam.amin(dim=(2, 3), keepdim=True)
    return cam / (1e-7 + cam.amax(dim=(2, 3), keepdim=True))


__all__ = ["UnitCAM", "raw_cams", "resized", "scaled", "unit_gradcam"]
