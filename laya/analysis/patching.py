"""Activation patching across inputs (TransformerLens-style, for image classifiers' layers).

A *target* input is run with layer i's activation taken from a *source* input:

* **at the head** (direct effect): the hidden state ``h_i`` handed to the head is the source's; the
  backbone is not rerun, and every layer set of a sweep is one row of ONE batched head call
  (``B x M`` rows, float64).
* **in the backbone** (total effect): the output of layer i's module is replaced by the source's
  inside the network (a forward hook), and every deeper layer is recomputed: one pass for the
  source and the unpatched target together, plus one per patched layer (``L + 1`` passes a sweep).

Effects per patch ``m`` (:class:`PatchEffects`): change in the probability of the target's predicted
class, in the logit difference ``logit_a - logit_b`` of two chosen classes, and in ``alpha``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from laya.analysis.head.ablation import float64_head
from laya.analysis.overflow import check_output
from laya.analysis.statistics import bootstrap_ci
from laya.codec import Encoded, stored
from laya.data.images import load_image_tensor
from laya.model.backbones import (
    Backbone,
    CNNBackbone,
    MLPBackbone,
    TimmBackbone,
    TorchvisionBackbone,
    TransformersBackbone,
    WrappedBackbone,
)
from laya.model.checkpoint import Checkpoint
from laya.model.classifier import LayerwiseClassifier
from laya.model.heads import LayerHead
from laya.model.hooks import Hooks, layer_tensor, probe_input, replacing_output, with_layer_tensor

WHERE = {"head": "at the head (direct effect)", "backbone": "in the backbone (total effect)"}


@dataclass
class PatchEffects(Encoded):
    """``base_logits``: ``(B, C)`` target unpatched; ``logits``: ``(B, M, C)`` after patch ``m``;
    ``base_alpha`` ``(B, L)`` / ``alpha`` ``(B, M, L)``: layer scores, or None (Concat, LastLayer);
    ``masks``: ``(M, L)`` True = layer taken from the source; ``source_logits`` ``(B, C)``: the source
    unpatched, where known."""

    base_logits: Tensor
    logits: Tensor
    base_alpha: Tensor | None
    alpha: Tensor | None
    masks: Tensor = field(metadata=stored(dtype=(torch.uint8, torch.bool)))
    source_logits: Tensor | None = None

    @property
    def prediction(self) -> Tensor:
        """``(B,)`` the target's own predicted class."""
        return self.base_logits.argmax(-1)

    def prob_change(self, classes: Tensor | None = None) -> Tensor:
        """``(B, M)`` ``p_c(patched) - p_c(target)``, ``c`` = ``classes (B,)`` or the target's prediction."""
        c = self.prediction if classes is None else torch.as_tensor(classes, device=self.logits.device)
        base = torch.softmax(self.base_logits, -1).gather(1, c.view(-1, 1))
        return torch.softmax(self.logits, -1).gather(2, c.view(-1, 1, 1).expand(-1, self.logits.shape[1], 1))[
            ..., 0
        ] - base

    def logit_diff_change(self, a: int | Tensor, b: int | Tensor) -> Tensor:
        """``(B, M)`` change of ``logit_a - logit_b`` (``a``, ``b``: class ints or ``(B,)``)."""
        B, device = self.logits.shape[0], self.logits.device
        a, b = (torch.as_tensor(v, device=device).expand(B).view(-1, 1) for v in (a, b))
        base = self.base_logits.gather(1, a) - self.base_logits.gather(1, b)  # (B, 1)
        M = self.logits.shape[1]
        diff = self.logits.gather(2, a.view(-1, 1, 1).expand(-1, M, 1)) - self.logits.gather(
            2, b.view(-1, 1, 1).expand(-1, M, 1)
        )
        return diff[..., 0] - base

    def alpha_change(self) -> Tensor | None:
        """``(B, M, L)`` change of each layer's weight, or None for heads without layer scores."""
        return None if self.alpha is None else self.alpha - self.base_alpha.unsqueeze(1)


