"""A network's own classifier and the features it reads (its pre-logits), for any ``nn.Module``.

A classification network ends in a linear layer, ``logits = W f + b`` with ``f: (B, D)`` its pre-logits
features. :func:`final_linear` finds that layer (the last ``nn.Linear`` registered, auxiliary classifiers
aside: torchvision ``fc`` / ``classifier.6`` / ``heads.head``, transformers ``classifier``), and
:class:`PreLogits` records its input with a forward pre-hook during the network's own forward pass, so
``f`` is exactly what the network's classifier reads (into that pass's own
:class:`~laya.model.backbones.calls.Call`: never on the module, which sessions share). timm models say the same with
``forward_head(pre_logits=True)`` and ``get_classifier()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any

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


def check_classifier(linear: Any, width: int, what: str) -> nn.Linear:
    """``linear`` if it is an ``nn.Linear`` reading ``width`` features, else a ValueError naming ``what``."""
    if not isinstance(linear, nn.Linear) or linear.in_features != width:
        width = f" on {linear.in_features} features" if isinstance(linear, nn.Linear) else ""
        got = f"{type(linear).__name__}{width}"
        raise ValueError(f"{what}: expected an nn.Linear on the {width} pre-logits features, got {got}")
    return linear


class PreLogits:
    """The input of ``module.<name>`` in each forward pass of ``owner`` (a backbone), kept in that pass's
    :class:`~laya.model.backbones.calls.Call` (``features``); :meth:`read` it before the pass's call ends."""

    def __init__(self, module: nn.Module, name: str, owner: object) -> None:
        self.name = name
        self.owner = owner
        forward_pre_hook(module.get_submodule(name), self._hook)  # for the module's life, in every thread

    def _hook(self, classifier: nn.Module, inputs: tuple[Any, ...]) -> None:
        call = current_call(self.owner)
        if call is not None:  # outside a forward of the backbone (the bare network run): nothing to keep
            call.features = inputs[0]

    def read(self, call: Call) -> Tensor:
        """The features ``call`` recorded, flattened to ``(B, D)``."""
        if call.features is None:
            raise RuntimeError(f"the classifier {self.name!r} did not run in the network's forward pass")
        return call.features.flatten(1)


__all__ = ["PRE_LOGITS", "PreLogits", "check_classifier", "final_linear"]
