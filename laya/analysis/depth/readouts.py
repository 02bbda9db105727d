"""Per-layer readouts: what each layer alone would predict, prediction depth and overthinking.

* LAYA / ScalarMix: the head's own classifier on each adapted layer, ``W (gamma z_i) + b``
  (``LayerHead.readout_logits``: the logits when all the weight sits on layer i).
* Concat / LastLayer: a linear probe per layer (multinomial logistic regression, :func:`fit_linear`)
  trained on hidden states of the training split; stored beside the checkpoint (see
  :mod:`laya.analysis.depth`).
* An attached network's own classifier (a LastLayer head holding the network's exact classifier on its
  pre-logits layer): the probes on every layer but the last, which the network's classifier itself reads, so the
  last readout is the network's prediction exactly (:data:`NETWORK`; a probe there would be a second, fitted
  classifier of the same features).

Per input, with readout classes ``r_1..r_L`` and the head's final prediction ``y_hat``:

* **prediction depth** (Baldock et al. 2021): the first layer ``k`` (1-based) with ``r_j = y_hat`` for
  every ``j >= k``; ``L + 1`` when even the last readout disagrees (only the full head gives ``y_hat``).
* **overthinking** (Kaya et al. 2019, Shallow-Deep Networks): some readout is right, ``y_hat`` is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch
from torch import Tensor

from laya.analysis.head.ablation import float64_head
from laya.analysis.statistics import bootstrap_ci
from laya.codec import decode, encode, stored
from laya.model.heads import LayerHead

OWN, PROBES, NETWORK = "own classifier", "fitted probe", "fitted probe; the network's classifier at pre-logits"
KINDS = {OWN: "the head's classifier", PROBES: "linear probes (training split)",
         NETWORK: "linear probes (training split); pre-logits: the network's own classifier"}  # kind -> its source


@torch.enable_grad()
def fit_linear(
    features: Tensor, labels: Tensor, num_classes: int, weight_decay: float = 1e-4, steps: int = 100
) -> tuple[Tensor, Tensor]:
    """Multinomial logistic regression on ``features (N, D)``: ``(W (C, D), b (C,))`` with
    ``logits = features @ W.T + b``. Standardised inputs, L2 penalty, full-batch L-BFGS (seconds)."""
    if features.ndim != 2 or len(features) != len(labels) or len(features) == 0:
        raise ValueError(
            f"need features (N, D) and labels (N,), N > 0; got {tuple(features.shape)}, {tuple(labels.shape)}"
        )
    x = features.detach().float()
    mean, std = x.mean(0), x.std(0).clamp(min=1e-6)
    x = (x - mean) / std
    w = torch.zeros(num_classes, x.shape[1], device=x.device, requires_grad=True)
    b = torch.zeros(num_classes, device=x.device, requires_grad=True)
    optimizer = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")
    y = labels.to(x.device)

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(x @ w.T + b, y) + weight_decay * (w**2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    weight = (w / std).detach()  # fold the standardisation back into the weights
    return weight, (b - weight @ mean).detach()


@dataclass
class LayerProbes:
    """One linear probe per layer: ``weights[i]`` ``(C, d_i)``, ``biases`` ``(L, C)``."""

    weights: list[Tensor] = field(metadata=stored("probe_weight_{}", rows_of="biases"))
    biases: Tensor = field(metadata=stored("probe_bias"))

    @classmethod
    def fit(cls, hidden: Sequence[Tensor], labels: Tensor, num_classes: int) -> LayerProbes:
        fitted = [fit_linear(h, labels, num_classes) for h in hidden]
        return cls([w for w, _ in fitted], torch.stack([b for _, b in fitted]))

    def logits(self, hidden: Sequence[Tensor]) -> Tensor:
        """``(B, L, C)`` float64."""
        if len(hidden) != len(self.weights):
            raise ValueError(f"probes for {len(self.weights)} layers, got {len(hidden)} hidden tensors")
        return torch.stack(
            [h.double() @ w.to(h.device, torch.float64).T + b.to(h.device, torch.float64)
             for h, w, b in zip(hidden, self.weights, self.biases)],
            dim=1,
        )  # fmt: skip

    def to_tensors(self) -> dict[str, Tensor]:
        """``probe_weight_<i>`` and ``probe_bias`` (as the depth fit stores them)."""
        return encode(self)[0]

    @classmethod
    def from_tensors(cls, tensors: dict[str, Tensor]) -> LayerProbes | None:
        """Inverse of :meth:`to_tensors`; None where there are no probes. Raises ``ValueError`` naming a missing
        tensor."""
        return decode(cls, tensors, {}) if "probe_bias" in tensors else None


@torch.inference_mode()
def readout_source(
    head: LayerHead, hidden: Sequence[Tensor], probes: LayerProbes | None = None, own: bool = True,
    network: bool = False,
) -> tuple[Tensor | None, str | None]:
    """``(logits (B, L, C) float64, kind)``: each layer's own logits through the head's classifier where it has a
    shared one (:data:`OWN`; unless ``own=False``: the same kind of readout for every head), else through
    ``probes`` (:data:`PROBES`), the last layer through the head itself where ``network`` (the head is an
    attached network's own classifier on its last layer, :data:`NETWORK`; unless ``own=False``); ``(None, None)``
    where the head has no shared classifier and no probes are given."""
    head64 = float64_head(head)
    shared = head64.readout_logits(head64.encode([h.double() for h in hidden])) if own else None
    if shared is not None:
        return shared, OWN
    if probes is None:
        return None, None
    logits = probes.logits(hidden)
    if not (network and own):
        return logits, PROBES
    logits[:, -1] = head64([h.double() for h in hidden]).logits  # the network's prediction, exactly
    return logits, NETWORK


def readout_logits(
    head: LayerHead, hidden: Sequence[Tensor], probes: LayerProbes | None = None, own: bool = True,
    network: bool = False,
) -> Tensor:
    """The logits of :func:`readout_source`.

    Raises:
        ValueError: the head needs probes and none were given.
    """
    logits, _ = readout_source(head, hidden, probes, own, network)
    if logits is None:
        raise ValueError(
            f"{type(head).__name__} has no shared classifier: its per-layer readouts need linear probes "
            "(run `python -m laya depth --checkpoint DIR` to fit them)"
        )
    return logits


def has_own_readouts(head: LayerHead, hidden: Sequence[Tensor]) -> bool:
    """Whether ``head`` reads each layer through a classifier of its own (LAYA, ScalarMix), tried on the first
    input of ``hidden``; Concat and LastLayer need fitted probes (:class:`LayerProbes`)."""
    with torch.inference_mode():
        return head.readout_logits(head.encode([h[:1] for h in hidden])) is not None


def readout_kind(head: LayerHead, hidden: Sequence[Tensor], own: bool = True, network: bool = False) -> str:
    """The kind of the readouts :func:`readout_source` gives (with probes) for these arguments: :data:`OWN`,
    :data:`PROBES` or :data:`NETWORK`."""
    if own and has_own_readouts(head, hidden):
        return OWN
    return NETWORK if own and network else PROBES


def prediction_depth(readout_classes: Tensor, final: Tensor) -> Tensor:
    """``(B,)`` 1-based first layer from which every deeper readout equals ``final``; ``L + 1`` if none."""
    agree = readout_classes == final.unsqueeze(1)  # (B, L)
    trailing = agree.flip(1).long().cumprod(1).sum(1)  # agreeing readouts at the end
    return readout_classes.shape[1] - trailing + 1


def overthinking(readout_classes: Tensor, final: Tensor, labels: Tensor) -> Tensor:
    """``(B,)`` True where some layer's readout is right and the final prediction is wrong."""
    return (readout_classes == labels.unsqueeze(1)).any(1) & (final != labels)


@dataclass
class Readouts:
    """Readouts of a batch: ``probs`` ``(B, L, C)``, ``final`` ``(B,)`` the head's prediction."""

    probs: Tensor
    final: Tensor

    @classmethod
    def of(cls, readout: Tensor, final: Tensor) -> Readouts:
        return cls(torch.softmax(readout, dim=-1), final)

    @property
    def classes(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def confidence(self) -> Tensor:
        return self.probs.amax(-1)

    @property
    def depth(self) -> Tensor:
        return prediction_depth(self.classes, self.final)

    @property
    def disagreement(self) -> Tensor:
        """``(B,)`` fraction of layers whose readout differs from the final prediction."""
        return (self.classes != self.final.unsqueeze(1)).double().mean(1)

    def path(self, index: int, classes: Sequence[str], layer_names: Sequence[str]) -> pd.DataFrame:
        """One input's readout path: ``layer, layer_index, class, confidence, agrees``."""
        pred, conf = self.classes[index].tolist(), self.confidence[index].tolist()
        final = int(self.final[index])
        return pd.DataFrame(
            {
                "layer": list(layer_names),
                "layer_index": range(1, len(layer_names) + 1),
                "class": [classes[c] for c in pred],
                "confidence": conf,
                "agrees": [c == final for c in pred],
            }
        )


def class_groups(groups: Tensor, classes: Sequence[str]) -> Iterator[tuple[str, Tensor]]:
    """``("all", every input)`` then ``(class name, groups == c)``, each only when it holds an input;
    ``groups (B,)`` class indices (e.g. true labels), masks ``(B,)`` bool on ``groups``' device."""
    for name, chosen in [("all", torch.ones_like(groups, dtype=torch.bool)),
                         *((name, groups == c) for c, name in enumerate(classes))]:  # fmt: skip
        if chosen.any():
            yield name, chosen


def depth_summary(
    readouts: Readouts, labels: Tensor, classes: Sequence[str], resamples: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Per true class and overall (``class = "all"``): mean prediction depth, overthinking rate (of all
    inputs) and share of errors that are overthought, each with a 95 % bootstrap CI over inputs."""
    depth, over = readouts.depth.double().cpu(), overthinking(readouts.classes, readouts.final, labels).double().cpu()
    wrong = (readouts.final != labels).cpu()
    labels = labels.cpu()
    rows = []
    for name, chosen in class_groups(labels, classes):
        d = bootstrap_ci(depth[chosen], resamples=resamples, seed=seed)
        o = bootstrap_ci(over[chosen], resamples=resamples, seed=seed)
        errors = chosen & wrong
        e = bootstrap_ci(over[errors], resamples=resamples, seed=seed) if errors.any() else None
        rows.append({
            "class": name, "n": int(chosen.sum()), "errors": int(errors.sum()),
            "prediction_depth": d.estimate, "prediction_depth_low": d.low, "prediction_depth_high": d.high,
            "overthinking_rate": o.estimate, "overthinking_rate_low": o.low, "overthinking_rate_high": o.high,
            "overthought_errors": e.estimate if e else float("nan"),
            "overthought_errors_low": e.low if e else float("nan"),
            "overthought_errors_high": e.high if e else float("nan"),
        })  # fmt: skip
    return pd.DataFrame(rows)


__all__ = [
    "KINDS",
    "NETWORK",
    "OWN",
    "PROBES",
    "LayerProbes",
    "Readouts",
    "depth_summary",
    "fit_linear",
    "has_own_readouts",
    "overthinking",
    "prediction_depth",
    "readout_kind",
    "readout_logits",
    "readout_source",
]