def single_layer_masks(num_layers: int, device: torch.device | None = None) -> Tensor:
    """``(L, L)`` one mask per layer (patch layer i alone)."""
    return torch.eye(num_layers, dtype=torch.bool, device=device)


def _check_pair(target: Sequence[Tensor], source: Sequence[Tensor]) -> None:
    if len(target) != len(source) or any(t.shape != s.shape for t, s in zip(target, source)):
        raise ValueError(
            f"target and source hidden states differ in shape: {[tuple(t.shape) for t in target]} vs "
            f"{[tuple(s.shape) for s in source]}"
        )


@torch.inference_mode()
def patch_head(
    head: LayerHead, target: Sequence[Tensor], source: Sequence[Tensor], masks: Tensor | None = None
) -> PatchEffects:
    """Direct effects: the head on ``target`` hidden states with the layers of each mask taken from
    ``source`` (both L tensors ``(B, d_i)``, paired by row). ``masks``: ``(M, L)`` bool, default one per
    layer. One batched head call of ``B x (M + 1)`` rows, float64."""
    head._check_hidden(target)
    _check_pair(target, source)
    L, B = head.num_layers, target[0].shape[0]
    masks = single_layer_masks(L, target[0].device) if masks is None else torch.as_tensor(masks).bool()
    if masks.ndim != 2 or masks.shape[1] != L:
        raise ValueError(f"masks must be (M, L) with L={L}, got {tuple(masks.shape)}")
    masks = masks.to(target[0].device)
    rows = torch.cat([masks.new_zeros(1, L), masks])  # row 0: the unpatched target
    M1 = rows.shape[0]
    patched = [
        torch.where(rows[:, i].view(1, M1, 1), s.double().unsqueeze(1), t.double().unsqueeze(1)).reshape(B * M1, -1)
        for i, (t, s) in enumerate(zip(target, source))
    ]
    out = float64_head(head)(patched)
    logits = out.logits.reshape(B, M1, -1)
    alpha = None if out.layer_scores is None else out.layer_scores.reshape(B, M1, L)
    return PatchEffects(
        logits[:, 0], logits[:, 1:], None if alpha is None else alpha[:, 0], None if alpha is None else alpha[:, 1:],
        masks,
    )  # fmt: skip


class NoLayerModules(ValueError):
    """A backbone whose layers have no modules to hook (patch at the head instead)."""


@dataclass(frozen=True)
class Block:
    """Layer i's block as forward hooks see it: ``module``'s output is the layer's pre-pool activation; the block's
    input is ``module``'s own first input when ``entry is module``, the output of ``entry`` (a torchvision
    :class:`~laya.model.backbones.torchvision.Tap`) otherwise, and unknown when ``entry`` is None."""

    module: nn.Module
    entry: nn.Module | None


def _located(model: nn.Module, run: Callable[[], Sequence[Tensor]], what: str) -> list[nn.Module]:
    """The module of ``model`` that returns each tensor ``run()`` returns (one probe pass): the first to return it,
    or the outermost of those that enclose it; never a later module handing it on unchanged (an ``nn.Identity``)."""
    calls = itertools.count()
    starts: dict[int, list[int]] = {}
    outputs: dict[int, tuple[nn.Module, Tensor, int]] = {}  # tensors kept alive: ids stay unique

    def begin(module: nn.Module, args) -> None:
        starts.setdefault(id(module), []).append(next(calls))

    def seen(module: nn.Module, args, out) -> None:  # hooks fire inner first
        start = starts[id(module)].pop()
        if (tensor := layer_tensor(out)) is not None:
            known = outputs.get(id(tensor))
            if known is None or start < known[2]:  # started before the one that returned it: encloses it
                outputs[id(tensor)] = (module, tensor, start)

    inner = [m for m in model.modules() if m is not model]
    with Hooks() as hooks:
        for m in inner:
            hooks.before(m, begin)
        for m in inner:
            hooks.after(m, seen)
        with torch.no_grad():
            modules = [outputs.get(id(t), (None,))[0] for t in run()]
    if any(m is None for m in modules):
        raise NoLayerModules(f"could not locate the modules of the layers of {what}; patch at the head instead")
    return modules


