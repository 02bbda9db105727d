"""``wrapped``: any ``nn.Module`` from Python, its named submodules read through forward hooks.

``laya.wrap(model, layers=["layer1", "layer2"], input_size=32)`` gives a backbone whose
``h_i`` is the pooled output of submodule ``layers[i]`` (:func:`~laya.model.backbones.base.pool_hidden`;
a tuple output gives its first tensor). The module's weights go into the checkpoint; the module's
*code* cannot. A checkpoint records ``layers`` and, if known, an import path ``"package.module:callable"``
in ``model`` (with JSON ``model_kwargs`` for the call). Loading rebuilds the module only from Python:
``load_checkpoint(path, module=my_module)``, or ``allow_import=True`` to import and call that path —
an explicit opt-in of the user in their own process, never honoured for uploads. With ``pre_logits`` the
input of the module's final linear classifier is the last layer (:mod:`~laya.model.backbones.pre_logits`).
What the hooks see lives in the forward's own :class:`~laya.model.backbones.calls.Call`, never on the module.
"""

from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from laya.model.backbones.base import Backbone, BackboneConfig, Pool, check_layers, pool_hidden
from laya.model.backbones.calls import current_call, forward_call
from laya.model.backbones.pre_logits import PRE_LOGITS, PreLogits, check_logits, classifier_linears
from laya.model.backbones.registry import register_backbone
from laya.model.hooks import forward_hook
from laya.model.validation import Rule, check_value, refuse

IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
SCALAR = Rule(-1e12, 1e12, max_chars=200, max_items=64)


class NeedsModule(ValueError):
    """A wrapped checkpoint loaded without the module it wraps (the message says how to give it)."""


class _Stop(Exception):
    """Raised by a hook to end the forward pass once the wanted layer has run (early exit)."""


def import_callable(path: str) -> Any:
    """``"package.module:attr.attr"`` -> the object (only called on an explicit ``allow_import``)."""
    if not IMPORT_PATH.fullmatch(path):
        raise ValueError(f"{path!r} is not an import path of the form 'package.module:callable'")
    module_name, _, attrs = path.partition(":")
    target: Any = importlib.import_module(module_name)
    for attr in attrs.split("."):
        target = getattr(target, attr)
    return target


