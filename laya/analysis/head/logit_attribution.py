"""Exact per-layer logit attribution: what each layer *votes* for, for every head.

Every head ends in a linear classifier, so its logits split exactly into one term per layer plus
the bias (``LayerHead.logit_terms``):

* LAYA       ``logits = sum_i alpha_i(x) W z_i + b``
* ScalarMix  ``logits = gamma sum_i softmax(w)_i W z_i + b``
* Concat     ``logits = sum_i W_i h_i + b``  (``W_i``: layer i's block of columns)
* LastLayer  ``logits = W h_L + b``  (every other layer's term is 0)

The decomposition runs on hidden states already computed (no backbone pass), in float64, in one
batched call. (Direct logit attribution, as in TransformerLens, for image classifiers' heads.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from laya.analysis.head.ablation import float64_head
from laya.model.heads import LayerHead


@dataclass
class LogitAttribution:
    """``terms``: ``(B, L, C)`` layer i's contribution to each class's logit; ``bias``: ``(C,)``;
    ``logits``: ``(B, C)`` = ``terms.sum(1) + bias`` (float64)."""

    terms: Tensor
    bias: Tensor

    @property
    def logits(self) -> Tensor:
        return self.terms.sum(dim=1) + self.bias


@torch.inference_mode()
def logit_attribution(head: LayerHead, hidden: Sequence[Tensor]) -> LogitAttribution:
    """Per-layer logit terms of ``head`` on ``hidden`` (L tensors ``(B, d_i)``), float64."""
    head._check_hidden(hidden)
    head64 = float64_head(head)
    terms, bias = head64.logit_terms(head64.encode([h.double() for h in hidden]))
    return LogitAttribution(terms, bias.detach().clone())


def top_class_table(
    attribution: LogitAttribution, index: int, classes: Sequence[str], layer_names: Sequence[str], k: int = 3
) -> pd.DataFrame:
    """Long table for input ``index``: ``class, part, contribution`` for its ``k`` top-scoring classes;
    ``part`` is a layer name or ``bias``; per class the contributions sum to the logit."""
    logits = attribution.logits[index]
    top = logits.topk(min(k, len(classes))).indices.tolist()
    parts = [*layer_names, "bias"]
    rows = [
        {"class": classes[c], "part": part, "contribution": float(value)}
        for c in top
        for part, value in zip(parts, [*attribution.terms[index, :, c].tolist(), float(attribution.bias[c])])
    ]
    return pd.DataFrame(rows)


def class_mean_terms(
    attribution: LogitAttribution, predictions: Tensor, classes: Sequence[str], layer_names: Sequence[str]
) -> pd.DataFrame:
    """Per predicted class: the mean contribution of each layer to that class's logit,
    ``class, layer, layer_index, mean, count`` (NaN where a class is never predicted)."""
    pred = predictions.to(attribution.terms.device)
    own = attribution.terms.gather(2, pred.view(-1, 1, 1).expand(-1, attribution.terms.shape[1], 1))[..., 0]  # (B, L)
    C, L = len(classes), len(layer_names)
    sums = torch.zeros(C, L, dtype=own.dtype, device=own.device).index_add_(0, pred, own)
    counts = torch.bincount(pred, minlength=C).to(own.dtype)
    means = (sums / counts.unsqueeze(1)).cpu().numpy()  # NaN for classes never predicted
    return pd.DataFrame(
        {
            "class": np.repeat(list(classes), L),
            "layer": list(layer_names) * C,
            "layer_index": np.tile(np.arange(L), C),
            "mean": means.ravel(),
            "count": np.repeat(counts.long().cpu().numpy(), L),
        }
    )


__all__ = ["LogitAttribution", "class_mean_terms", "logit_attribution", "top_class_table"]
