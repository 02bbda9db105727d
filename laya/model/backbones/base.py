"""The backbone interface every family implements, and the config that names a family and a model.

A backbone maps ``x: (B, C, H, W)`` to the list of per-layer hidden vectors ``[h_1, ..., h_L]``,
``h_i: (B, d_i)``, and exposes ``layer_dims`` and ``layer_names``. :func:`pool_hidden` is the one
rule that turns any layer output (feature map, token sequence, vector) into ``h_i``; :meth:`Backbone.classifier`
the one way to the network's own classifier (``pre_logits``). The helpers every family shares live here too (input
sizes, the ``layers`` rule, :func:`accepts`): family modules import this module, the registry and the shared helper
modules (``calls``, ``pre_logits``, ``units``), never each other.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from torch import Tensor, nn

from laya.model.backbones.pre_logits import PreLogits, check_classifier
from laya.model.backbones.registry import BACKBONES, family
from laya.model.configs import construct
from laya.model.validation import Rule, check_value, refuse

Pool = Literal["auto", "cls", "avg"]
SIZE_ERRORS = (AssertionError, RuntimeError, ValueError, TypeError, IndexError, KeyError, ZeroDivisionError)
CANDIDATE_SIDES = (32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 384, 448, 512)
LAYERS_RULE = Rule(max_items=256, max_chars=200, min_items=1)


@dataclass
class BackboneConfig:
    """Which backbone and how to build it. Fields not used by a family are ignored by it.

    ``name`` is a registered family (:data:`laya.model.backbones.BACKBONES`: mlp, cnn, timm,
    torchvision, transformers, wrapped); ``model`` names the model inside the family.
    """

    name: str = "mlp"
    in_channels: int | None = None  # None: taken from the dataset when training
    input_size: int | None = None  # side of the square input the backbone sees; None: the dataset's image size
    widths: tuple[int, ...] = (512, 256, 128)  # mlp: hidden widths; cnn: channels per block
    convs_per_block: int = 1  # cnn only
    model: str | None = None  # timm/torchvision model name, transformers model_type, wrapped "module:callable"
    model_kwargs: dict[str, Any] = field(default_factory=dict)  # architecture arguments (allow-listed per family)
    pool: Pool = "auto"  # token models: auto = CLS token where the model has one, else the mean of the tokens
    indices: int | list[int] | None = None  # timm forward_intermediates / transformers hidden_states indices
    intermediates_kwargs: dict[str, Any] = field(default_factory=dict)  # timm, e.g. {"extra_blocks": true}
    pre_logits: bool = False  # add the network's own final features (what its classifier reads) as the last layer
    weights: str | None = None  # None | "timm" | a source in laya.model.weights.SOURCES | a file path
    weights_by_order: bool = False  # match a weights file's tensors in order, not by name (an explicit opt-in)
    freeze: bool = False  # train only the head; the backbone stays in eval mode
    layer_names: list[str] | None = None  # display names; derived when None
    layers: list[str] | None = None  # torchvision / wrapped: the modules (graph nodes) read; None: the stages

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["widths"] = list(self.widths)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackboneConfig:
        """Check ``data`` (types, ranges, the family's own rules: :meth:`Backbone.check_config`) and build.

        Raises:
            CheckpointError: naming the field, the value and the rule.
        """
        if not isinstance(data, dict):
            raise refuse("backbone", data, "must be an object")
        name = data.get("name", "mlp")
        check_value("backbone.name", name, str)
        if name not in BACKBONES:
            raise refuse("backbone.name", name, f"unknown backbone; expected one of {', '.join(sorted(BACKBONES))}")
        kwargs = data.get("model_kwargs", {})
        if not isinstance(kwargs, dict):
            raise refuse("backbone.model_kwargs", kwargs, "must be an object")
        kind = family(name)
        kind.check_config(data)
        config = construct(cls, {k: v for k, v in data.items() if k != "model_kwargs"}, "backbone")
        config.model_kwargs = dict(kwargs)
        config.widths = tuple(int(w) for w in config.widths)
        return config


def check_layers(data: dict[str, Any], needed: bool = False) -> None:
    """``layers``: null (the family's default layers) or 1-256 names of at most 200 characters; ``needed``: null
    refused (a wrapped module has no default)."""
    layers = data.get("layers")
    if layers is None and needed:
        raise refuse("backbone.layers", None, f"backbone {data.get('name')!r} needs the names of the layers it reads")
    check_value("backbone.layers", layers, list[str] | None, LAYERS_RULE)


def pool_hidden(out: Tensor | tuple[Tensor, Tensor], pool: str = "avg", prefix_tokens: int = 0) -> Tensor:
    """One layer's output -> ``h_i: (B, d)``.

    ``(B, C, H, W)``: global average over ``H, W``. ``(B, N, D)`` tokens: the first (CLS) token for
    ``pool="cls"``, else the mean of the ``N - prefix_tokens`` patch tokens. ``(patches, prefix)`` as
    timm returns them: the first prefix token. ``(B, D)``: as is; larger ranks are averaged over all
    trailing axes but the first.
    """
    if isinstance(out, tuple):  # timm: (patch tokens, prefix tokens)
        return out[1][:, 0]
    if out.ndim == 2:
        return out
    if out.ndim == 3:
        return out[:, 0] if pool == "cls" else out[:, prefix_tokens:].mean(dim=1)
    if out.ndim == 4:
        return out.mean(dim=(2, 3))
    return out.flatten(2).mean(dim=2)


def accepts(cls: type, argument: str) -> bool:
    """Whether ``cls(...)`` takes the keyword ``argument``, following ``**kwargs`` up the MRO
    (timm's ``LevitDistilled(*args, **kwargs)`` passes ``img_size`` on to ``Levit``)."""
    for klass in cls.__mro__:
        if klass is object or "__init__" not in vars(klass):
            continue
        params = inspect.signature(klass.__init__).parameters
        if argument in params:
            return True
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return False
    return False


def candidate_sides(size: int, native: int, count: int = 10) -> list[int]:
    """The input sides to try when ``size`` is refused: the ``native`` one first, then the
    :data:`CANDIDATE_SIDES` nearest ``size``; ``count`` in all."""
    return sorted(set(CANDIDATE_SIDES) | {native}, key=lambda s: (s != native, abs(s - size)))[:count]


def size_refusal(
    model: str, size: int, kwargs: dict[str, Any], error: Exception, sizes: list[int], native: int, limit: int = 6
) -> ValueError:
    """The error for a ``size`` that ``model`` (e.g. ``"timm model 'vit_tiny_patch16_224'"``) cannot take, naming
    ``sizes`` that work (at most ``limit``); where none or ``size`` itself works, a build error instead."""
    sizes = sorted(sizes[:limit])
    if size in sizes or not sizes:  # not a matter of size: the model or its arguments do not build or run
        return ValueError(f"{model} cannot be built with model_kwargs {kwargs}: {type(error).__name__}: {error}")
    return ValueError(
        f"{model} cannot take {size}x{size} inputs ({type(error).__name__}: {str(error)[:120]}); "
        f"sizes that work: {', '.join(map(str, sizes))} (native: {native}). Set the input size (train "
        "--image-size) to one of them."
    )


class Backbone(nn.Module):
    """Base class: ``forward(x: (B, C, H, W)) -> list of L tensors (B, d_i)``.

    Families subclass it and register with :func:`laya.model.backbones.registry.register_backbone`.
    ``check_config`` validates the raw config dict of the family (before anything is built), so a
    hostile checkpoint is refused with a message naming the field.
    """

    layer_dims: tuple[int, ...]
    layer_names: tuple[str, ...]
    takes_weights: bool = False  # whether ``config.weights`` may name pretrained weights
    from_config: bool = True  # whether the config alone rebuilds it (not so for a wrapped Python module)
    weights_mapping: tuple[tuple[str, str], ...] = ()  # (file key, model key) where weights were matched in order
    pre_logits: PreLogits | None = None  # with config.pre_logits: the network's classifier layers, their inputs read
    weights_note: str = ""  # what was unwrapped to fit them: a checkpoint's entry, a stripped key prefix

    def __init__(self, config: BackboneConfig) -> None:
        super().__init__()
        if config.in_channels is None or config.input_size is None:
            raise ValueError(f"backbone {config.name!r} needs in_channels and input_size, got {config}")
        if config.weights and not self.takes_weights:
            raise ValueError(f"backbone {config.name!r} has no pretrained weights; got weights={config.weights!r}")
        self.config = config

    @classmethod
    def model_names(cls) -> list[str] | None:
        """The architecture names ``model`` may take (an unknown one is answered with the closest), or None
        where the family takes no name from a list."""
        return None

    @classmethod
    def closest(cls, name: object) -> str:
        """``"; the closest names: ..."`` for an unknown ``name`` (:func:`laya.model.validation.closest` over
        :meth:`model_names`), or ``""``."""
        from laya.model.validation import closest

        names = cls.model_names()
        return closest(name, names) if names else ""

    @classmethod
    def check_config(cls, data: dict[str, Any]) -> None:
        """Family-specific rules on a raw config dict. Default: no model arguments, no weights."""
        if data.get("model_kwargs"):
            raise refuse("backbone.model_kwargs", data["model_kwargs"], f"backbone {data.get('name')!r} takes none")

    def _finish(self, default_names: list[str]) -> None:
        names = self.config.layer_names or default_names
        if len(names) != len(self.layer_dims):
            raise ValueError(f"{len(names)} layer names given for {len(self.layer_dims)} layers: {names}")
        self.layer_names = tuple(names)
        if self.config.freeze:
            for p in self.parameters():
                p.requires_grad_(False)

    def classifier(self) -> nn.Linear:
        """The network's own final linear layer, which reads the last layer (``pre_logits``) as its input:
        ``logits = W h_L + b``; checked to be an ``nn.Linear`` on ``layer_dims[-1]`` features. Which module that
        is, a family says in :meth:`final_layer`.

        Raises:
            ValueError: no ``pre_logits``, a family without a classifier of its own, or not such a linear layer.
        """
        if not self.config.pre_logits:
            raise self._no_classifier()
        layer, what = self.final_layer()
        return check_classifier(layer, self.layer_dims[-1], what)

    def final_layer(self) -> tuple[Any, str]:
        """The network's own classifier, unchecked, and the words an error names it by. Default: the layers of
        ``self.pre_logits`` (:func:`~laya.model.backbones.pre_logits.classifier_linears` found them when the family
        was built with ``pre_logits``) as one linear layer on their joined inputs, named
        ``<family> '<model>' <layer names>``; none without them."""
        if self.pre_logits is None:
            raise self._no_classifier()
        what = f"{self.config.name} {self.config.model!r} {' + '.join(self.pre_logits.names)}"
        return self.pre_logits.linear(), what

    def _no_classifier(self) -> ValueError:
        return ValueError(f"backbone {self.config.name!r} has no classifier of its own (needs pre_logits and one)")

    def forward_to(self, x: Tensor, layer: int) -> Tensor:
        """Hidden state of ``layer`` (0-based) alone, ``(B, d_layer)``, running the network no deeper
        than that layer needs (early exit, backbone truncation). Default: the full pass."""
        self._check_layer(layer)
        return self(x)[layer]

    def _check_layer(self, layer: int) -> None:
        if not 0 <= layer < len(self.layer_dims):
            raise ValueError(f"layer must be in 0..{len(self.layer_dims) - 1}, got {layer}")

    def train(self, mode: bool = True) -> Backbone:
        """A frozen backbone stays in eval mode (BatchNorm statistics and dropout fixed)."""
        return super().train(mode and not self.config.freeze)

    def network_state(self) -> dict[str, Tensor]:
        """The network's state dict as its weights file holds it, what ``config.weights`` loads (an attached
        network's, written once beside its heads)."""
        return self.model.state_dict()

    def fingerprint(self) -> str:
        """sha256 of the weights, to check that a frozen backbone is the one a head was trained on."""
        digest = hashlib.sha256()
        for name, tensor in sorted(self.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().float().numpy().tobytes())
        return digest.hexdigest()


__all__ = [
    "CANDIDATE_SIDES",
    "LAYERS_RULE",
    "SIZE_ERRORS",
    "Backbone",
    "BackboneConfig",
    "Pool",
    "accepts",
    "candidate_sides",
    "check_layers",
    "pool_hidden",
    "size_refusal",
]