def first_tensor(out: Any) -> Tensor:
    """A hook's output as a tensor (the first tensor of a tuple/list, e.g. a transformer layer's)."""
    if isinstance(out, Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for item in out:
            if isinstance(item, Tensor):
                return item
    raise TypeError(f"a wrapped layer returned {type(out).__name__}, not a tensor")


@register_backbone("wrapped")
class WrappedBackbone(Backbone):
    """Forward hooks on ``config.layers`` of a user's module; one forward pass gives every layer."""

    from_config = False  # the JSON alone cannot rebuild it: the module comes from the user's Python

    @classmethod
    def check_config(cls, data: dict[str, Any]) -> None:
        """``layers`` named; ``model`` null or an import path; ``model_kwargs`` JSON scalars."""
        check_layers(data, needed=True)
        path = data.get("model")
        check_value("backbone.model", path, str | None, Rule(max_chars=200))
        if path is not None and not IMPORT_PATH.fullmatch(path):
            raise refuse("backbone.model", path, "must be an import path 'package.module:callable' or null")
        kwargs = data.get("model_kwargs", {})
        check_value("backbone.model_kwargs", kwargs, dict[str, int | float | str | bool | None])
        for key, value in kwargs.items():
            check_value(f"backbone.model_kwargs.{key}", value, int | float | str | bool | None, SCALAR)

    def __init__(
        self,
        config: BackboneConfig,
        base_dir: Path | None = None,
        module: nn.Module | None = None,
        allow_import: bool = False,
    ) -> None:
        super().__init__(config)
        if module is None:
            if not (allow_import and config.model):
                where = (
                    f" or allow_import=True to import and call {config.model!r} (runs that code)"
                    if config.model
                    else ""
                )
                raise NeedsModule(
                    f"this checkpoint wraps a Python module (layers {list(config.layers or [])[:4]}...): load it from "
                    f"Python with load_checkpoint(path, module=<the nn.Module>){where}"
                )
            module = import_callable(config.model)(**config.model_kwargs)
        if not isinstance(module, nn.Module):
            raise TypeError(f"wrap() needs an nn.Module, got {type(module).__name__}")
        names = dict(module.named_modules())
        missing = [n for n in config.layers or [] if n not in names]
        if not config.layers or missing:
            raise ValueError(f"module has no submodule(s) {missing[:5]}; some it has: {list(names)[1:8]}")
        self.model = module
        self.layers = list(config.layers)
        for name in self.layers:
            forward_hook(names[name], functools.partial(self._record, name))  # for the module's life, every thread
        self.pre_logits = PreLogits(module, classifier_linears(module), self) if config.pre_logits else None
        self.pool = "avg" if config.pool == "auto" else config.pool
        with torch.no_grad():
            was_training = self.model.training
            self.model.eval()
            param = next(self.model.parameters(), None)
            device = param.device if param is not None else None
            probe, output = self._forward(torch.zeros(1, config.in_channels, config.input_size, config.input_size,
                                                      device=device))  # fmt: skip
            if self.pre_logits is not None:  # its output is its classifier's logits (a dict's "logits" entry)
                linear, what = self.final_layer()
                check_logits(linear, probe[-1], output, f"wrapped {type(module).__name__} ({what})")
            self.model.train(was_training)
        self.layer_dims = tuple(h.shape[1] for h in probe)
        self._finish(self.layers + [PRE_LOGITS] * config.pre_logits)

    def _record(self, name: str, module: nn.Module, inputs: Any, output: Any) -> None:
        """Layer ``name``'s output into the running forward's call (none outside one: a bare run of the module)."""
        call = current_call(self)
        if call is None:
            return
        call.outputs[name] = first_tensor(output)
        if name == call.stop_after:
            raise _Stop

    def forward(self, x: Tensor) -> list[Tensor]:
        return self._forward(x)[0]

    def _forward(self, x: Tensor) -> tuple[list[Tensor], Any]:
        """The hidden states and what the module returned."""
        with forward_call(self) as call:
            output = self.model(x)
            absent = [n for n in self.layers if n not in call.outputs]
            if absent:
                raise RuntimeError(f"layer(s) {absent} did not run in the module's forward pass")
            layers = [call.outputs[n] for n in self.layers]
            hidden = [pool_hidden(out, self.pool) for out in layers]
            if self.pre_logits is not None:
                hidden.append(self.pre_logits.read(call))
            call.layers = layers
        return hidden, output

    def final_layer(self) -> tuple[Any, str]:
        """The module's classifier as one linear layer, named by its layers' names in the module alone."""
        if self.pre_logits is None:
            raise self._no_classifier()
        return self.pre_logits.linear(), " + ".join(self.pre_logits.names)

    def forward_to(self, x: Tensor, layer: int) -> Tensor:
        """Stops the module's forward pass once ``layers[layer]`` has run."""
        self._check_layer(layer)
        if self.pre_logits is not None and layer == len(self.layers):
            return self(x)[-1]
        name = self.layers[layer]
        with forward_call(self, stop_after=name) as call:
            try:
                self.model(x)
            except _Stop:
                pass
        return pool_hidden(call.outputs[name], self.pool)


def wrap(
    module: nn.Module,
    layers: list[str],
    input_size: int,
    in_channels: int = 3,
    pool: Pool = "avg",
    freeze: bool = True,
    import_path: str | None = None,
    layer_names: list[str] | None = None,
    pre_logits: bool = False,
    **kwargs: Any,
) -> WrappedBackbone:
    """A LAYA backbone reading the named submodules of ``module`` (see the module docstring).

    ``import_path`` (``"package.module:callable"``, called with ``kwargs``) is recorded so the
    checkpoint can be rebuilt with ``load_checkpoint(..., allow_import=True)``. ``pre_logits``: the input of
    the module's final linear classifier is an extra last layer (and :meth:`WrappedBackbone.classifier`).
    """
    config = BackboneConfig(
        name="wrapped", in_channels=in_channels, input_size=input_size, model=import_path,
        model_kwargs=dict(kwargs), pool=pool, freeze=freeze, layers=list(layers), layer_names=layer_names,
        pre_logits=pre_logits,
    )  # fmt: skip
    BackboneConfig.from_dict(config.to_dict())  # the same checks a checkpoint of it will pass
    return WrappedBackbone(config, module=module)


__all__ = ["NeedsModule", "WrappedBackbone", "import_callable", "wrap"]
