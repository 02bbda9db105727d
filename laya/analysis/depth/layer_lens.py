"""A per-layer lens (tuned-lens / logit-lens style, for image classifiers): how each layer's own
prediction relates to the final one.

From the per-layer readouts (:func:`laya.analysis.depth.readouts.readout_logits`: the head's own classifier
for LAYA / ScalarMix, fitted linear probes for Concat / LastLayer; :attr:`Lens.source` says which),
per input ``b`` and layer ``i`` with readout distribution ``q_i`` and final distribution ``p``:

* ``kl``       ``KL(p || q_i) = sum_c p_c (log p_c - log q_{i,c})`` (nats; 0 when the layer agrees)
* ``entropy``  ``H(q_i) = -sum_c q_{i,c} log q_{i,c}`` (nats)
* ``rank``     1-based rank of the final class ``y_hat = argmax p`` under ``q_i`` (1 = top)
* ``prob``     ``q_{i, y_hat}``
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import torch
from torch import Tensor

from laya.analysis.depth.readouts import (
    NETWORK,
    OWN,
    PROBES,
    LayerProbes,
    class_groups,
    readout_kind,
    readout_logits,
)
from laya.analysis.head.ablation import float64_head
from laya.analysis.statistics import bootstrap_ci
from laya.model.attached_files import AttachedFileError, attached_file, read_table
from laya.model.heads import LayerHead

LENS_FILE = "lens.csv"
MAX_LENS_CSV = 32 << 20  # a lens.csv is a few KB (classes x layers rows)
MAX_LENS_CSV = 32 << 20  # a lens.csv is a few KB (classes x layers rows)
SOURCES = {"head classifier": "the head's own classifier on each layer",
           "linear probes": "linear probes fitted on the training split",
           "linear probes, network classifier": "linear probes fitted on the training split, the network's own "
                                                "classifier at pre-logits"}  # fmt: skip
LENS_SOURCE = {OWN: "head classifier", PROBES: "linear probes",
               NETWORK: "linear probes, network classifier"}  # readout kind -> Lens.source
METRICS = {"kl": "KL(final || layer) [nats]", "entropy": "entropy [nats]", "rank": "rank of final class",
           "prob": "probability of final class"}  # fmt: skip


@dataclass
class Lens:
    """``log_q``: ``(B, L, C)`` per-layer log-probabilities; ``log_p``: ``(B, C)`` final (float64);
    ``source``: ``"head classifier"`` or ``"linear probes"``."""

    log_q: Tensor
    log_p: Tensor
    source: str

    @property
    def final(self) -> Tensor:
        return self.log_p.argmax(-1)

    @property
    def kl(self) -> Tensor:
        p = self.log_p.exp().unsqueeze(1)
        return (p * (self.log_p.unsqueeze(1) - self.log_q)).sum(-1).clamp(min=0)

    @property
    def entropy(self) -> Tensor:
        return -(self.log_q.exp() * self.log_q).sum(-1)

    @property
    def prob(self) -> Tensor:
        return self.log_q.exp().gather(2, self._final_index())[..., 0]

    @property
    def rank(self) -> Tensor:
        """``(B, L)`` 1 + number of classes with a strictly higher readout probability than the final class."""
        own = self.log_q.gather(2, self._final_index())
        return (self.log_q > own).sum(-1) + 1

    def _final_index(self) -> Tensor:
        return self.final.view(-1, 1, 1).expand(-1, self.log_q.shape[1], 1)

    def metric(self, name: str) -> Tensor:
        if name not in METRICS:
            raise ValueError(f"unknown lens metric {name!r}; expected one of {sorted(METRICS)}")
        return getattr(self, name).double()

    def top_k(self, k: int = 3) -> tuple[Tensor, Tensor]:
        """``(probabilities, classes)``, each ``(B, L, k)``."""
        values, indices = self.log_q.topk(min(k, self.log_q.shape[-1]), dim=-1)
        return values.exp(), indices

    def table(self, index: int, classes: Sequence[str], layer_names: Sequence[str], k: int = 3) -> pd.DataFrame:
        """One input's trajectory: ``layer, layer_index, kl, entropy, rank, prob, top`` (top-k as text)."""
        probs, top = self.top_k(k)
        return pd.DataFrame({
            "layer": list(layer_names),
            "layer_index": range(1, len(layer_names) + 1),
            **{m: self.metric(m)[index].tolist() for m in METRICS},
            "top": [", ".join(f"{classes[c]} {p:.2f}" for c, p in zip(cs, ps))
                    for cs, ps in zip(top[index].tolist(), probs[index].tolist())],
        })  # fmt: skip