def layer_blocks(backbone: Backbone) -> list[Block | None]:
    """Each layer's :class:`Block` (hook targets); None for a pre-logits layer (computed from the final features by
    the network's own head: no module).

    MLP / CNN: ``blocks[i]``; a wrapped module: its named submodules; timm token models: ``blocks[k]``
    (``forward_intermediates`` indexes them); timm CNNs and transformers: the modules whose outputs are the tensors
    ``forward_intermediates`` / ``hidden_states`` return, found by identity (one probe pass); torchvision: the taps
    in its traced graph. Raises :class:`NoLayerModules` where none can be found.
    """
    pre_logits = [None] * backbone.config.pre_logits
    if isinstance(backbone, TorchvisionBackbone):
        return [Block(out, entry) for out, entry in backbone.taps] + pre_logits
    if isinstance(backbone, (MLPBackbone, CNNBackbone)):
        modules = list(backbone.blocks)
    elif isinstance(backbone, WrappedBackbone):
        modules = [backbone.model.get_submodule(name) for name in backbone.layers]
    elif isinstance(backbone, TransformersBackbone):
        def states() -> list[Tensor]:
            out = backbone._states(probe_input(backbone))
            return [out[i] for i in backbone.indices]

        modules = _located(backbone.model, states, f"transformers {backbone.config.model!r}")
    elif isinstance(backbone, TimmBackbone):
        count = len(backbone.layer_dims) - backbone.config.pre_logits
        if backbone.tokens:
            modules = [backbone.model.blocks[k] for k in backbone.take]
        else:
            def run() -> list[Tensor]:
                return backbone._intermediates(probe_input(backbone), backbone.config.indices, intermediates_only=True)

            modules = _located(backbone.model, run, f"{backbone.config.model!r}")
        modules = modules[:count]
    else:
        raise NoLayerModules(f"backbone {type(backbone).__name__} cannot be patched inside (no layer modules to "
                             "hook); patch at the head instead")  # fmt: skip
    return [Block(m, m) for m in modules] + pre_logits


def layer_modules(backbone: Backbone) -> list[nn.Module | None]:
    """The module whose output is layer i's pre-pool activation, for every layer (:func:`layer_blocks`)."""
    return [None if block is None else block.module for block in layer_blocks(backbone)]


def on_input(hooks: Hooks, block: Block, call: Callable[[Tensor], Tensor | None]) -> None:
    """Into ``hooks``: ``call(input)`` with the block's input each time the block starts (``block.entry`` not None);
    where ``call`` returns a tensor, the block runs on that tensor instead. A block whose input is no tensor (a
    DenseNet layer's list of the features before it) is left alone: ``call`` is not called."""
    if block.entry is block.module:

        def pre(m: nn.Module, args: tuple, kwargs: dict) -> Any:
            key = None if args else next(iter(kwargs), None)
            value = layer_tensor(args) if args else layer_tensor(kwargs[key]) if key is not None else None
            new = call(value) if isinstance(value, Tensor) else None
            if not isinstance(new, Tensor):
                return None
            if key is None:
                return (with_layer_tensor(args[0], new), *args[1:]), kwargs
            return args, {**kwargs, key: with_layer_tensor(kwargs[key], new)}

        hooks.before(block.module, pre, with_kwargs=True, prepend=True)
    else:

        def post(m: nn.Module, a: Any, out: Any) -> Any:
            value = layer_tensor(out)
            new = call(value) if isinstance(value, Tensor) else None
            return with_layer_tensor(out, new) if isinstance(new, Tensor) else None

        hooks.after(block.entry, post, prepend=True)


