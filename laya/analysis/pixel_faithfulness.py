"""Pixel-level faithfulness of saliency maps: deletion / insertion AUC (Petsiuk et al. 2018, RISE) and ROAD
(Rong et al. 2022, remove and debias).

All metrics rank the pixels of a map ``(B, H, W)`` (on the frame of the images it perturbs) and only the
ranking matters, so signed exact maps and ReLU'd, min-max scaled Grad-CAM maps compare on the same
intervention. Ties (a ReLU'd map's zeros) are broken by one seeded random permutation shared by every map
(:func:`pixel_order`), never by raster order: the rule is deterministic, but a tie's order says nothing about
the map, so a map that is a sum of terms of very different sizes is summed in float64 (:func:`sum_maps`)
before it is ranked.

* **Deletion**: pixels leave the image in the map's order, most relevant first, replaced by a
  ``baseline``; after ``k`` of ``steps`` steps the first ``round(k P / steps)`` pixels are replaced. The
  curve is the target class's softmax probability; its AUC (trapezoid over the removed fraction in
  [0, 1]) is **lower** for a more faithful map.
* **Insertion**: the reverse, from the baseline towards the image; AUC **higher** is better.
* **ROAD**: at each removed fraction ``q``, the removed pixels are imputed by noisy linear imputation
  (:func:`~laya.analysis.noisy_imputer.noisy_linear_impute`, pytorch-grad-cam's ``NoisyLinearImputer`` ported:
  each pixel the weighted mean of its 8 neighbours plus noise 0.01, a sparse linear solve, so the shape of the
  removed region does not leak through a constant fill), once most
  relevant first (MoRF) and once least relevant first (LeRF); ``road = mean_q (p_LeRF(q) - p_MoRF(q)) / 2``,
  pytorch-grad-cam's ``ROADCombined``; **higher** is better.

* **Occlusion** (:func:`occlusion_map`, Zeiler & Fergus 2014): the model's own answer to "which patch matters":
  each ``patch x patch`` square of the frame in turn replaced by the baseline, the drop in the target class's
  softmax probability its value. It needs one forward per patch, no map method, so it is the known-good
  reference a metric must rank above a random map before its verdicts on map methods mean anything.

``score`` maps perturbed images ``(N, C, H, W)`` to logits ``(N, K)``; the perturbed images of every curve point
are stacked, all images at once, into calls of about :data:`ROWS` rows (a curve of small images is one call).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import torch
from torch import Tensor

from laya.analysis.noisy_imputer import noisy_linear_impute

Score = Callable[[Tensor], Tensor]  # images (N, C, H, W) -> logits (N, K)


def pixel_order(maps: Tensor, seed: int = 0) -> Tensor:
    """``(B, H*W)`` pixel indices of ``maps (B, H, W)``, most relevant first; ties in a seeded random order
    (the same permutation for every map of that frame size, so equal maps give equal orders)."""
    if maps.ndim != 3:
        raise ValueError(f"maps must be (B, H, W), got {tuple(maps.shape)}")
    flat = maps.flatten(1)
    perm = torch.randperm(flat.shape[1], generator=torch.Generator().manual_seed(seed)).to(flat.device)
    ranked = torch.argsort(-flat[:, perm], dim=1, stable=True)
    return perm[ranked]


def sum_maps(maps: Sequence[Tensor]) -> Tensor:
    """``(B, H, W)`` float64 sum of equally shaped maps ``(B, H, W)``.

    A float32 sum rounds away terms below half a rounding step of the largest (about 6e-8 relative): with
    one layer's per-pixel term near 0.008 and the others a step or two of it, most pixels of the float32
    sum tie and :func:`pixel_order`'s shared permutation, not the map, orders them.
    """
    if not maps:
        raise ValueError("sum_maps needs at least one map, got none")
    shapes = {tuple(m.shape) for m in maps}
    if len(shapes) != 1 or len(next(iter(shapes))) != 3:
        raise ValueError(f"maps must be equally shaped (B, H, W), got {sorted(shapes)}")
    total = torch.zeros_like(maps[0], dtype=torch.float64)
    for m in maps:
        total += m.double()
    return total


def to_frame(maps: Tensor, size: int) -> Tensor:
    """``(B, h, w) -> (B, size, size)``: maps brought to the frame whose pixels are perturbed, bilinear up (half-pixel
    centres), area-averaged down (a density's ranking is kept)."""
    if maps.shape[-1] == size and maps.shape[-2] == size:
        return maps
    mode = "area" if maps.shape[-1] > size else "bilinear"
    return torch.nn.functional.interpolate(maps.unsqueeze(1), size=(size, size), mode=mode).squeeze(1)


def _target_prob(score: Score, images: Tensor, target: Tensor) -> Tensor:
    with torch.inference_mode():
        return torch.softmax(score(images).double(), dim=-1).gather(1, target.view(-1, 1))[:, 0]


ROWS = 256  # perturbed images per call of ``score``, about: the variants of one step are never split


def _target_probs(score: Score, variants: Iterable[Tensor], target: Tensor) -> Tensor:
    """``(V, B)`` target probabilities of ``V`` variants ``(B, C, H, W)`` of the same images, made one at a time
    (``variants`` may be a generator) and scored in calls of at most ``max(ROWS, B)`` rows."""
    B = len(target)
    per, held, out = max(1, ROWS // B), [], []
    for variant in variants:
        held.append(variant)
        if len(held) == per:
            out.append(_target_prob(score, torch.cat(held), target.repeat(len(held))).view(len(held), B))
            held = []
    if held:
        out.append(_target_prob(score, torch.cat(held), target.repeat(len(held))).view(len(held), B))
    return torch.cat(out)


def perturbation_curve(
    score: Score, start: Tensor, end: Tensor, order: Tensor, target: Tensor, steps: int = 16
) -> Tensor:
    """``(B, steps + 1)`` target probabilities while pixels move from ``start`` to ``end`` in ``order``:
    at step ``k`` the first ``round(k P / steps)`` pixels of ``order (B, P)`` take ``end``'s values.
    ``start``/``end``: ``(B, C, H, W)`` on the same frame; ``target``: ``(B,)`` class indices."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if start.shape != end.shape or start.ndim != 4:
        raise ValueError(
            f"start and end must be equal (B, C, H, W) images, got {tuple(start.shape)}, {tuple(end.shape)}"
        )
    B, _, H, W = start.shape
    if order.shape != (B, H * W):
        raise ValueError(f"order must be (B, H*W) = ({B}, {H * W}), got {tuple(order.shape)}")
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(H * W, device=order.device).expand(B, -1))
    rank = rank.view(B, 1, H, W)
    moved = (torch.where(rank < round(k * H * W / steps), end, start) for k in range(steps + 1))
    return _target_probs(score, moved, target).T


def auc(curve: Tensor) -> Tensor:
    """``(B,)`` trapezoid area of ``curve (B, S+1)`` over equally spaced fractions in [0, 1]."""
    return ((curve[:, 1:] + curve[:, :-1]) / 2).mean(dim=1)


def deletion_auc(
    score: Score, images: Tensor, maps: Tensor, target: Tensor, baseline: Tensor, steps: int = 16, seed: int = 0
) -> Tensor:
    """``(B,)`` deletion AUC: most relevant pixels replaced by ``baseline`` first (lower = more faithful)."""
    return auc(perturbation_curve(score, images, baseline, pixel_order(maps, seed), target, steps))


def insertion_auc(
    score: Score, images: Tensor, maps: Tensor, target: Tensor, baseline: Tensor, steps: int = 16, seed: int = 0
) -> Tensor:
    """``(B,)`` insertion AUC: most relevant pixels of ``images`` inserted into ``baseline`` first (higher = better)."""
    return auc(perturbation_curve(score, baseline, images, pixel_order(maps, seed), target, steps))


def road(
    score: Score,
    images: Tensor,
    maps: Tensor,
    target: Tensor,
    fractions: Sequence[float] = (0.2, 0.4, 0.6, 0.8),
    seed: int = 0,
    imputer: Callable[[Tensor, Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """ROAD per image: ``(combined, morf, lerf)``, each ``(B,)``; ``morf``/``lerf`` are the target
    probabilities after imputing the ``q`` most / least relevant pixels, averaged over ``fractions``;
    ``combined = (lerf - morf) / 2`` (pytorch-grad-cam's ``ROADCombined``; higher = more faithful).

    ``imputer(image (C, H, W), keep (H, W)) -> image`` fills the pixels where ``keep == 0`` (default:
    :func:`~laya.analysis.noisy_imputer.noisy_linear_impute`, equal to pytorch-grad-cam's ``NoisyLinearImputer``).
    Its noise is drawn from a forked RNG seeded with ``seed``, so every map of the same images faces the same noise
    (paired comparisons).
    """
    imputer = imputer or noisy_linear_impute
    if not all(0 < q < 1 for q in fractions):
        raise ValueError(f"fractions must lie in (0, 1), got {list(fractions)}")
    B, _, H, W = images.shape
    order = pixel_order(maps, seed)
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(H * W, device=order.device).expand(B, -1))

    def imputed() -> Iterator[Tensor]:  # per fraction: MoRF, then LeRF, the noise drawn in that order
        for q in fractions:
            n = round(q * H * W)
            for removed in (rank < n, rank >= H * W - n):
                keep = (~removed).float().view(B, H, W).cpu()
                filled = torch.stack([imputer(images[b].detach().float().cpu(), keep[b]) for b in range(B)])
                yield filled.to(images.device, images.dtype)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        probs = _target_probs(score, imputed(), target)  # (2 * len(fractions), B)
    morf, lerf = probs[0::2].mean(dim=0), probs[1::2].mean(dim=0)
    return (lerf - morf) / 2, morf, lerf


def occlusion_map(
    score: Score, images: Tensor, target: Tensor, baseline: Tensor, patch: int = 2, batch: int = 512
) -> Tensor:
    """``(B, H // patch, W // patch)`` occlusion map: entry ``(i, j)`` is ``p(x) - p(x with the patch at (i, j)
    replaced by baseline)``, ``p`` the target class's softmax probability (float64); higher = the patch matters
    more. ``images``, ``baseline``: ``(B, C, H, W)`` with ``H`` and ``W`` multiples of ``patch``; ``target``
    ``(B,)``; the occluded images go through ``score`` in chunks of ``batch``."""
    if images.shape != baseline.shape or images.ndim != 4:
        raise ValueError(f"images and baseline must be equal (B, C, H, W), got {tuple(images.shape)}, {tuple(baseline.shape)}")
    B, _, H, W = images.shape
    if patch < 1 or H % patch or W % patch:
        raise ValueError(f"patch must be >= 1 and divide the frame {H}x{W}, got {patch}")
    h, w = H // patch, W // patch
    cells = torch.arange(h * w, device=images.device).view(h, w)
    cells = cells.repeat_interleave(patch, 0).repeat_interleave(patch, 1)  # (H, W): each pixel's patch index
    masks = cells.unsqueeze(0) == torch.arange(h * w, device=images.device).view(-1, 1, 1)  # (P, H, W)
    full = _target_prob(score, images, target)  # (B,)
    drops = torch.empty(B, h * w, dtype=torch.float64)
    per = max(1, batch // (h * w))  # images per chunk
    for i in range(0, B, per):
        x, b, t = images[i : i + per], baseline[i : i + per], target[i : i + per]
        n = len(x)
        occluded = torch.where(masks.view(1, -1, 1, H, W), b.unsqueeze(1), x.unsqueeze(1))  # (n, P, C, H, W)
        flat = occluded.flatten(0, 1)
        probs = torch.cat([_target_prob(score, flat[j : j + batch], t.repeat_interleave(h * w)[j : j + batch])
                           for j in range(0, len(flat), batch)])  # fmt: skip
        drops[i : i + n] = full[i : i + n].unsqueeze(1).cpu() - probs.view(n, h * w).cpu()
    return drops.view(B, h, w)


__all__ = ["auc", "deletion_auc", "insertion_auc", "occlusion_map", "perturbation_curve", "pixel_order", "road", "sum_maps",
           "to_frame"]  # fmt: skip