def from_readouts(readout_probs: Tensor, logits: Tensor, source: str) -> Lens:
    """The lens of already computed readouts: ``readout_probs (B, L, C)`` (probabilities), ``logits (B, C)``
    the head's final logits; ``source`` as :attr:`Lens.source`. Probabilities are clamped at the smallest
    positive float64 before the log (a readout that underflowed to 0 gives a large, finite KL)."""
    if readout_probs.ndim != 3 or logits.ndim != 2 or readout_probs.shape[::2] != logits.shape:
        raise ValueError(f"need readout_probs (B, L, C) and logits (B, C), got {tuple(readout_probs.shape)}, "
                         f"{tuple(logits.shape)}")  # fmt: skip
    if source not in SOURCES:
        raise ValueError(f"unknown lens source {source!r}; expected one of {sorted(SOURCES)}")
    tiny = torch.finfo(torch.float64).tiny
    return Lens(readout_probs.double().clamp(min=tiny).log(), torch.log_softmax(logits.double(), -1), source)


@torch.inference_mode()
def lens(head: LayerHead, hidden: Sequence[Tensor], probes: LayerProbes | None = None, network: bool = False) -> Lens:
    """The lens of ``head`` on ``hidden`` (L tensors ``(B, d_i)``); ``probes`` needed for Concat/LastLayer;
    ``network``: the head is an attached network's own classifier (its last layer read through it)."""
    readout = readout_logits(head, hidden, probes, network=network)  # (B, L, C) float64
    final = float64_head(head)([h.double() for h in hidden]).logits
    source = LENS_SOURCE[readout_kind(head, hidden, network=network)]
    return Lens(torch.log_softmax(readout, -1), torch.log_softmax(final, -1), source)


def class_trajectories(
    lens_: Lens, groups: Tensor, classes: Sequence[str], layer_names: Sequence[str], metric: str = "kl",
    resamples: int = 1000, seed: int = 0,
) -> pd.DataFrame:  # fmt: skip
    """Mean of ``metric`` per group (e.g. true or predicted class, ``groups (B,)``) and over all inputs
    (``class = "all"``, first) and layer, with a 95 % bootstrap CI over inputs:
    ``class, layer, layer_index, n, mean, low, high``."""
    values = lens_.metric(metric).cpu()
    groups = groups.cpu()
    rows = []
    for name, chosen in class_groups(groups, classes):
        for i, layer in enumerate(layer_names):
            ci = bootstrap_ci(values[chosen, i], resamples=resamples, seed=seed)
            rows.append({"class": name, "layer": layer, "layer_index": i + 1, "n": int(chosen.sum()),
                         "mean": ci.estimate, "low": ci.low, "high": ci.high})  # fmt: skip
    return pd.DataFrame(rows)


def lens_summary(
    lens_: Lens, labels: Tensor, classes: Sequence[str], layer_names: Sequence[str], command: str = "",
    resamples: int = 1000, seed: int = 0,
) -> pd.DataFrame:  # fmt: skip
    """The report's lens (``lens.csv``): per true class (and ``"all"``) and layer, the mean of every metric
    with its 95 % bootstrap CI over inputs: ``class, layer, layer_index, n``, then ``<metric>``,
    ``<metric>_low``, ``<metric>_high`` for each of :data:`METRICS`, ``readout`` (:attr:`Lens.source`) and
    ``command`` (how to regenerate it)."""
    if len(labels) != lens_.log_q.shape[0]:
        raise ValueError(f"{len(labels)} labels for {lens_.log_q.shape[0]} inputs")
    table = None
    for metric in METRICS:
        part = class_trajectories(lens_, labels, classes, layer_names, metric, resamples, seed)
        part = part.rename(columns={"mean": metric, "low": f"{metric}_low", "high": f"{metric}_high"})
        table = part if table is None else table.merge(part, on=["class", "layer", "layer_index", "n"], sort=False)
    return table.assign(readout=lens_.source, command=command)