@torch.inference_mode()
def patch_backbone(
    model: LayerwiseClassifier, target: Tensor, source: Tensor, layers: Sequence[int] | None = None
) -> PatchEffects:
    """Total effects: for each layer in ``layers`` (default all with a module), the target ``(B, C, H, W)``
    run with that layer's activation replaced by the source's (``(B, C, H, W)``, paired by row) inside
    the backbone, every deeper layer recomputed. Heads in float64; ``masks`` one row per patched layer."""
    if target.shape != source.shape:
        raise ValueError(f"target and source inputs differ in shape: {tuple(target.shape)} vs {tuple(source.shape)}")
    modules = layer_modules(model.backbone)
    L, B = len(modules), target.shape[0]
    layers = [i for i, m in enumerate(modules) if m is not None] if layers is None else list(layers)
    if not layers:
        raise ValueError("no layer to patch")
    for i in layers:
        if not 0 <= i < L or modules[i] is None:
            raise ValueError(f"layer {i} cannot be patched inside the backbone (layers with a module: "
                             f"{[j for j, m in enumerate(modules) if m is not None]})")  # fmt: skip
    head = float64_head(model.head)
    acts: list[Tensor] = []
    with Hooks() as hooks:  # source and target in one pass
        for i in layers:
            hooks.after(modules[i], lambda mod, a, out: acts.append(layer_tensor(out)))
        hidden = model.backbone(torch.cat([source, target]))
    base = head([h[B:].double() for h in hidden])
    source_logits = head([h[:B].double() for h in hidden]).logits
    logits, alpha = [], []
    for i, act in zip(layers, acts):
        with replacing_output(modules[i], act[:B]):
            out = head([h.double() for h in model.backbone(target)])
        logits.append(out.logits)
        alpha.append(out.layer_scores)
    masks = torch.zeros(len(layers), L, dtype=torch.bool, device=target.device)
    masks[torch.arange(len(layers)), torch.tensor(layers, dtype=torch.long)] = True
    scores = None if base.layer_scores is None else torch.stack(alpha, 1)
    return PatchEffects(base.logits, torch.stack(logits, 1), base.layer_scores, scores, masks, source_logits)


@torch.inference_mode()
def patch_images(checkpoint: Checkpoint, target: Tensor, source: Tensor, where: str = "head") -> PatchEffects:
    """The "patch every layer" sweep of one pair of images (``uint8 (C, S, S)`` each, the checkpoint's input):
    ``where="head"``: one backbone pass on both, then one batched head call (each layer alone, then every
    layer at once: that last row is the source's own logits); ``"backbone"``: ``L + 1`` passes
    (:func:`patch_backbone`, layers with a module). ``source_logits`` filled either way."""
    if where not in WHERE:
        raise ValueError(f"where must be one of {sorted(WHERE)}, got {where!r}")
    device = next(checkpoint.model.parameters()).device
    x = checkpoint.preprocess(torch.stack([target, source]).to(device))
    model = checkpoint.model
    if where == "backbone":
        effects = patch_backbone(model, x[:1], x[1:])
    else:
        hidden = model.backbone(x)
        L = len(hidden)
        masks = torch.cat([single_layer_masks(L, device), torch.ones(1, L, dtype=torch.bool, device=device)])
        effects = patch_head(model.head, [h[:1] for h in hidden], [h[1:] for h in hidden], masks)
        effects.source_logits = float64_head(model.head)([h[1:].double() for h in hidden]).logits
    check_output(model, effects.base_logits, effects.source_logits)  # either image's logits not finite: OutputOverflow
    return effects


def patch_bytes(checkpoint: Checkpoint, target: bytes, source: bytes, where: str = "head") -> PatchEffects:
    """Decode two uploaded files (see :mod:`laya.data.images`) and :func:`patch_images` them."""
    spec = checkpoint.meta.input
    images = [load_image_tensor(data, spec.channels, spec.source_size) for data in (target, source)]
    return patch_images(checkpoint, *images, where=where)


