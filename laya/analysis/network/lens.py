"""The network's own lens: what each unit predicts when read through the network's own classifier.

Per unit ``u`` the unit's output is pooled the way the network's head pools (:func:`own_readout`:
CLS token or mean of patches, :func:`~laya.model.backbones.base.pool_hidden`) to ``v_u: (B, d_u)``,
translated to ``T_u(v_u) = A_u v_u + b_u: (B, D)`` and read by the network itself, ``z_u = R(T_u(v_u)): (B, K)``:

* **logit lens** (``T_u`` = identity): where the units write into the residual stream that the network's final
  norm and classifier read (timm ViT / DeiT / BEiT / EVA blocks, transformers ViT / DeiT layers),
  ``R(v) = W fc_norm(norm(v)) + c``; elsewhere a unit's output is not in the classifier's space and the logit
  lens does not apply (:func:`logit_lens` raises).
* **tuned lens** (Belrose et al., 2023, https://arxiv.org/abs/2303.08112), every architecture: one affine
  translator per unit, initialised to the identity (``A = I, b = 0`` where ``d_u = D``, else ``A = 0``), fitted
  on training inputs to minimise ``KL(p || softmax(z_u))`` to the network's own final distribution ``p`` (never
  the labels), each translator until its KL on a held-out part of the sample stops improving
  (:func:`fit_tuned_lens`; ``docs/decisions/tuned-lens-stopping.md``). ``R`` is the residual read-out above where
  it exists, else the network's own classifier on pre-logits features (``D`` its input width). Stored as
  ``tuned_lens.safetensors`` + ``tuned_lens.json`` (the config and the command that fitted it) beside a checkpoint.

Either gives a :class:`laya.analysis.depth.layer_lens.Lens` (``log_q (B, U, K)``, ``log_p (B, K)``) from ONE
forward of the network: per input :func:`lens_profile` (each unit's predicted class, ``p`` of the final prediction, KL to the
final distribution) and :func:`prediction_depth` (the first unit from which the lens agrees with the final
prediction through to the end); per class :func:`class_unit_table`, a class x unit table for a heatmap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import plotly.graph_objects as go
import torch
from torch import Tensor, nn

from laya.analysis.depth.layer_lens import METRICS, Lens
from laya.analysis.depth.readouts import class_groups
from laya.analysis.depth.readouts import prediction_depth as first_agreeing
from laya.analysis.network.lens_record import LENS_CONFIG, check_config
from laya.analysis.network.recording import as_network, prefix_tokens, run_units
from laya.app import palette
from laya.model.backbones import pool_hidden
from laya.model.backbones.pre_logits import classifier_linears, joined_linear
from laya.model.attached_files import (
    AttachedFileError,
    attached_file,
    field_error,
    read_json,
    read_tensors,
    tensor_header,
)
from laya.model.budget import limits
from laya.model.checkpoint import atomic_write_json, atomic_write_tensors

Space = Literal["residual", "pre-logits"]
LENS_WEIGHTS = "tuned_lens.safetensors"
UNIT_METRICS = {**METRICS, "agrees": "share agreeing with the final prediction"}
HELD_OUT, EPOCHS, PATIENCE, LR = 0.2, 400, 25, 3e-3  # the tuned lens's fit: docs/decisions/tuned-lens-stopping.md


@dataclass
class Readout:
    """How the network reads a prediction off one vector: ``space`` it lives in, ``width`` ``D``, ``pool`` (how a
    unit's tokens become a vector: ``"cls"``, ``"avg"``, or ``"auto"``: the CLS token where there are prefix tokens),
    ``read: (N, D) -> (N, K)`` logits, and ``classifier`` the names of the network's classifier layers
    (:func:`~laya.model.backbones.pre_logits.classifier_linears`: its final linear layer, a distilled model's two)."""

    space: Space
    width: int
    pool: str
    read: Callable[[Tensor], Tensor]
    classifier: tuple[str, ...]

    def pooled(self, network: nn.Module, out: Tensor) -> Tensor:
        """A unit's output ``(B, C, h, w)`` / ``(B, N, D)`` / ``(B, D)`` -> ``(B, d)``."""
        prefix = prefix_tokens(network, out.shape[1]) if out.ndim == 3 else 0
        pool = ("cls" if prefix else "avg") if self.pool == "auto" else self.pool
        return pool_hidden(out, pool, prefix)


def own_readout(network: nn.Module) -> Readout:
    """The network's own read-out. Residual: a timm ViT-like model (``norm``, ``fc_norm``, linear ``head``;
    pooled by its CLS token, or by the mean with ``norm`` an identity, so that norm and pooling commute), or a
    transformers ``ViT``/``DeiT`` ``...ForImageClassification`` (``layernorm`` then ``classifier`` on the CLS
    token). Otherwise pre-logits: the network's classifier as one ``nn.Linear`` on its joined input
    (:func:`~laya.model.backbones.pre_logits.joined_linear`: a distilled model's two heads averaged)."""
    pool = getattr(network, "global_pool", None)
    head = getattr(network, "head", None)
    name = classifier_linears(network)
    if (isinstance(head, nn.Linear) and hasattr(network, "norm") and hasattr(network, "fc_norm")
            and getattr(network, "attn_pool", None) is None and not hasattr(network, "head_dist")
            and (pool == "token" or (pool == "avg" and isinstance(network.norm, nn.Identity)))):  # fmt: skip
        return Readout("residual", head.in_features, "cls" if pool == "token" else "avg",
                       lambda v: head(network.fc_norm(network.norm(v))), name)  # fmt: skip
    classifier = getattr(network, "classifier", None)
    for body in (getattr(network, name, None) for name in ("vit", "deit")):
        if isinstance(classifier, nn.Linear) and hasattr(body, "layernorm"):
            return Readout("residual", classifier.in_features, "cls", lambda v: classifier(body.layernorm(v)), name)
    linear = joined_linear([network.get_submodule(n) for n in name])
    return Readout("pre-logits", linear.in_features, "auto", linear, name)


@dataclass
class TunedLensConfig:
    """A tuned lens's shape and how it was fitted: ``units`` (module names), ``dims`` each unit's pooled width,
    ``width`` ``D`` and ``classes`` ``K`` of the read-out, its ``space``; ``sample`` training inputs
    (class-balanced, drawn with ``seed``), of which the share ``held_out`` is kept out of training (a seeded split,
    class-balanced where labels are given) to stop each translator once its held-out KL has not improved for
    ``patience`` epochs, ``epochs`` the cap; Adam at ``lr`` in batches of ``batch_size``; ``command`` that fitted
    it. A config stored before early stopping (no ``held_out``, ``patience``) loads with their defaults; its ``fit``
    has no ``best_epoch``."""

    units: list[str]
    dims: list[int]
    width: int
    classes: int
    space: Space = "pre-logits"
    sample: int = 2000
    held_out: float = HELD_OUT
    epochs: int = EPOCHS
    patience: int = PATIENCE
    batch_size: int = 128
    lr: float = LR
    seed: int = 0
    command: str = ""
    fit: dict[str, Any] = field(default_factory=dict)  # after fitting: :func:`fit_tuned_lens`'s summary

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> TunedLensConfig:
        """The config stored in ``tuned_lens.json``, every field's type and range checked before anything is sized
        by it (:func:`~laya.analysis.network.lens_record.check_config`: at most
        :data:`~laya.model.attached_files.MAX_UNITS` units, widths up to :data:`~laya.model.attached_files.MAX_WIDTH`,
        the fit's summary of the units and classes), the translators within ``LAYA_MAX_PARAMS``.

        Raises:
            AttachedFileError: naming the field that is missing, unknown or of the wrong kind or size.
        """
        if not isinstance(data, dict):
            raise field_error(LENS_CONFIG, "(the file)", data, "must be a JSON object")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown or not {"units", "dims", "width", "classes"} <= set(data):
            raise AttachedFileError(LENS_CONFIG, f"{LENS_CONFIG}: not a tuned lens config: unknown "
                                                 f"{sorted(unknown)[:5]}, needs units, dims, width, classes")
        check_config(data)
        config = cls(**data)
        params = sum(d * config.width + config.width for d in config.dims)
        if params > limits().params:
            raise field_error(LENS_CONFIG, "dims x width", f"{params:,} parameters",
                              f"over the limit of {limits().params:,} (LAYA_MAX_PARAMS)")  # fmt: skip
        return config


class TunedLens(nn.Module):
    """One affine translator per unit, ``translators[u]: (B, d_u) -> (B, D)``, identity-initialised."""

    def __init__(self, config: TunedLensConfig) -> None:
        super().__init__()
        self.config = config
        self.translators = nn.ModuleList(nn.Linear(d, config.width) for d in config.dims)
        with torch.no_grad():
            for t in self.translators:
                t.bias.zero_()
                t.weight.copy_(torch.eye(config.width) if t.in_features == config.width else torch.zeros_like(t.weight))

    def forward(self, pooled: Sequence[Tensor]) -> Tensor:
        """``pooled``: U tensors ``(B, d_u)`` -> ``(B, U, D)``."""
        return torch.stack([t(v) for t, v in zip(self.translators, pooled)], 1)


def read_translated(readout: Readout, translated: Tensor) -> Tensor:
    """``(B, U, D)`` -> logits ``(B, U, K)``, the read-out applied once to all units' rows."""
    B, U, D = translated.shape
    return readout.read(translated.reshape(B * U, D)).reshape(B, U, -1)


def pooled_units(network: nn.Module, readout: Readout, x: Tensor, units: Sequence[str]) -> tuple[list[Tensor], Tensor]:
    run = run_units(network, x, units, readout.classifier)
    return [readout.pooled(network, out) for out in run.outputs], run.logits


@torch.no_grad()
def unit_lens(model: nn.Module, x: Tensor, units: Sequence[str], tuned: TunedLens | None = None) -> Lens:
    """The lens of every unit on ``x: (B, C, H, W)`` from one forward: ``tuned`` (a :class:`TunedLens` for these
    units, on the network's device) or, when None, the logit lens. ``model``: the network or an attached backbone
    (:func:`~laya.analysis.network.recording.as_network`). ``Lens.source``: ``"tuned lens"`` / ``"logit lens"``.

    Raises:
        ValueError: the logit lens of a network whose units are not in its classifier's space, or a tuned lens
            fitted for other units or another read-out.
    """
    network = as_network(model)
    readout = own_readout(network)
    if tuned is None and readout.space != "residual":
        raise ValueError(f"{type(network).__name__}'s units do not write into the space its classifier reads (no "
                         "final norm + classifier over a residual stream): the logit lens does not apply; fit a "
                         "tuned lens (fit_tuned_lens)")  # fmt: skip
    if tuned is not None:
        check_fits(tuned, readout, units)
    pooled, logits = pooled_units(network, readout, x, units)
    translated = torch.stack(pooled, 1) if tuned is None else tuned(pooled)
    z = read_translated(readout, translated)
    source = "logit lens" if tuned is None else "tuned lens"
    return Lens(torch.log_softmax(z.double(), -1), torch.log_softmax(logits.double(), -1), source)


def logit_lens(model: nn.Module, x: Tensor, units: Sequence[str]) -> Lens:
    """:func:`unit_lens` with no translators (raises where the logit lens does not apply)."""
    return unit_lens(model, x, units)


def check_fits(tuned: TunedLens, readout: Readout, units: Sequence[str]) -> None:
    """Raise ``ValueError`` unless ``tuned`` was fitted for ``units`` and this read-out (space, width)."""
    c = tuned.config
    if list(units) != list(c.units) or (c.space, c.width) != (readout.space, readout.width):
        raise ValueError(f"the tuned lens was fitted for units {c.units} read in {c.space} ({c.width}-d); "
                         f"given units {list(units)} read in {readout.space} ({readout.width}-d)")  # fmt: skip


def save_tuned_lens(lens: TunedLens, directory: str | Path) -> Path:
    """Write ``directory/tuned_lens.safetensors`` (translators) and ``tuned_lens.json`` (:class:`TunedLensConfig`,
    with its command). Returns the weights' path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in lens.state_dict().items()}
    atomic_write_tensors(directory / LENS_WEIGHTS, state)
    atomic_write_json(directory / LENS_CONFIG, lens.config.to_dict())
    return directory / LENS_WEIGHTS


def lens_shapes(config: TunedLensConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of a :class:`TunedLens` of ``config`` by name, with its shape (no module built)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for i, d in enumerate(config.dims):
        shapes |= {f"translators.{i}.weight": (config.width, d), f"translators.{i}.bias": (config.width,)}
    return shapes


MAX_LENS_JSON = 1 << 20  # a tuned_lens.json is a few KB (one name and width per unit)


def load_tuned_lens(
    directory: str | Path, model: nn.Module | None = None, units: Sequence[str] | None = None
) -> TunedLens | None:
    """The tuned lens beside a checkpoint, or None where there is no ``tuned_lens.json``. Both files are untrusted
    (:mod:`laya.model.attached_files`): confined to the setting folder, the config's fields checked, the weights
    file's header compared with the config before a tensor is read or a translator built, its values finite. Given
    ``model``, the config is checked against the network's read-out (space, width, classes) and the lens is moved to
    the network's device; given ``units`` (the network's, :func:`~laya.analysis.network.units.network_units`), the
    lens must have been fitted for exactly those.

    Raises:
        AttachedFileError: a file that does not read or does not fit (its message names the file).
    """
    directory = Path(directory)
    config_path = attached_file(directory, LENS_CONFIG)
    if config_path is None:
        return None
    config = TunedLensConfig.from_dict(read_json(config_path, LENS_CONFIG, MAX_LENS_JSON))
    weights = attached_file(directory, LENS_WEIGHTS)
    if weights is None:
        raise AttachedFileError(LENS_WEIGHTS, f"{LENS_WEIGHTS} is missing beside {LENS_CONFIG}")
    expected, found = lens_shapes(config), {k: shape for k, (shape, _) in tensor_header(weights, LENS_WEIGHTS).items()}
    if found != expected:  # before a tensor is read or a translator built
        wrong = sorted(k for k in expected.keys() | found.keys() if expected.get(k) != found.get(k))[:4]
        raise AttachedFileError(LENS_WEIGHTS, f"{LENS_WEIGHTS} does not fit its config: {[k[:80] for k in wrong]} "
                                              f"expected {[expected.get(k) for k in wrong]}, found "
                                              f"{[found.get(k) for k in wrong]}")  # fmt: skip
    state = read_tensors(weights, LENS_WEIGHTS)
    odd = sorted(k for k, v in state.items() if not v.is_floating_point() or not bool(torch.isfinite(v).all()))
    if odd:
        raise AttachedFileError(LENS_WEIGHTS, f"{LENS_WEIGHTS}: {odd[:4]} are not finite floating-point values")
    with torch.device("meta"):
        lens = TunedLens(config)
    lens.load_state_dict({k: v.float() for k, v in state.items()}, assign=True)
    if units is not None and list(units) != config.units:
        raise AttachedFileError(LENS_CONFIG, f"{LENS_CONFIG} was fitted for units {config.units[:12]}; the network's "
                                             f"are {list(units)[:12]} (refit it: `laya network --refit-lens`)")
    if model is not None:
        network = as_network(model)
        readout = own_readout(network)
        try:
            check_fits(lens, readout, config.units)  # the read-out's space and width
        except ValueError as error:
            raise AttachedFileError(LENS_CONFIG, f"{LENS_CONFIG} does not fit this network: {error}") from None
        if network.get_submodule(readout.classifier[0]).out_features != config.classes:
            raise AttachedFileError(LENS_CONFIG, f"{LENS_CONFIG}: the tuned lens reads {config.classes} classes; the "
                                                 "network has another number")  # fmt: skip
        lens.to(next(network.parameters()).device)
    return lens.eval()


def prediction_depth(lens: Lens) -> Tensor:
    """``(B,)`` the network's own prediction depth: the first unit (1-based) from which the lens's class equals
    the final prediction at every deeper unit; ``U + 1`` where even the last unit's disagrees."""
    return first_agreeing(lens.log_q.argmax(-1), lens.final)


def lens_profile(lens: Lens, index: int, classes: Sequence[str], units: Sequence[str]) -> pd.DataFrame:
    """Input ``index``'s lens: ``unit, unit_index`` (1-based), ``predicted`` (the unit's class name), ``prob``
    (its p of the final prediction), ``kl`` (to the final distribution, nats), ``agrees``."""
    predicted = lens.log_q[index].argmax(-1)
    return pd.DataFrame({
        "unit": list(units),
        "unit_index": range(1, len(units) + 1),
        "predicted": [classes[c] for c in predicted.tolist()],
        "prob": lens.prob[index].tolist(),
        "kl": lens.kl[index].tolist(),
        "agrees": (predicted == lens.final[index]).tolist(),
    })  # fmt: skip


def class_unit_table(
    lens: Lens, groups: Tensor, classes: Sequence[str], units: Sequence[str], metric: str = "prob"
) -> pd.DataFrame:
    """Class x unit means of ``metric`` (:data:`UNIT_METRICS`: ``prob``, ``kl``, ``entropy``, ``rank``, ``agrees``)
    over the inputs of each group (``groups (B,)``: true or predicted classes), ``"all"`` first; rows name the
    class, columns the unit; ``n`` the inputs of each row."""
    if metric not in UNIT_METRICS:
        raise ValueError(f"unknown lens metric {metric!r}; expected one of {sorted(UNIT_METRICS)}")
    values = (lens.log_q.argmax(-1) == lens.final.unsqueeze(1)).double() if metric == "agrees" else lens.metric(metric)
    groups = torch.as_tensor(groups).to(values.device)
    rows = {name: [*values[chosen].mean(0).tolist(), int(chosen.sum())]
            for name, chosen in class_groups(groups, classes)}  # fmt: skip
    return pd.DataFrame.from_dict(rows, orient="index", columns=[*units, "n"]).rename_axis("class")


def profile_figure(profile: pd.DataFrame, depth: int | None = None, title: str | None = None) -> go.Figure:
    """One input's strip over the units (:func:`lens_profile`): bars of p(final prediction), teal where the unit's
    class agrees with it and red where not, its class as the bar's label; KL on a second axis; a line before the
    prediction ``depth`` (1-based, :func:`prediction_depth`) where it is within the units."""
    colors = [palette.CONFIDENCE if a else palette.DISAGREE for a in profile["agrees"]]
    figure = go.Figure([
        go.Bar(x=profile["unit"], y=profile["prob"], marker_color=colors, text=profile["predicted"], name="p(final)",
               hovertemplate="%{x}: reads %{text}, p(final) %{y:.3f}<extra></extra>"),
        go.Scatter(x=profile["unit"], y=profile["kl"], mode="lines+markers", yaxis="y2", name="KL",
                   line={"color": palette.NEUTRAL}),
    ])  # fmt: skip
    if depth is not None and depth <= len(profile):
        figure.add_vline(x=depth - 1.5, line_dash="dash", line_color=palette.NEUTRAL,
                         annotation_text=f"prediction depth {depth}")  # fmt: skip
    figure.update_layout(
        title=title, xaxis_title="unit", yaxis={"title": "p(final prediction)", "range": [0, 1]},
        yaxis2={"title": "KL(final || unit) [nats]", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "left", "x": 0},  # off the depth label
    )  # fmt: skip
    return figure


def class_unit_figure(table: pd.DataFrame, metric: str = "prob", title: str | None = None) -> go.Figure:
    """The class x unit heatmap of :func:`class_unit_table` (``n`` in the hover)."""
    values = table.drop(columns="n")
    figure = go.Figure(go.Heatmap(
        z=values.values, x=list(values.columns), y=list(values.index), colorscale=palette.HEATMAP_SCALES["scores"],
        customdata=table[["n"]].values.repeat(values.shape[1], 1),
        hovertemplate="%{y}, %{x}: %{z:.3f} (n = %{customdata})<extra></extra>",
        colorbar={"title": UNIT_METRICS[metric]},
    ))  # fmt: skip
    figure.update_layout(title=title, xaxis_title="unit", yaxis_title="class", yaxis_autorange="reversed")
    return figure


__all__ = [
    "EPOCHS",
    "HELD_OUT",
    "LENS_CONFIG",
    "LENS_WEIGHTS",
    "LR",
    "PATIENCE",
    "UNIT_METRICS",
    "Readout",
    "TunedLens",
    "TunedLensConfig",
    "class_unit_figure",
    "class_unit_table",
    "lens_profile",
    "lens_shapes",
    "load_tuned_lens",
    "logit_lens",
    "own_readout",
    "pooled_units",
    "prediction_depth",
    "profile_figure",
    "read_translated",
    "save_tuned_lens",
    "unit_lens",
]
