"""A network's own classifier and the features it reads (its pre-logits), for any ``nn.Module``.

A classification network ends in a linear layer, ``logits = W f + b`` with ``f: (B, D)`` its pre-logits
features. :func:`final_linear` finds that layer (the last ``nn.Linear`` registered, auxiliary classifiers
aside: torchvision ``fc`` / ``classifier.6`` / ``heads.head``, transformers ``classifier``); a timm model names
its own with ``get_classifier()`` (:func:`classifier_linears`): one layer, or a distilled model's two heads whose
outputs it averages (DeiT reads its class and distillation tokens, LeViT one pooled vector through two
BatchNorm + linear heads). :class:`PreLogits` records each layer's input with a forward pre-hook during the
network's own forward pass (into that pass's own :class:`~laya.model.backbones.calls.Call`: never on the module,
which sessions share); :func:`join` concatenates them into ``f = [f_1; ...; f_k]``, and :func:`joined_linear` is the
one ``nn.Linear`` on ``f`` that gives the network's logits, ``W f + b = (1/k) sum_i (W_i f_i + b_i)``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain
from typing import Any

import torch
from torch import Tensor, nn

from laya.model.backbones.calls import Call, current_call
from laya.model.hooks import forward_pre_hook

PRE_LOGITS = "pre-logits"  # the display name of that layer


def final_linear(module: nn.Module) -> str:
    """The qualified name of ``module``'s final linear classifier (its last ``nn.Linear`` in module order; names
    with ``aux`` are auxiliary classifiers and skipped). Found from the end, so a network whose classifier is its
    last child is not walked whole (this runs on every lens and unit profile).

    Raises:
        ValueError: the module has no ``nn.Linear`` (a convolutional classifier such as SqueezeNet's).
    """
    walk = chain(_from_the_end(module), [("", module)])
    name = next((n for n, m in walk if isinstance(m, nn.Linear) and "aux" not in n.lower()), None)
    if name is None:
        raise ValueError(
            f"{type(module).__name__} has no nn.Linear classifier; its pre-logits features and own head need "
            "a network that ends in a linear layer"
        )
    return name


def _from_the_end(module: nn.Module, prefix: str = "") -> Iterator[tuple[str, nn.Module]]:
    """``module.named_modules()`` without the root, in reverse order: each child's subtree, last child first, a
    module after everything below it (a module registered twice comes at both places)."""
    for name, child in reversed(module._modules.items()):
        if child is not None:
            yield from _from_the_end(child, f"{prefix}{name}.")
            yield f"{prefix}{name}", child


def classifier_linears(network: nn.Module) -> tuple[str, ...]:
    """The qualified names of the ``nn.Linear`` layer(s) that make ``network``'s own classifier: those inside what
    a timm model's ``get_classifier()`` returns (its ``fc``; a distilled model's ``head`` and ``head_dist``; the
    ``linear`` of a BatchNorm + linear head), in module order, else :func:`final_linear`'s one.

    Raises:
        ValueError: no ``nn.Linear`` there (a convolutional classifier).
    """
    get = getattr(network, "get_classifier", None)
    if not callable(get):
        return (final_linear(network),)
    heads = get()
    heads = heads if isinstance(heads, tuple) else (heads,)
    found = {id(m) for head in heads if isinstance(head, nn.Module) for m in head.modules() if isinstance(m, nn.Linear)}
    names = tuple(name for name, module in network.named_modules() if id(module) in found)
    if not names:
        shown = ", ".join(type(h).__name__ for h in heads)
        raise ValueError(f"{type(network).__name__}'s classifier ({shown}) holds no nn.Linear; its pre-logits features "
                         "and own head need a network that ends in a linear layer")  # fmt: skip
    return names


def join(inputs: Sequence[Tensor]) -> Tensor:
    """The pre-logits features ``f: (B, D)`` from what each classifier layer read: one input flattened, several
    concatenated in order (a distilled model's two heads: twice the width, each head's block its own)."""
    flat = [tensor.flatten(1) for tensor in inputs]
    return flat[0] if len(flat) == 1 else torch.cat(flat, 1)


def joined_linear(linears: Sequence[nn.Linear]) -> nn.Linear:
    """One ``nn.Linear`` on the joined features (:func:`join`) equal to the average of ``linears``, each on its own
    block: ``W = [W_1, ..., W_k] / k``, ``b = (1/k) sum_i b_i``. One layer is itself (its exact weights).

    Raises:
        ValueError: layers of different output counts.
    """
    if len(linears) == 1:
        return linears[0]
    if len({linear.out_features for linear in linears}) != 1:
        raise ValueError(f"the classifier's {len(linears)} heads give different class counts "
                         f"({', '.join(str(m.out_features) for m in linears)})")  # fmt: skip
    first = linears[0].weight
    joined = nn.Linear(sum(m.in_features for m in linears), linears[0].out_features, device=first.device,
                       dtype=first.dtype)  # fmt: skip
    with torch.no_grad():
        joined.weight.copy_(torch.cat([m.weight for m in linears], 1) / len(linears))
        joined.bias.copy_(sum(m.bias if m.bias is not None else torch.zeros_like(joined.bias) for m in linears)
                          / len(linears))  # fmt: skip
    return joined


def logits_of(out: Any) -> Tensor:
    """The logits ``(B, K)`` of a network's output: a tensor, an output with ``.logits`` (transformers), a dict's
    ``"logits"`` entry (``{"logits": ..., "embedding": ...}``), or a tuple's first tensor.

    Raises:
        TypeError: none of those, naming what the network returned.
    """
    if isinstance(out, Tensor):
        return out
    found = out.get("logits") if isinstance(out, Mapping) else getattr(out, "logits", None)
    if isinstance(found, Tensor):
        return found
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], Tensor):
        return out[0]
    keys = f" with the keys {', '.join(map(repr, list(out)[:6]))}" if isinstance(out, Mapping) else ""
    raise TypeError(f"the network returned {type(out).__name__}{keys}, not its logits: a tensor (B, K), a dict with "
                    "a 'logits' entry or an output with .logits")  # fmt: skip


def check_logits(linear: nn.Linear, features: Tensor, output: Any, what: str) -> None:
    """The network's ``output`` (:func:`logits_of`) is ``linear(features)``, its classifier on its pre-logits, to
    float rounding (``1e-4`` of the largest logit), else a ValueError naming ``what`` and what to change. Nothing is
    compared on the ``meta`` device (shapes only)."""
    try:
        logits = logits_of(output)
    except TypeError as error:
        raise ValueError(f"{what}: {error}") from None
    got = linear(features)
    if got.is_meta:  # a shape-only build: no values to compare
        return
    gap = (got - logits).abs().max().item() if got.shape == logits.shape else float("inf")
    if gap > 1e-4 * logits.abs().max().item() + 1e-6:
        raise ValueError(
            f"{what}: the network's output is not what its classifier gives on the features it reads (largest "
            f"difference {gap:.2g}, logits up to {logits.abs().max().item():.2g}); attach explains a network whose "
            "output is its final linear layer's logits (or the average of a distilled model's two heads): return "
            "those, not probabilities or a transformed copy"
        )


def check_classifier(linear: Any, width: int, what: str) -> nn.Linear:
    """``linear`` if it is an ``nn.Linear`` reading ``width`` features, else a ValueError naming ``what``."""
    if not isinstance(linear, nn.Linear) or linear.in_features != width:
        width = f" on {linear.in_features} features" if isinstance(linear, nn.Linear) else ""
        got = f"{type(linear).__name__}{width}"
        raise ValueError(f"{what}: expected an nn.Linear on the {width} pre-logits features, got {got}")
    return linear


class PreLogits:
    """The input of each ``module.<name>`` (the classifier's layers, :func:`classifier_linears`) in each forward
    pass of ``owner`` (a backbone), kept in that pass's :class:`~laya.model.backbones.calls.Call`
    (``classifier_inputs``); :meth:`read` joins them before the pass's call ends."""

    def __init__(self, module: nn.Module, names: Sequence[str], owner: object) -> None:
        self.names = tuple(names)
        self.owner = owner
        self.linears = tuple(module.get_submodule(name) for name in self.names)
        for name, layer in zip(self.names, self.linears):  # for the module's life, in every thread
            forward_pre_hook(layer, functools.partial(self._hook, name))

    def _hook(self, name: str, layer: nn.Module, inputs: tuple[Any, ...]) -> None:
        call = current_call(self.owner)
        if call is not None:  # outside a forward of the backbone (the bare network run): nothing to keep
            call.classifier_inputs[name] = inputs[0]

    def read(self, call: Call) -> Tensor:
        """The features ``call`` recorded, joined (:func:`join`) to ``(B, D)``; kept as its ``features``."""
        absent = [name for name in self.names if name not in call.classifier_inputs]
        if absent:
            raise RuntimeError(f"the classifier {absent[0]!r} did not run in the network's forward pass")
        call.features = join([call.classifier_inputs[name] for name in self.names])
        return call.features

    def linear(self) -> nn.Linear:
        """The classifier as one ``nn.Linear`` on the joined features (:func:`joined_linear`)."""
        return joined_linear(self.linears)


__all__ = ["PRE_LOGITS", "PreLogits", "check_classifier", "classifier_linears", "final_linear", "check_logits", "join",
           "joined_linear", "logits_of"]
