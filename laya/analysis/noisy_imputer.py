"""ROAD's noisy linear imputation (Rong et al., ICML 2022, https://arxiv.org/abs/2202.00449), the imputer
:func:`~laya.analysis.pixel_faithfulness.road` fills removed pixels with.

A port of ``NoisyLinearImputer`` (Tobias Leemann's ``road_evaluation``, MIT licence, as pytorch-grad-cam ships it in
``pytorch_grad_cam.metrics.road``), so that ROAD runs without that development dependency (``laya attach`` computes
it). Every removed pixel ``i`` (mask 0) is the weighted mean of its 8 neighbours, kept or removed alike::

    sum_{j in N(i)} w_ij (x_j - x_i) = 0      w = 1/6 for the 4 edge neighbours, 1/12 for the 4 corners

(neighbours outside the image dropped), one sparse linear system over the removed pixels, solved per channel at once
(``scipy.sparse.linalg.spsolve``), then ``noise * N(0, 1)`` added to each filled value from torch's global RNG, drawn
in the package's shape and order, so that the same seed gives the same image
(``tests/analysis/test_noisy_imputer.py`` compares the two). Built with one vectorised sparse matrix, not the
package's ``lil_matrix`` row by row.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.sparse import csc_matrix
from scipy.sparse.linalg import spsolve
from torch import Tensor

#: ``((row offset, column offset), weight)`` of each neighbour, the package's order
NEIGHBOURS = (((1, 1), 1 / 12), ((0, 1), 1 / 6), ((-1, 1), 1 / 12), ((1, -1), 1 / 12), ((0, -1), 1 / 6),
              ((-1, -1), 1 / 12), ((1, 0), 1 / 6), ((-1, 0), 1 / 6))  # fmt: skip
NOISE = 0.01


def noisy_linear_impute(image: Tensor, keep: Tensor, noise: float = NOISE) -> Tensor:
    """``image (C, H, W)`` (float) with the pixels where ``keep (H, W)`` is 0 imputed (module docstring); the kept
    pixels unchanged. Raises ``ValueError`` for shapes that do not fit."""
    if image.ndim != 3 or keep.shape != image.shape[1:]:
        raise ValueError(f"image must be (C, H, W) and keep (H, W); got {tuple(image.shape)}, {tuple(keep.shape)}")
    C, H, W = image.shape
    flat = image.reshape(C, -1)
    kept = keep.reshape(-1).cpu().numpy() > 0.5
    missing = np.flatnonzero(~kept)
    if len(missing) == 0:
        return image.clone()
    pixels = flat.detach().cpu().float().numpy()  # the package's float32 right-hand side
    variable = np.zeros(H * W, dtype=np.int64)
    variable[missing] = np.arange(len(missing))
    row, col = missing // W, missing % W
    diagonal = np.ones(len(missing))
    rows, cols, weights = [], [], []
    b = np.zeros((len(missing), C))
    for (dr, dc), weight in NEIGHBOURS:
        r, c = row + dr, col + dc
        inside = (r >= 0) & (c >= 0) & (r < H) & (c < W)
        diagonal[~inside] -= weight
        equation, neighbour = np.flatnonzero(inside), (r * W + c)[inside]
        known = kept[neighbour]
        b[equation[known]] -= weight * pixels[:, neighbour[known]].T
        rows.append(equation[~known])
        cols.append(variable[neighbour[~known]])
        weights.append(np.full(int((~known).sum()), weight))
    n = np.arange(len(missing))
    A = csc_matrix((np.concatenate([*weights, -diagonal]), (np.concatenate([*rows, n]), np.concatenate([*cols, n]))),
                   shape=(len(missing), len(missing)))  # fmt: skip
    solution = torch.tensor(spsolve(A, b).reshape(len(missing), C), dtype=torch.float)
    filled = flat.clone()
    filled[:, torch.from_numpy(missing)] = (solution.t() + noise * torch.randn_like(solution.t())).to(flat.dtype)
    return filled.reshape_as(image)


__all__ = ["NEIGHBOURS", "NOISE", "noisy_linear_impute"]
