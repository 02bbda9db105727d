"""One forward of the network itself, recording what its units return and what its classifier reads.

The network is a plain ``nn.Module``, ``x: (B, C, H, W) -> logits (B, K)`` (or an output with ``.logits``, as
``transformers`` models return, or a dict with a ``"logits"`` entry: :func:`~laya.model.backbones.pre_logits.logits_of`), in which each unit is a submodule named as ``named_modules()`` names it
(torchvision ResNet ``layer1.0``, timm ViT ``blocks.0``, transformers ViT ``vit.encoder.layer.0``).
:func:`run_units` runs it once with forward hooks on the units and a pre-hook on each layer of its classifier
(:func:`~laya.model.backbones.pre_logits.classifier_linears`: its final linear layer, a distilled model's two); the
hooks act only for the calling thread (:class:`~laya.model.hooks.Hooks`) and only inside the call, so sessions
sharing one model never see each other's outputs, and nothing is kept on the model. :func:`as_network` finds that network in an attached backbone.

A unit's output is a feature map ``(B, C, h, w)`` or tokens ``(B, N, D)`` whose first ``P`` are prefix tokens
(CLS, distillation, registers) and the rest a ``h x w`` grid of patches; :func:`spatial` lays both out as maps,
as pytorch-grad-cam's ``reshape_transform`` does for ViTs.

A pass of many rows (the lesion study's settings, the Grad-CAM test's perturbed images) is sized by memory, not by
a count alone: :func:`~laya.model.hooks.pass_rows`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from laya.model.backbones import Backbone, TimmBackbone, TorchvisionBackbone, TransformersBackbone, WrappedBackbone
from laya.model.backbones.pre_logits import classifier_linears, join, logits_of
from laya.model.hooks import Hooks, layer_tensor

@dataclass
class UnitRun:
    """One forward: ``outputs[u]`` unit ``u``'s output as its module returned it (a tuple's first tensor),
    ``features`` ``(B, D)`` what the classifier's layers read, joined (the pre-logits), ``logits`` ``(B, K)``;
    ``inputs[u]`` the tensor the unit was called with (its first argument; None where that is no tensor)."""

    outputs: list[Tensor]
    features: Tensor
    logits: Tensor
    inputs: list[Tensor | None] = field(default_factory=list)


def unit_modules(network: nn.Module, units: Sequence[str]) -> list[nn.Module]:
    """The submodule of ``network`` each unit names. Raises ``ValueError`` naming the unknown ones."""
    modules, unknown = [], []
    for u in units:  # each looked up by its path, not by a walk of every module (this runs on every profile)
        try:
            modules.append(network.get_submodule(u))
        except AttributeError:
            unknown.append(u)
    if unknown or not units:
        example = [n for n, _ in network.named_modules() if n][:6]
        raise ValueError(f"{type(network).__name__} has no unit(s) {unknown or '(none given)'}; modules: {example} ...")
    return modules


def run_units(network: nn.Module, x: Tensor, units: Sequence[str], classifier: Sequence[str] = ()) -> UnitRun:
    """``network(x)`` once, recording every unit's output and what the layers of ``classifier`` read, joined
    (default the network's own: :func:`~laya.model.backbones.pre_logits.classifier_linears`). Gradients flow as the
    caller's grad mode says (outputs are not detached).

    Raises:
        ValueError: a unit is unknown, or runs other than once in the forward (a module used twice).
    """
    modules = unit_modules(network, units)
    heads = [network.get_submodule(name) for name in classifier or classifier_linears(network)]
    seen: list[list[Tensor]] = [[] for _ in modules]
    given: list[list[Tensor | None]] = [[] for _ in modules]
    read: list[list[Tensor]] = [[] for _ in heads]

    def keep(store: list[Tensor], args_store: list[Tensor | None]) -> Any:
        def hook(module: nn.Module, args: tuple, out: Any) -> None:
            store.append(layer_tensor(out))
            args_store.append(args[0] if args and isinstance(args[0], Tensor) else None)

        return hook

    with Hooks() as hooks:
        for m, store, inp in zip(modules, seen, given):
            hooks.after(m, keep(store, inp))
        for head, store in zip(heads, read):
            hooks.before(head, lambda module, args, store=store: store.append(args[0]))
        logits = logits_of(network(x))
    twice = [u for u, store in zip(units, seen) if len(store) != 1 or store[0] is None]
    if twice or any(len(store) != 1 for store in read):
        raise ValueError(f"each unit and the classifier must run once per forward, returning a tensor; "
                         f"not so for {twice or 'the classifier'}")  # fmt: skip
    return UnitRun([store[0] for store in seen], join([store[0] for store in read]), logits,
                   [store[0] for store in given])  # fmt: skip


def prefix_tokens(network: nn.Module, tokens: int) -> int:
    """How many of ``tokens`` leading tokens are not patches: timm's ``num_prefix_tokens`` where the network
    says, else what is left over above the largest square grid (``197 = 1 + 14^2``, ``5 = 1 + 2^2``)."""
    known = getattr(network, "num_prefix_tokens", None)
    return int(known) if known is not None else tokens - math.isqrt(tokens) ** 2


def spatial(out: Tensor, prefix: int = 0) -> Tensor:
    """A unit's output as maps ``(B, C, h, w)``: a feature map as it is; tokens ``(B, N, D)`` without their
    ``prefix`` leading tokens, the ``N - prefix`` patches as a square grid ``(B, D, h, h)`` (row-major, as
    pytorch-grad-cam's ``vit_reshape_transform``). Raises ``ValueError`` for any other layout."""
    if out.ndim == 4:
        return out
    if out.ndim == 3:
        patches = out[:, prefix:]
        side = math.isqrt(patches.shape[1])
        if side * side != patches.shape[1] or side == 0:
            raise ValueError(f"{patches.shape[1]} patch tokens (after {prefix} prefix tokens) are no square grid")
        return patches.reshape(out.shape[0], side, side, out.shape[2]).permute(0, 3, 1, 2)
    raise ValueError(f"a unit's output must be a feature map (B, C, h, w) or tokens (B, N, D); got {tuple(out.shape)}")


_REBUILT: weakref.WeakKeyDictionary[Backbone, nn.Module] = weakref.WeakKeyDictionary()


def as_network(model: nn.Module) -> nn.Module:
    """The network whose units and classifier the analyses hook: ``model`` itself unless it is a
    :class:`~laya.model.backbones.base.Backbone` built with ``pre_logits`` (an attached network), whose own
    module it then is (timm, transformers, wrapped). A torchvision backbone runs a traced graph in which no unit
    is called as a module, so the architecture is rebuilt around the very same parameter and buffer tensors
    (nothing copied; built once per backbone).

    Raises:
        ValueError: a backbone without its own classifier (no ``pre_logits``) or of a family with no network.
    """
    if not isinstance(model, Backbone):
        return model
    if not model.config.pre_logits:
        raise ValueError(f"backbone {model.config.name!r} was built without pre_logits: it has no classifier of its "
                         "own to read (attach the network with `laya attach`)")  # fmt: skip
    if isinstance(model, (TimmBackbone, TransformersBackbone, WrappedBackbone)):
        return model.model
    if isinstance(model, TorchvisionBackbone):
        if model not in _REBUILT:
            _REBUILT[model] = _untraced(model)
        return _REBUILT[model]
    raise ValueError(f"backbone {model.config.name!r} has no network of its own to read unit by unit")


def _untraced(backbone: TorchvisionBackbone) -> nn.Module:
    """The torchvision architecture (on the meta device, no memory) with every parameter and buffer taken from
    the backbone's traced graph by name (a buffer the graph holds as a constant: from the network it was traced
    from), in eval mode."""
    import torchvision

    from laya.model.backbones.torchvision import build, network_kwargs

    config = backbone.config
    builder = torchvision.models.get_model_builder(config.model)
    size = {"image_size": config.input_size} if config.model.startswith("vit_") else {}  # position embeddings
    with torch.device("meta"):  # RegNet's widths computed on the CPU
        network = build(builder, **network_kwargs(config.model, config.model_kwargs), **size)
    traced = dict(backbone.model.named_parameters()) | dict(backbone.model.named_buffers())
    device = next(backbone.model.parameters()).device
    for name, module in network.named_modules():
        for key, value in [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]:
            full = f"{name}.{key}" if name else key
            if full not in traced and value is not None and not isinstance(value, nn.Parameter):
                # a buffer the graph holds as a constant under another name (MaxViT's relative position indices)
                traced[full] = backbone.network.get_buffer(full).to(device)
            if full not in traced and value is not None:
                raise ValueError(f"torchvision {config.model!r}: {full} is not in the traced network")
            if isinstance(value, nn.Parameter):
                module._parameters[key] = traced[full]
            elif value is not None:
                module._buffers[key] = traced[full]
    return network.eval()


__all__ = ["UnitRun", "as_network", "logits_of", "prefix_tokens", "run_units", "spatial", "unit_modules"]