def write_lens(table: pd.DataFrame, out: str | Path) -> Path:
    """Write :func:`lens_summary`'s table to ``out/lens.csv``."""
    path = Path(out) / LENS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    return path


def load_lens(directory: str | Path) -> pd.DataFrame | None:
    """``lens.csv`` beside a checkpoint, or None. The file is untrusted (:mod:`laya.model.attached_files`):
    confined to the setting folder, at most :data:`MAX_LENS_CSV` bytes, its columns there, a row at least, the
    metrics numbers and the counts non-negative.

    Raises:
        AttachedFileError: a file that does not read or is not a lens summary (its message names the file).
    """
    path = attached_file(Path(directory), LENS_FILE)
    if path is None:
        return None
    table = read_table(path, LENS_FILE, MAX_LENS_CSV, keep_default_na=False, na_values=[""])
    numbers = ["n", "layer_index", *METRICS, *(f"{m}_{e}" for m in METRICS for e in ("low", "high"))]
    missing = {"class", "layer", "readout", "command", *numbers} - set(table.columns)
    if missing or table.empty:
        raise AttachedFileError(LENS_FILE, f"{LENS_FILE} is not a lens summary: no column {sorted(missing)} or no "
                                           "row (rerun `python -m laya lens`)")  # fmt: skip
    if odd := [c for c in numbers if not pd.api.types.is_numeric_dtype(table[c])]:
        raise AttachedFileError(LENS_FILE, f"{LENS_FILE}: the columns {odd[:4]} are not numbers")
    if not table["n"].between(0, 2**62).all():  # counts of inputs, none missing
        raise AttachedFileError(LENS_FILE, f"{LENS_FILE}: the column n holds a missing or negative count")
    table["class"] = table["class"].astype(str)
    return table


def class_view(summary: pd.DataFrame, metric: str, classes: Sequence[str] | None = None) -> pd.DataFrame:
    """:func:`class_trajectories`' shape (``class, layer, layer_index, n, mean, low, high``) of one metric of a
    :func:`lens_summary` table, for ``classes`` (default all rows), for :func:`trajectory_figure`."""
    if metric not in METRICS:
        raise ValueError(f"unknown lens metric {metric!r}; expected one of {sorted(METRICS)}")
    rows = summary if classes is None else summary[summary["class"].isin(list(classes))]
    view = rows[["class", "layer", "layer_index", "n", metric, f"{metric}_low", f"{metric}_high"]]
    return view.rename(columns={metric: "mean", f"{metric}_low": "low", f"{metric}_high": "high"}).reset_index(drop=True)


def trajectory_figure(
    table: pd.DataFrame, metric: str = "kl", source: str = "", this_input: pd.DataFrame | None = None
) -> go.Figure:
    """Lines over depth: one per class of :func:`class_trajectories` / :func:`class_view` (with CI bars where
    ``low``/``high`` exist) or the single input of :meth:`Lens.table`; ``this_input`` (a :meth:`Lens.table`)
    is drawn on top of the class means as a thick line."""
    figure = go.Figure()
    groups = table.groupby("class", sort=False) if "mean" in table else [("input", table)]
    column = "mean" if "mean" in table else metric
    for name, rows in groups:
        line = go.Scatter(x=rows["layer"], y=rows[column], mode="lines+markers", name=str(name))
        if "low" in rows:
            line.error_y = {"type": "data", "symmetric": False, "array": rows["high"] - rows[column],
                            "arrayminus": rows[column] - rows["low"]}  # fmt: skip
            line.customdata = rows.get("n")
            line.hovertemplate = "%{x}: %{y:.3f} (n = %{customdata})<extra>%{fullData.name}</extra>"
        figure.add_trace(line)
    if this_input is not None:
        figure.add_trace(go.Scatter(x=this_input["layer"], y=this_input[metric], mode="lines+markers",
                                    name="this input", line={"width": 4, "color": "black"}))  # fmt: skip
    figure.update_layout(
        xaxis_title="layer", yaxis_title=METRICS[metric], title=f"Per-layer lens ({source})" if source else None
    )
    return figure


__all__ = [
    "LENS_FILE",
    "LENS_SOURCE",
    "METRICS",
    "SOURCES",
    "Lens",
    "class_trajectories",
    "class_view",
    "from_readouts",
    "lens",
    "lens_summary",
    "load_lens",
    "trajectory_figure",
    "write_lens",
]