def pair_table(effects: PatchEffects, layer_names: Sequence[str], classes: Sequence[str], a: int, b: int) -> pd.DataFrame:
    """One pair's sweep (row 0 of ``effects``), one row per layer (and ``"all layers"`` where patched together):
    ``layer``, ``patched`` (False: the layer has no module to patch in the backbone), ``prob_change`` (the
    target's predicted class), ``logit_diff_change`` (``logit_a - logit_b``), ``alpha_change`` (the patched
    layer's own weight; NaN without layer scores), ``prediction`` after the patch and its ``probability``."""
    if not (0 <= a < len(classes) and 0 <= b < len(classes)):
        raise ValueError(f"classes {a}, {b} out of range for {len(classes)} classes")
    prob, diff, alpha = effects.prob_change()[0], effects.logit_diff_change(a, b)[0], effects.alpha_change()
    after = torch.softmax(effects.logits[0], -1)
    nan = float("nan")
    rows = []
    wanted = [[i] for i in range(len(layer_names))] + [list(range(len(layer_names)))]
    masks = [[i for i, on in enumerate(m) if on] for m in effects.masks.tolist()]
    for layers in wanted:
        name = "all layers" if len(layers) > 1 else layer_names[layers[0]]
        if layers not in masks:
            if len(layers) == 1:
                rows.append({"layer": name, "patched": False, "prob_change": nan, "logit_diff_change": nan,
                             "alpha_change": nan, "prediction": "", "probability": nan})  # fmt: skip
            continue
        m = masks.index(layers)
        own = nan if alpha is None or len(layers) > 1 else float(alpha[0, m, layers[0]])
        c = int(after[m].argmax())
        rows.append({"layer": name, "patched": True, "prob_change": float(prob[m]),
                     "logit_diff_change": float(diff[m]), "alpha_change": own, "prediction": classes[c],
                     "probability": float(after[m, c])})  # fmt: skip
    return pd.DataFrame(rows)


def effect_table(
    effects: PatchEffects, layer_names: Sequence[str], a: int | Tensor, b: int | Tensor,
    resamples: int = 1000, seed: int = 0,
) -> pd.DataFrame:  # fmt: skip
    """Mean effect of each patch over the pairs, with 95 % bootstrap CIs over pairs: ``layer``,
    ``prob_change`` (target's predicted class), ``logit_diff_change`` (``logit_a - logit_b``),
    ``alpha_change`` (the patched layer's own weight; NaN for heads without layer scores), each with
    ``_low`` / ``_high``."""
    columns = {"prob_change": effects.prob_change(), "logit_diff_change": effects.logit_diff_change(a, b)}
    alpha = effects.alpha_change()
    rows = []
    for m, mask in enumerate(effects.masks.tolist()):
        patched = [i for i, on in enumerate(mask) if on]
        row: dict[str, object] = {"layer": " + ".join(layer_names[i] for i in patched), "n": len(effects.logits)}
        values = dict(columns)
        if alpha is not None and len(patched) == 1:
            values["alpha_change"] = alpha[:, :, patched[0]]
        for name in ("prob_change", "logit_diff_change", "alpha_change"):
            if name not in values:
                row |= {name: float("nan"), f"{name}_low": float("nan"), f"{name}_high": float("nan")}
                continue
            ci = bootstrap_ci(values[name][:, m].double().cpu(), resamples=resamples, seed=seed)
            row |= {name: ci.estimate, f"{name}_low": ci.low, f"{name}_high": ci.high}
        rows.append(row)
    return pd.DataFrame(rows)


__all__ = [
    "WHERE",
    "Block",
    "NoLayerModules",
    "PatchEffects",
    "effect_table",
    "layer_blocks",
    "layer_modules",
    "on_input",
    "pair_table",
    "patch_backbone",
    "patch_bytes",
    "patch_head",
    "patch_images",
    "single_layer_masks",
]
