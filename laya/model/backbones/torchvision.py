"""``torchvision``: a torchvision classification model, its layers read with ``feature_extraction``.

``model`` is a name from ``torchvision.models.list_models(module=torchvision.models)`` (the
classification builders; nothing else can be named), ``layers`` the graph nodes read
(``torchvision.models.feature_extraction.get_graph_node_names``; a module's name means its
output). By default the stages: the children of ``features`` where the model has it
(VGG, MobileNet, EfficientNet, ConvNeXt, DenseNet, Swin, ...), else the composite top-level
modules but the classifier, descending while there are at most two and one holds most of the weights (ResNet: ``layer1..4``; RegNet:
``stem`` + ``trunk_output.block1..4``; ViT: ``encoder.layers.encoder_layer_*``). The default layers are
shown by :func:`layer_label` (``features.7`` -> ``block 7``, ``encoder_layer_0`` -> ``block 1``); layers
the config names keep their names. Single-channel inputs are repeated to the 3 channels the models take.
With ``pre_logits`` (and ``model_kwargs`` ``num_classes``) the input of the model's final linear classifier
is the last layer (:mod:`~laya.model.backbones.pre_logits`), and :meth:`TorchvisionBackbone.classifier` is
that classifier.

The traced graph runs no stage as one module (``layer1`` is traced through), so hooks on its submodules do not see
a layer. :func:`add_taps` puts a :class:`Tap` (an ``nn.Identity``) after each layer's node, every later node reading
it, and one after the one node that feeds the layer's block where there is one: forward hooks on them see each
block's output and input (:func:`laya.analysis.patching.layer_blocks`); the same for each of the network's own
units inside the layers (:func:`~laya.model.backbones.units.unit_names`: ``units``, ``unit_taps``). Taps hold no
weights: the state dict stays.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import fx

import torch
from torch import Tensor, nn

from laya.model.backbones.base import Backbone, BackboneConfig, accepts, check_layers, pool_hidden
from laya.model.backbones.calls import forward_call
from laya.model.backbones.pre_logits import PRE_LOGITS, PreLogits, final_linear
from laya.model.backbones.registry import register_backbone
from laya.model.backbones.units import unit_names
from laya.model.validation import Rule, check_kwargs, check_value, refuse
from laya.model.weights import load_weights

HEADS = ("fc", "classifier", "head", "heads", "AuxLogits", "aux1", "aux2")  # classifiers, not stages
AUXILIARY = ("AuxLogits", "aux1", "aux2")  # GoogLeNet's and Inception v3's auxiliary classifiers (aux_logits=True)
CLASS_COUNT = (int, Rule(2, 100_000))  # num_classes: the classifier's outputs
PLAIN_RULES = {bool: Rule(), int: Rule(0, 100_000), float: Rule(0, 1000)}


def classification_models() -> list[str]:
    """The names a ``torchvision`` backbone may take."""
    import torchvision

    return torchvision.models.list_models(module=torchvision.models)


@functools.lru_cache(maxsize=None)
def model_kwargs(name: str) -> dict[str, tuple[Any, Rule]]:
    """The ``model_kwargs`` torchvision model ``name`` takes, read from its class (the builder's return annotation):
    each ``__init__`` argument with a default and a plain type (``bool``, ``int``, ``float``, or one of them or
    ``None``), ``num_classes`` always. GoogLeNet: ``aux_logits``, ``transform_input``, ``init_weights``, ``dropout``,
    ``dropout_aux``; ResNet: ``zero_init_residual``, ``groups``, ``width_per_group``. Layers, callables and lists
    are no arguments a config holds; an argument the builder sets itself is refused when the network is built."""
    import torchvision

    allowed: dict[str, tuple[Any, Rule]] = {"num_classes": CLASS_COUNT}
    cls = inspect.signature(torchvision.models.get_model_builder(name)).return_annotation
    if not isinstance(cls, type):
        return allowed
    hints = typing.get_type_hints(cls.__init__)
    for param in inspect.signature(cls.__init__).parameters.values():
        hint = hints.get(param.name)
        args = typing.get_args(hint)
        plain = next(t for t in args if t is not type(None)) if len(args) == 2 and type(None) in args else hint
        if param.default is not inspect.Parameter.empty and plain in PLAIN_RULES and param.name not in allowed:
            allowed[param.name] = (hint, PLAIN_RULES[plain])
    return allowed


def _params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _composite(module: nn.Module) -> bool:
    return sum(1 for child in module.children() if _params(child) > 0) >= 2


def default_layers(model: nn.Module, nodes: list[str]) -> list[str]:
    """The stages of a torchvision classifier (see the module docstring), restricted to graph ``nodes``."""
    features = getattr(model, "features", None)
    if isinstance(features, nn.Sequential):
        names = [f"features.{name}" for name, child in features.named_children() if _params(child)]
    else:
        names = [name for name, child in model.named_children() if _composite(child) and name not in HEADS]
        while 0 < len(names) <= 2:
            sizes = [_params(model.get_submodule(n)) for n in names]
            big = names[sizes.index(max(sizes))]
            inner = [f"{big}.{c}" for c, m in model.get_submodule(big).named_children() if _params(m)]
            if max(sizes) < 0.8 * sum(sizes) or len(inner) < 2:
                break
            i = names.index(big)
            names[i : i + 1] = inner
    reached = [n for n in names if any(node == n or node.startswith(n + ".") for node in nodes)]
    if not reached:
        raise ValueError("could not find the stages of this model; name its layers (backbone layers)")
    return reached


class Tap(nn.Identity):
    """A marker node in the traced graph: its forward hooks see a block's output, or the input that feeds it."""


def qualnames(model: nn.Module, training: bool) -> dict[str, str]:
    """Graph node name -> its qualified name (``layer1.0.add``) in ``model``'s trace in that mode, traced as
    ``create_feature_extractor`` traces it (the same tracer and arguments: the same node names)."""
    from torchvision.models.feature_extraction import NodePathTracer, _set_default_tracer_kwargs

    was = model.training
    tracer = NodePathTracer(**_set_default_tracer_kwargs(None))
    try:
        tracer.trace(model.train(training))
    finally:
        model.train(was)
    return {node.name: name for node, name in tracer.node_to_qualname.items()}


def _inside(name: str | None, layer: str) -> bool:
    return name is not None and (name == layer or name.startswith(layer + "."))


def _tap_graph(graph: fx.Graph, layers: list[str], names: dict[str, str], taps: list[tuple[str, str]]) -> list[bool]:
    """Insert the taps ``(exit, entry)`` of each layer into one graph (see :func:`add_taps`); which entries it has."""
    nodes = list(graph.nodes)
    returned = next(n for n in nodes if n.op == "output").args[0]  # {layer: node}
    feeds, exits = [], []
    for layer in layers:
        block = {n for n in nodes if _inside(names.get(n.name), layer)}
        inputs = {a for n in block for a in n.all_input_nodes if a not in block and a.op != "get_attr"}
        feeds.append(next(iter(inputs)) if len(inputs) == 1 else None)
        leaving = [n for n in nodes if n in block and any(user not in block for user in n.users)]
        if layer not in returned and len(leaving) != 1:
            raise ValueError(f"module {layer!r} has {len(leaving)} outputs in the traced graph, not one")
        exits.append(returned[layer] if layer in returned else leaving[0])
    moved: dict[fx.Node, fx.Node] = {}
    for node, (exit_name, _) in zip(exits, taps):
        with graph.inserting_after(node):
            tap = graph.call_module(exit_name, (node,))
        node.replace_all_uses_with(tap, delete_user_cb=lambda user, tap=tap: user is not tap)
        moved[node] = tap
    for feed, (_, entry_name) in zip(feeds, taps):
        while feed in moved:  # another layer's output: its tap, which the block now reads
            feed = moved[feed]
        if feed is not None:
            with graph.inserting_after(feed):
                graph.call_module(entry_name, (feed,))
    graph.lint()
    return [feed is not None for feed in feeds]


def add_taps(
    extractor: fx.GraphModule, layers: list[str], names: dict[bool, dict[str, str]], prefix: str = "laya"
) -> list[tuple[Tap, Tap | None]]:
    """Taps ``(exit, entry)`` per layer in both graphs of a ``create_feature_extractor`` module: ``exit`` after the
    layer's node (a layer not returned: the one node of ``layer.*`` read outside them), read by every node that read
    it; ``entry`` (None where the block's nodes read more than one node from outside it, or none) after the node that
    feeds the block of nodes named ``layer`` or ``layer.*``. ``names``: :func:`qualnames` of the model, by mode
    (``training``); ``prefix`` names the taps (``{prefix}_exit_{i}``), one per call."""
    taps = [(f"{prefix}_exit_{i}", f"{prefix}_entry_{i}") for i in range(len(layers))]
    for exit_name, entry_name in taps:
        extractor.add_submodule(exit_name, Tap())
        extractor.add_submodule(entry_name, Tap())
    graphs = {False: extractor.eval_graph, True: extractor.train_graph}
    for graph in graphs.values():
        graph.owning_module = extractor  # the inactive one still names the traced model
    found = [_tap_graph(graph, layers, names[training], taps) for training, graph in graphs.items()]
    extractor.recompile()
    return [
        (extractor.get_submodule(exit_name), extractor.get_submodule(entry_name) if has_entry else None)
        for (exit_name, entry_name), has_entry in zip(taps, found[0])  # the eval graph's: the analyses run in it
    ]


@contextlib.contextmanager
def _tensors_on_meta() -> Iterator[None]:
    """Every parameter and buffer a module registers in the block is moved to the ``meta`` device."""
    register_parameter, register_buffer = nn.Module.register_parameter, nn.Module.register_buffer

    def parameter(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        if param is not None:
            param = nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        register_parameter(module, name, param)

    def buffer(module: nn.Module, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        register_buffer(module, name, None if tensor is None else tensor.to("meta"), persistent)

    nn.Module.register_parameter, nn.Module.register_buffer = parameter, buffer
    try:
        yield
    finally:
        nn.Module.register_parameter, nn.Module.register_buffer = register_parameter, register_buffer


def build(builder: Any, **kwargs: Any) -> nn.Module:
    """``builder(weights=None, **kwargs)``. Under the ``meta`` device (the size budget's shape-only build), a builder
    that computes its architecture with tensors (RegNet's block widths, read with ``.tolist()``) runs on the CPU with
    every parameter and buffer registered on ``meta``: the same shapes, no memory."""
    if torch.empty(0).device.type != "meta":
        return builder(weights=None, **kwargs)
    with torch.device("cpu"), _tensors_on_meta():
        return builder(weights=None, **kwargs)


def network_kwargs(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments torchvision model ``name`` is built with: ``kwargs``, GoogLeNet's and Inception v3's auxiliary
    classifiers left out (``aux_logits=False``): they run in training only, never in the eval-mode forward read
    here, and a weights file's ``aux1`` / ``AuxLogits`` tensors are skipped (:data:`AUXILIARY`), so weights with and
    without them attach alike. Their truncated-normal initialisation (``init_weights``, scipy's, a minute and more
    on a CPU) is left out unless asked for: the weights read next replace it."""
    takes = model_kwargs(name)
    defaults = {"init_weights": False} if "init_weights" in takes else {}
    return {**defaults, **kwargs, "aux_logits": False} if "aux_logits" in takes else {**defaults, **kwargs}


def layer_label(node: str) -> str:
    """A default layer's display name: a block of ``features`` by its index (``features.7`` -> ``block 7``), a
    ViT encoder layer 1-based like timm's ViT blocks (``encoder.layers.encoder_layer_0`` -> ``block 1``),
    other children of ``features`` or RegNet's ``trunk_output`` by their own name (``features.denseblock1`` ->
    ``denseblock1``), anything else (``layer1``, ``stem``, ``encoder.ln``) as it is."""
    last = node.rsplit(".", 1)[-1]
    if last.isdigit():
        return f"block {last}"
    if found := re.fullmatch(r"encoder_layer_(\d+)", last):
        return f"block {int(found[1]) + 1}"
    return node.removeprefix("features.").removeprefix("trunk_output.")


@register_backbone("torchvision")
class TorchvisionBackbone(Backbone):
    """A torchvision classifier through ``create_feature_extractor``; each node's output is pooled
    (:func:`~laya.model.backbones.base.pool_hidden`: feature maps by average, ViT tokens by CLS)."""

    takes_weights = True  # a local file; torchvision's downloads are not offered

    @classmethod
    def check_config(cls, data: dict[str, Any]) -> None:
        """A classification model name, ``model_kwargs`` only its class's plain arguments (:func:`model_kwargs`),
        ``layers`` bounded, weights a file."""
        name = data.get("model")
        check_value("backbone.model", name, str, Rule(max_chars=100))
        if name not in classification_models():
            raise refuse(
                "backbone.model", name,
                f"not a torchvision classification model{cls.closest(name)} (torchvision.models.list_models())",
            )  # fmt: skip
        kwargs = data.get("model_kwargs", {})
        check_value("backbone.model_kwargs", kwargs, dict[str, Any])
        check_kwargs("backbone.model_kwargs", kwargs, model_kwargs(name))
        check_layers(data)

    @classmethod
    def model_names(cls) -> list[str]:
        return classification_models()

    def __init__(self, config: BackboneConfig, base_dir: Path | None = None) -> None:
        super().__init__(config)
        import torchvision
        from torchvision.models.feature_extraction import create_feature_extractor

        if config.model not in classification_models():
            raise ValueError(f"torchvision has no classification model {config.model!r}{self.closest(config.model)}")
        builder = torchvision.models.get_model_builder(config.model)
        kwargs = network_kwargs(config.model, config.model_kwargs)
        try:
            model = build(builder, **kwargs)
        except (TypeError, ValueError) as error:  # an argument the builder sets itself (DenseNet's growth_rate)
            if not config.model_kwargs:
                raise
            raise ValueError(f"torchvision {config.model!r} cannot be built with model_kwargs {config.model_kwargs}: "
                             f"{error}") from None  # fmt: skip
        if accepts(type(model), "image_size") and getattr(model, "image_size", None) != config.input_size:
            # ViT: position embeddings follow the size
            model = build(builder, image_size=config.input_size, **kwargs)
        if config.weights:
            loaded = load_weights(model, config.weights, base_dir, config.weights_by_order, AUXILIARY)
            self.weights_mapping, self.weights_note = loaded.pairs, loaded.note
        names = {training: qualnames(model, training) for training in (False, True)}
        nodes = list(names[False].values())  # the eval graph's, as get_graph_node_names gives them
        layers = list(config.layers or default_layers(model, nodes))
        unknown = [n for n in layers if not any(node == n or node.startswith(n + ".") for node in nodes)]
        if unknown:
            raise ValueError(f"torchvision model {config.model!r} has no layer(s) {unknown[:5]}; e.g. {nodes[1:6]}")
        self.layers = layers
        head = [final_linear(model)] if config.pre_logits else []
        read = layers + head  # the classifier runs: its input is recorded
        self.model = create_feature_extractor(model, return_nodes={n: n for n in read})
        self.__dict__["network"] = model  # its parameters are the graph's; not a submodule (no second state dict)
        self.taps = add_taps(self.model, layers, names)
        self.units = unit_names(model, layers)  # the traced graph runs none of them as a module: taps see them
        self.unit_taps = add_taps(self.model, [unit for _, unit in self.units], names, prefix="laya_unit")
        self.pre_logits = PreLogits(self.model, head, self) if config.pre_logits else None
        self.channels_last = isinstance(model, torchvision.models.SwinTransformer)  # (B, H, W, C) stage outputs
        self.pool = ("cls" if hasattr(model, "class_token") else "avg") if config.pool == "auto" else config.pool
        with torch.no_grad():
            was_training = self.model.training
            self.model.eval()
            probe = self(torch.zeros(1, config.in_channels, config.input_size, config.input_size).to(_device(self)))
            self.model.train(was_training)
        self.layer_dims = tuple(h.shape[1] for h in probe)
        labels = layers if config.layers else [layer_label(n) for n in layers]
        labels = labels if len(set(labels)) == len(labels) else layers
        self._finish(labels + [PRE_LOGITS] * config.pre_logits)

    def network_state(self) -> dict[str, Tensor]:
        """The built network's state dict, the keys its weights file has: the traced graph may hold a buffer as a
        constant under another name (MaxViT's relative position indices: ``_tensor_constant44``)."""
        return self.network.state_dict()

    def forward(self, x: Tensor) -> list[Tensor]:
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        with forward_call(self) as call:
            outputs = self.model(x)
            layers = [outputs[name] for name in self.layers]
            if self.channels_last:
                layers = [out.permute(0, 3, 1, 2) if out.ndim == 4 else out for out in layers]
            hidden = [pool_hidden(out, self.pool) for out in layers]
            if self.pre_logits is not None:
                hidden.append(self.pre_logits.read(call))
            call.layers = layers
        return hidden


def _device(module: nn.Module) -> torch.device:
    param = next(module.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


__all__ = [
    "Tap",
    "TorchvisionBackbone",
    "add_taps",
    "classification_models",
    "default_layers",
    "layer_label",
    "model_kwargs",
    "network_kwargs",
    "qualnames",
]
