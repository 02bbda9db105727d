"""Classifier heads over per-layer hidden states: LAYA, ScalarMix, Concat and LastLayer.

Every head maps the hidden vectors ``[h_1, ..., h_L]`` (each ``(B, d_i)``) to a
:class:`HeadOutput` and accepts a *layer mask* (``True`` = keep) with an ablation
mode, so that leave-one-layer-out and deletion curves reuse one batched call.

Ablation modes (what "removing layer i" means). ``mean`` and ``zero_input`` are one intervention
on the head's *input* for every head, so they compare heads; ``zero`` is the paper's definition.

``mean`` (default)
    ``h_i`` is replaced by its mean over the training data (the head's reference vector); every
    head recomputes everything downstream of it (LAYA: adapters, scorer and ``alpha``).
``zero_input``
    ``h_i`` is replaced by zeros before the head (LAYA / ScalarMix: ``z_i = g_i(0)``, scores and
    ``alpha`` recomputed). For Concat / LastLayer this is the same as ``zero``.
``zero``
    The paper's definition. LAYA / ScalarMix: layer i's term leaves the aggregate,
    ``sum_{j kept} alpha_j z_j`` with the weights of the full input (alpha frozen, the scorer
    still reads layer i) and no renormalisation. Concat / LastLayer: layer i's input is zeroed.
``renormalise``
    LAYA / ScalarMix only: softmax over the kept layers' scores alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from laya.model.configs import construct

HEAD_LABELS = {"lastlayer": "LastLayer", "concat": "Concat", "scalarmix": "ScalarMix", "laya": "LAYA"}
AblationMode = Literal["mean", "zero_input", "zero", "renormalise"]
ABLATION_MODES: tuple[str, ...] = ("mean", "zero_input", "zero", "renormalise")
CROSS_HEAD_MODES: tuple[str, ...] = ("mean", "zero_input")  # the same intervention for every head
DEFAULT_MODE = "mean"


@dataclass
class HeadConfig:
    """Which head, and its hyper-parameters (defaults: the LAYA reference setting)."""

    name: Literal["laya", "scalarmix", "concat", "lastlayer"] = "laya"
    d_star: int = 96  # width of the shared space (LAYA, ScalarMix)
    tau: float = 1.5  # softmax temperature of LAYA's scores
    scorer_hidden: int = 192  # hidden width of LAYA's scoring MLP
    psi: Literal["identity", "mlp"] = "identity"  # shared map before the scorer

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HeadConfig:
        config = construct(cls, data, "head")
        if config.name not in HEADS:
            raise ValueError(f"unknown head {config.name!r}; expected one of {sorted(HEADS)}")
        if config.psi not in ("identity", "mlp"):
            raise ValueError(f"psi must be 'identity' or 'mlp', got {config.psi!r}")
        if config.tau <= 0:
            raise ValueError(f"tau must be positive, got {config.tau}")
        return config


@dataclass
class HeadOutput:
    """``logits``: ``(B, C)``, or ``(B, M, C)`` for a ``(B|1, M, L)`` mask.
    ``layer_scores``: ``(B, L)`` per-input layer scores of the *full* input, or ``None``."""

    logits: Tensor
    layer_scores: Tensor | None


class LayerHead(nn.Module):
    """Base class: validates inputs, canonicalises the layer mask, holds reference vectors.

    The head is split into :meth:`encode` (independent of the mask) and :meth:`decode`, so
    ablations evaluate many masks per input without recomputing the shared part. Subclasses
    implement ``_decode(encoded, keep, mode)`` with ``keep`` of shape ``(B|1, M, L)``, returning
    logits ``(B, M, C)`` and layer scores ``(B, L)`` or ``None``.
    """

    modes: tuple[str, ...] = ("mean", "zero_input", "zero")

    def __init__(self, dims: Sequence[int], num_classes: int) -> None:
        super().__init__()
        if not dims or any(int(d) <= 0 for d in dims):
            raise ValueError(f"layer dims must be a non-empty list of positive ints, got {list(dims)}")
        if num_classes < 2:
            raise ValueError(f"need at least 2 classes, got {num_classes}")
        self.dims = tuple(int(d) for d in dims)
        self.num_classes = int(num_classes)
        for i, d in enumerate(self.dims):
            self.register_buffer(f"reference_{i}", torch.zeros(d))

    @property
    def num_layers(self) -> int:
        return len(self.dims)

    @property
    def references(self) -> list[Tensor]:
        """Mean hidden vector of each layer over the training data (``mean`` ablation, IG baseline)."""
        return [getattr(self, f"reference_{i}") for i in range(self.num_layers)]

    def set_references(self, references: Sequence[Tensor]) -> None:
        self._check_hidden([r.unsqueeze(0) for r in references])
        for i, r in enumerate(references):
            getattr(self, f"reference_{i}").copy_(r)

    def forward(
        self, hidden: Sequence[Tensor], keep: Tensor | None = None, mode: AblationMode = DEFAULT_MODE
    ) -> HeadOutput:
        """Apply the head to ``hidden`` with layers where ``keep`` is False removed.

        Args:
            hidden: L tensors, ``hidden[i]`` of shape ``(B, d_i)``.
            keep: ``None`` (keep all), ``(L,)``, ``(B, L)``, or ``(B|1, M, L)`` for M masks per input.
            mode: one of :data:`ABLATION_MODES` supported by this head (``self.modes``).
        """
        self._check_hidden(hidden)
        return self.decode(self.encode(hidden), keep, mode)

    def encode(self, hidden: Sequence[Tensor]) -> list[Tensor]:
        """The part of the head that does not depend on the layer mask (computed once per input):
        :meth:`adapt` of each layer, then :meth:`encode_adapted` of them all."""
        return self.encode_adapted([self.adapt(i, h) for i, h in enumerate(hidden)])

    def adapt(self, layer: int, h: Tensor) -> Tensor:
        """The per-layer part of :meth:`encode`, ``(B, d_layer)`` -> the head's input for that layer (here ``h``
        itself). An early-exit run computes it once per layer reached and hands it to the head at the end."""
        return h

    def encode_adapted(self, adapted: Sequence[Tensor]) -> list[Tensor]:
        """The rest of :meth:`encode`, on every layer's :meth:`adapt` output."""
        return list(adapted)

    def decode(
        self, encoded: Sequence[Tensor], keep: Tensor | None = None, mode: AblationMode = DEFAULT_MODE
    ) -> HeadOutput:
        """The mask-dependent rest of the head, on :meth:`encode`'s output (see :meth:`forward`)."""
        if mode not in self.modes:
            raise ValueError(f"{type(self).__name__} supports ablation modes {self.modes}; got {mode!r}")
        masks, squeeze = self._canonical_mask(keep, encoded[0].shape[0], encoded[0].device)
        logits, scores = self._decode(list(encoded), masks, mode)
        return HeadOutput(logits[:, 0] if squeeze else logits, scores)

    def _decode(self, encoded: list[Tensor], keep: Tensor | None, mode: str) -> tuple[Tensor, Tensor | None]:
        """``keep``: ``(B|1, M, L)``, or None for one mask keeping every layer (the plain forward, no masking)."""
        raise NotImplementedError

    @property
    def output_layer(self) -> nn.Linear:
        """The final linear classifier (its input is the head's pooled representation)."""
        raise NotImplementedError

    def logit_terms(self, encoded: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """Exact per-layer decomposition of the logits: ``terms (B, L, C)`` and ``bias (C,)`` with
        ``logits = terms.sum(1) + bias`` (every head ends in a linear classifier)."""
        raise NotImplementedError

    def readout_logits(self, encoded: Sequence[Tensor]) -> Tensor | None:
        """Each layer's own prediction through the head's classifier, ``(B, L, C)``; None where the
        head has no per-layer classifier (Concat, LastLayer: see :mod:`laya.analysis.depth.readouts`)."""
        return None

    def _check_hidden(self, hidden: Sequence[Tensor]) -> None:
        got = [tuple(h.shape) for h in hidden]
        if len(hidden) != self.num_layers or any(
            h.ndim != 2 or h.shape[1] != d or h.shape[0] != hidden[0].shape[0] for h, d in zip(hidden, self.dims)
        ):
            raise ValueError(
                f"{type(self).__name__} expects {self.num_layers} hidden tensors of shape (B, d_i) with "
                f"d = {list(self.dims)} and one batch size; got shapes {got}"
            )

    def _canonical_mask(self, keep: Tensor | None, batch: int, device: torch.device) -> tuple[Tensor | None, bool]:
        L = self.num_layers
        if keep is None:
            return None, True
        keep = torch.as_tensor(keep, device=device).bool()
        if keep.shape[-1] != L or keep.ndim > 3 or (keep.ndim >= 2 and keep.shape[0] not in (1, batch)):
            raise ValueError(
                f"layer mask must have shape (L,), (B, L) or (B|1, M, L) with L={L}, B={batch}; got {tuple(keep.shape)}"
            )
        if keep.ndim == 3:
            return keep, False
        return keep.reshape(-1, 1, L), True

    def fill(self, mode: str) -> list[Tensor]:
        """What replaces a removed layer's input ``h_i`` under an input-level ``mode``: ``(d_i,)`` each."""
        return self.references if mode == "mean" else [torch.zeros_like(r) for r in self.references]


class LinearHead(LayerHead):
    """A linear classifier on the concatenation of selected layers.

    ``layers="last"``: LastLayer, ``logits = W h_L + b``.
    ``layers="all"``: Concat, ``logits = W [h_1; ...; h_L] + b``.
    A removed layer's input is zeroed (``zero``, ``zero_input``) or set to its reference vector (``mean``).
    """

    def __init__(self, dims: Sequence[int], num_classes: int, layers: Literal["last", "all"]) -> None:
        super().__init__(dims, num_classes)
        self.selected = [len(dims) - 1] if layers == "last" else list(range(len(dims)))
        self.linear = nn.Linear(sum(self.dims[i] for i in self.selected), num_classes)

    def _decode(self, hidden: list[Tensor], keep: Tensor | None, mode: str) -> tuple[Tensor, None]:
        if keep is None:
            return self.linear(torch.cat([hidden[i] for i in self.selected], dim=-1)).unsqueeze(1), None
        masks = keep.shape[1]
        parts = []
        fill = self.fill(mode)
        for i in self.selected:
            h = hidden[i].unsqueeze(1)  # (B, 1, d_i)
            k = keep[..., i : i + 1]  # (B|1, M, 1)
            parts.append(torch.where(k, h, fill[i].to(h.dtype)).expand(h.shape[0], masks, -1))
        return self.linear(torch.cat(parts, dim=-1)), None

    @property
    def output_layer(self) -> nn.Linear:
        return self.linear

    def logit_terms(self, encoded: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """``W [h_1; ...; h_L] + b = sum_i W_i h_i + b``: ``W_i`` is layer i's block of columns."""
        weight = self.linear.weight.to(encoded[0].dtype)
        blocks = dict(zip(self.selected, weight.split([self.dims[i] for i in self.selected], dim=1)))
        B = encoded[0].shape[0]
        terms = [encoded[i] @ blocks[i].T if i in blocks else weight.new_zeros(B, self.num_classes)
                 for i in range(self.num_layers)]  # fmt: skip
        return torch.stack(terms, dim=1), self.linear.bias.to(weight.dtype)


class MixHead(LayerHead):
    """Shared machinery of LAYA and ScalarMix: adapters, a weighted sum, a linear classifier.

    ``z_i = g_i(h_i)`` (Linear ``d_i -> d*``), weights ``alpha = softmax(s)``,
    ``h_agg = gamma * sum_i alpha_i z_i``, ``logits = W h_agg + b``.
    Subclasses define the scores ``s`` (per input for LAYA, global for ScalarMix).
    """

    modes = ABLATION_MODES

    def __init__(self, dims: Sequence[int], num_classes: int, d_star: int) -> None:
        super().__init__(dims, num_classes)
        self.adapters = nn.ModuleList(nn.Linear(d, d_star) for d in self.dims)
        self.classifier = nn.Linear(d_star, num_classes)

    def scores(self, z: Tensor) -> Tensor:
        """Unnormalised layer scores divided by the temperature: ``(..., L, d*) -> (..., L)``."""
        raise NotImplementedError

    def scale(self) -> Tensor | float:
        return 1.0

    def adapt(self, layer: int, h: Tensor) -> Tensor:
        """``z_i = g_i(h_i)``: ``(B, d_i) -> (B, d*)``."""
        return self.adapters[layer](h)

    def project(self, hidden: Sequence[Tensor]) -> Tensor:
        """``z_i = g_i(h_i)`` stacked: ``(B, L, d*)``."""
        return torch.stack([self.adapt(i, h) for i, h in enumerate(hidden)], dim=1)

    def fill_projection(self, mode: str) -> Tensor:
        """``(1, L, d*)``: the adapted fills ``g_i(fill_i)`` that replace removed layers under an input-level
        ``mode`` (input-independent; ``laya.analysis.head.ablation.float64_head`` keeps them for its copy)."""
        return self.project([r.unsqueeze(0) for r in self.fill(mode)])

    def encode_adapted(self, adapted: Sequence[Tensor]) -> list[Tensor]:
        """``[z]``: the adapted layers stacked ``(B, L, d*)``. Their scores depend on the mask under the
        input-level modes, so :meth:`decode` computes them, once per mask set."""
        return [torch.stack(list(adapted), dim=1)]

    def alpha(self, z: Tensor) -> Tensor:
        """``alpha = softmax(s(z))``: ``(B, L, d*) -> (B, L)``, the layer weights of the full input."""
        return torch.softmax(self.scores(z), dim=-1)

    def _decode(self, encoded: list[Tensor], keep: Tensor | None, mode: str) -> tuple[Tensor, Tensor]:
        z = encoded[0]  # (B, L, d*)
        if keep is None:  # every layer kept: the plain forward, alpha^T z
            alpha = self.alpha(z)
            return self._classify(torch.bmm(alpha.unsqueeze(1).to(z.dtype), z)), alpha  # (B, 1, d*)
        if mode in CROSS_HEAD_MODES:  # removed inputs replaced before the adapters; scores recomputed
            z_ref = self.fill_projection(mode).to(z.dtype)  # (1, L, d*)
            z_masked = torch.where(keep.unsqueeze(-1), z.unsqueeze(1), z_ref.unsqueeze(1))  # (B, M, L, d*)
            weights = torch.softmax(self.scores(z_masked), dim=-1)
            # a first mask keeping every layer (as every ablation's does) already holds the full input's weights
            alpha = weights[:, 0] if bool(keep[:, 0].all()) else self.alpha(z)
            return self._classify((weights.unsqueeze(-1) * z_masked).sum(dim=2)), alpha
        s = self.scores(z)  # the same z for every mask, only the weights change: one batched matmul
        alpha = torch.softmax(s, dim=-1)
        if mode == "zero":
            weights = alpha.unsqueeze(1) * keep  # (B, M, L): removed terms leave the sum
        else:  # renormalise
            masked = torch.where(keep, s.unsqueeze(1), float("-inf"))  # (B, M, L)
            weights = torch.softmax(masked, dim=-1).nan_to_num(0.0)  # all removed -> zero weights
        return self._classify(torch.bmm(weights.to(z.dtype), z)), alpha  # (B, M, L) @ (B, L, d*) -> (B, M, d*)

    def _classify(self, h_agg: Tensor) -> Tensor:
        """``W (gamma h_agg) + b``, ``(B, M, d*) -> (B, M, C)`` (LAYA: gamma = 1, no multiplication)."""
        scale = self.scale()
        return self.classifier(h_agg if isinstance(scale, float) and scale == 1.0 else scale * h_agg)

    @property
    def output_layer(self) -> nn.Linear:
        return self.classifier

    def logit_terms(self, encoded: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """``W (gamma sum_i alpha_i z_i) + b = sum_i gamma alpha_i W z_i + b``."""
        z = encoded[0]  # (B, L, d*)
        weight = self.classifier.weight.to(z.dtype)  # (C, d*)
        terms = self.scale() * self.alpha(z).unsqueeze(-1) * (z @ weight.T)  # (B, L, C)
        return terms, self.classifier.bias.to(z.dtype)

    def readout_logits(self, encoded: Sequence[Tensor]) -> Tensor:
        """``W (gamma z_i) + b``: the logits the head gives when all weight sits on layer i, ``(B, L, C)``."""
        return self.classifier(self.scale() * encoded[0])


class LayaHead(MixHead):
    """LAYA (arXiv 2511.12723): input-dependent layer attention.

    ``s(x) = MLP([psi(z_1); ...; psi(z_L)])``, ``alpha(x) = softmax(s(x) / tau)``,
    ``h_agg = sum_i alpha_i(x) z_i``. ``alpha`` are the layer scores.
    """

    def __init__(
        self,
        dims: Sequence[int],
        num_classes: int,
        d_star: int = 96,
        tau: float = 1.5,
        scorer_hidden: int = 192,
        psi: Literal["identity", "mlp"] = "identity",
    ) -> None:
        super().__init__(dims, num_classes, d_star)
        self.tau = float(tau)
        self.psi = (
            nn.Sequential(nn.Linear(d_star, d_star), nn.GELU(), nn.Linear(d_star, d_star))
            if psi == "mlp"
            else nn.Identity()
        )
        L = len(self.dims)
        self.scorer = nn.Sequential(nn.Linear(L * d_star, scorer_hidden), nn.GELU(), nn.Linear(scorer_hidden, L))

    def scores(self, z: Tensor) -> Tensor:
        return self.scorer(self.psi(z).flatten(-2)) / self.tau


class ScalarMixHead(MixHead):
    """ScalarMix: ``h_agg = gamma * sum_i softmax(w)_i z_i`` with global learned ``w``, ``gamma``.

    Its layer scores are ``softmax(w)``, identical for every input.
    """

    def __init__(self, dims: Sequence[int], num_classes: int, d_star: int = 96) -> None:
        super().__init__(dims, num_classes, d_star)
        self.w = nn.Parameter(torch.zeros(len(self.dims)))
        self.gamma = nn.Parameter(torch.ones(()))

    def scores(self, z: Tensor) -> Tensor:
        return self.w.expand(z.shape[:-1])

    def scale(self) -> Tensor:
        return self.gamma


HEADS: dict[str, Any] = {
    "laya": lambda dims, n, c: LayaHead(dims, n, c.d_star, c.tau, c.scorer_hidden, c.psi),
    "scalarmix": lambda dims, n, c: ScalarMixHead(dims, n, c.d_star),
    "concat": lambda dims, n, c: LinearHead(dims, n, layers="all"),
    "lastlayer": lambda dims, n, c: LinearHead(dims, n, layers="last"),
}


def build_head(config: HeadConfig, dims: Sequence[int], num_classes: int) -> LayerHead:
    """Construct the head named by ``config.name`` for layers of widths ``dims``."""
    if config.name not in HEADS:
        raise ValueError(f"unknown head {config.name!r}; expected one of {sorted(HEADS)}")
    return HEADS[config.name](dims, num_classes, config)


__all__ = [
    "ABLATION_MODES",
    "CROSS_HEAD_MODES",
    "DEFAULT_MODE",
    "HEADS",
    "HEAD_LABELS",
    "AblationMode",
    "HeadConfig",
    "HeadOutput",
    "LayaHead",
    "LayerHead",
    "LinearHead",
    "MixHead",
    "ScalarMixHead",
    "build_head",
]
