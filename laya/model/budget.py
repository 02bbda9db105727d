"""Parameter and activation budget of a model, computed from its config before any tensor exists.

The model is built on PyTorch's ``meta`` device (shapes only, no memory) with the same
constructors as the real one, so the count is exact for every family (MLP, CNN, any timm
model) and costs milliseconds. One meta forward pass of a single input sums the elements
every leaf module outputs (the activations a real forward would hold) plus the head's
largest ablation tensor, ``L * L * d*`` (one mask per layer, :class:`~laya.model.heads.MixHead`).

Limits (environment): ``LAYA_MAX_PARAMS`` (default 500 M parameters),
``LAYA_MAX_ACTIVATIONS`` (default 200 M elements per input, 800 MB in float32).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import torch
from torch import nn

from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.heads import HeadConfig, build_head
from laya.model.validation import CheckpointError, refuse

DEFAULT_MAX_PARAMS = 500_000_000
DEFAULT_MAX_ACTIVATIONS = 200_000_000


@dataclass(frozen=True)
class Budget:
    """What a model would cost: ``params`` (backbone + head), ``activations`` per input, layer widths."""

    params: int
    activations: int
    layer_dims: tuple[int, ...]


def limits() -> tuple[int, int]:
    """``(max parameters, max activation elements per input)`` from the environment."""
    values = []
    for name, default in (("LAYA_MAX_PARAMS", DEFAULT_MAX_PARAMS), ("LAYA_MAX_ACTIVATIONS", DEFAULT_MAX_ACTIVATIONS)):
        text = os.environ.get(name, "").replace("_", "")
        try:
            values.append(int(float(text)) if text else default)
        except ValueError as error:
            raise CheckpointError(f"{name}={text!r} is not a number") from error
    return values[0], values[1]


def _leaf_outputs(model: nn.Module, run) -> int:
    """Elements output by every leaf module of ``model`` during ``run()``."""
    total = [0]

    def count(module: nn.Module, inputs, output) -> None:
        outputs = output if isinstance(output, (list, tuple)) else [output]
        total[0] += sum(o.numel() for o in outputs if isinstance(o, torch.Tensor))

    hooks = [m.register_forward_hook(count) for m in model.modules() if not any(m.children())]
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
    return total[0]


def estimate(backbone: BackboneConfig, head: HeadConfig, num_classes: int) -> Budget:
    """Build the model on the ``meta`` device and count its parameters and per-input activations.

    Raises:
        CheckpointError: the config cannot be built (e.g. a timm model that does not accept its arguments).
    """
    config = replace(backbone, weights=None, freeze=False)
    if config.in_channels is None or config.input_size is None:
        raise refuse("backbone.in_channels/input_size", None, "must be set to compute the model's size")
    try:
        with torch.device("meta"), torch.no_grad():
            net = build_backbone(config)
            layer_net = build_head(head, net.layer_dims, num_classes)
            net.eval(), layer_net.eval()
            x = torch.zeros(1, config.in_channels, config.input_size, config.input_size)
            hidden: list[torch.Tensor] = []
            activations = _leaf_outputs(net, lambda: hidden.extend(net(x)))
            activations += _leaf_outputs(layer_net, lambda: layer_net(hidden))
    except (TypeError, ValueError, RuntimeError, AttributeError, IndexError, AssertionError) as error:
        what = f"timm model {config.model!r}" if config.name == "timm" else f"backbone {config.name!r}"
        raise refuse("backbone", config.model_kwargs or config.widths, f"{what} cannot be built: {error}") from error
    dims = tuple(int(d) for d in net.layer_dims)
    activations += len(dims) ** 2 * head.d_star + x.numel()
    params = sum(p.numel() for p in net.parameters()) + sum(p.numel() for p in layer_net.parameters())
    return Budget(params, activations, dims)


def check_budget(backbone: BackboneConfig, head: HeadConfig, num_classes: int) -> Budget:
    """:func:`estimate`, refusing models over :func:`limits` before any memory is allocated.

    Raises:
        CheckpointError: over the parameter or activation limit (names both numbers and the variable).
    """
    max_params, max_activations = limits()
    budget = estimate(backbone, head, num_classes)
    if budget.params > max_params:
        raise refuse(
            "backbone/head size",
            f"{budget.params:,} parameters",
            f"over the limit of {max_params:,} (LAYA_MAX_PARAMS)",
        )
    if budget.activations > max_activations:
        raise refuse(
            "backbone.input_size/widths",
            f"{budget.activations:,} activations per input",
            f"over the limit of {max_activations:,} (LAYA_MAX_ACTIVATIONS)",
        )
    return budget


__all__ = ["DEFAULT_MAX_ACTIVATIONS", "DEFAULT_MAX_PARAMS", "Budget", "check_budget", "estimate", "limits"]
