"""``transformers``: a Hugging Face image model built from its config, read with ``output_hidden_states``.

``model`` is a ``model_type`` from :data:`MODEL_TYPES` (ViT, DeiT, BEiT, DINOv2, Swin, ConvNeXt,
ResNet, RegNet, MobileViT); ``model_kwargs`` are config arguments from :data:`CONFIG_KWARGS`; the image size
and channels come from the backbone config. The model is built with ``AutoModel.from_config`` —
random weights, or a local ``weights`` file: nothing is fetched from the hub and no remote code runs.
``hidden_states[0]`` (the embeddings) is skipped unless ``indices`` names it; token outputs are
pooled by the CLS token (ViT, DeiT, BEiT, DINOv2) or the mean of the tokens (Swin). A size the model
cannot take (Swin's windows at 64 px) is refused with the sizes that work, found by shape-only passes on
PyTorch's ``meta`` device, as timm's are. With ``pre_logits`` the model is
``AutoModelForImageClassification`` (``model_kwargs`` ``num_labels``: its classes), and the input of its
final linear classifier is the last layer (:mod:`~laya.model.backbones.pre_logits`).

A Hugging Face ``Trainer``'s output folder (``config.json`` + ``model.safetensors``) is ``weights`` itself:
:func:`trainer_folder` reads its ``model_type`` and the config arguments it sets (for ``model`` and
``model_kwargs``; a setting no ``model_kwargs`` can record is refused by name), and its weights are read by
transformers' own loading from safetensors (its checkpoint format's key conversions), fitted exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from laya.extras import require
from laya.model.backbones.base import (
    SIZE_ERRORS,
    Backbone,
    BackboneConfig,
    candidate_sides,
    pool_hidden,
    size_refusal,
)
from laya.model.backbones.calls import forward_call
from laya.model.backbones.pre_logits import PRE_LOGITS, PreLogits, final_linear
from laya.model.backbones.registry import register_backbone
from laya.model.validation import Rule, check_kwargs, check_value, refuse
from laya.model.weights import load_weights, weights_folder

# model_type -> whether its token outputs start with a CLS token
MODEL_TYPES: dict[str, bool] = {
    "vit": True,
    "deit": True,
    "beit": True,
    "dinov2": True,
    "swin": False,
    "convnext": False,
    "resnet": False,
    "regnet": False,
    "mobilevit": False,
}
# config.json entries a backbone needs not record: bookkeeping, labels (the dataset's), the input (the backbone's),
# and what an eval-mode forward of loaded weights never reads (dropout, initialisation)
UNRECORDED = ("architectures", "dtype", "torch_dtype", "transformers_version", "_name_or_path", "model_type",
              "id2label", "label2id", "num_labels", "problem_type", "image_size", "num_channels")  # fmt: skip
UNREAD = ("dropout", "drop_path", "initializer")
WEIGHTS_FILE = "model.safetensors"  # a Trainer's output folder's (beside config.json)
MAX_CONFIG_BYTES = 2**20
_INTS = Rule(1, 8192, max_items=16, min_items=1)
CONFIG_KWARGS: dict[str, tuple[Any, Rule]] = {
    "hidden_size": (int, Rule(1, 8192)),
    "num_hidden_layers": (int, Rule(1, 64)),
    "num_attention_heads": (int, Rule(1, 128)),
    "intermediate_size": (int, Rule(1, 32768)),
    "patch_size": (int, Rule(1, 64)),
    "embed_dim": (int, Rule(1, 8192)),
    "embedding_size": (int, Rule(1, 8192)),
    "depths": (list[int], Rule(1, 64, max_items=16, min_items=1)),
    "num_heads": (list[int], Rule(1, 128, max_items=16, min_items=1)),
    "hidden_sizes": (list[int], _INTS),
    "neck_hidden_sizes": (list[int], _INTS),  # MobileViT's convolutional widths
    "expand_ratio": (float, Rule(0.1, 16)),
    "window_size": (int, Rule(1, 64)),
    "mlp_ratio": (float, Rule(0.1, 16)),
    "layer_type": (str, Rule(choices=("basic", "bottleneck", "x", "y"))),
    "qkv_bias": (bool, Rule()),
    "use_mean_pooling": (bool, Rule()),
    "drop_path_rate": (float, Rule(0, 0.99)),
    "num_labels": (int, Rule(2, 100_000)),  # with pre_logits: the classifier's outputs
}


def _with_stages(model_type: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with ConvNeXt's and RegNet's ``num_stages`` following their ``depths``."""
    kwargs = dict(kwargs)
    if "depths" in kwargs and model_type in ("convnext", "regnet"):
        kwargs.setdefault("num_stages", len(kwargs["depths"]))
    return kwargs


@dataclass(frozen=True)
class TrainerFolder:
    """What a Hugging Face ``Trainer``'s output folder's ``config.json`` sets: ``model_type``, the config arguments
    (``kwargs``, within :data:`CONFIG_KWARGS`) and the input side it was configured for."""

    model_type: str
    kwargs: dict[str, Any]
    image_size: int | None


def trainer_folder(folder: Path, model: str | None = None) -> TrainerFolder:
    """Read ``folder/config.json`` (JSON only, at most 1 MiB; nothing is imported) beside its one
    ``model.safetensors``. ``model``: the ``model_type`` asked for, checked against the file's.

    Raises:
        FileNotFoundError: no ``config.json`` or no ``model.safetensors`` in the folder.
        ValueError: another or an unsupported ``model_type``, sharded weights, or a setting that ``model_kwargs``
            cannot record (the entries named, with their values and the defaults).
    """
    import json

    require("transformers", "a transformers Trainer folder")
    from transformers import AutoConfig

    path = folder / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"weights folder {folder.name!r} has no config.json (a Trainer's output folder has it)")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ValueError(f"{folder.name}/config.json is over {MAX_CONFIG_BYTES:,} bytes: not a model config")
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{folder.name}/config.json is not JSON ({error})") from None
    if not isinstance(found, dict):
        raise ValueError(f"{folder.name}/config.json holds {type(found).__name__}, not a config object")
    model_type = found.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ValueError(
            f"{folder.name}/config.json has model_type {model_type!r}; the transformers family takes "
            f"{', '.join(MODEL_TYPES)}"
        )
    if model and model != model_type:
        raise ValueError(f"--model {model!r} but {folder.name}/config.json is of model_type {model_type!r}")
    if not (folder / WEIGHTS_FILE).is_file():
        sharded = (folder / f"{WEIGHTS_FILE}.index.json").is_file()
        raise (ValueError if sharded else FileNotFoundError)(
            f"weights folder {folder.name!r} has "
            + ("sharded weights: save them as one file, model.save_pretrained(folder, max_shard_size='100GB')"
               if sharded else f"no {WEIGHTS_FILE} (a Trainer writes it with save_safetensors=True, the default)")
        )  # fmt: skip
    base = AutoConfig.for_model(model_type).to_dict()
    kwargs = {k: found[k] for k in CONFIG_KWARGS if k in found and k not in UNRECORDED and found[k] != base.get(k)}
    built = json.loads(json.dumps(AutoConfig.for_model(model_type, **_with_stages(model_type, kwargs)).to_dict()))
    unrecorded = {
        k: (v, built.get(k, "absent")) for k, v in found.items()
        if k not in UNRECORDED and not any(word in k for word in UNREAD) and built.get(k, "absent") != v
    }  # fmt: skip
    if unrecorded:
        shown = ", ".join(f"{k}={v!r} (default {d!r})" for k, (v, d) in list(unrecorded.items())[:6])
        raise ValueError(
            f"{folder.name}/config.json sets {shown}, which a transformers backbone cannot record (its "
            f"model_kwargs: {', '.join(CONFIG_KWARGS)}); attaching it would build another network"
        )
    side = found.get("image_size")
    return TrainerFolder(model_type, kwargs, side if isinstance(side, int) and side > 0 else None)


def _from_folder(model_class: Any, hf_config: Any, folder: Path) -> torch.nn.Module:
    """The model of ``hf_config`` with ``folder``'s ``model.safetensors`` (size-checked first), read by transformers'
    own loading, whose key conversions follow its checkpoint format; a key missing, unexpected or of another shape
    is refused as a file's would be (:class:`~laya.model.weights.WeightsMismatch`)."""
    from transformers.utils import logging

    from laya.model.weights import Fit, WeightsMismatch, check_safetensors_size

    check_safetensors_size(folder / WEIGHTS_FILE)
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()  # its load report: refused below instead, in our words
    logging.disable_progress_bar()
    try:
        model, info = model_class.from_pretrained(
            folder, config=hf_config, local_files_only=True, use_safetensors=True, output_loading_info=True,
            ignore_mismatched_sizes=True, dtype=torch.float32,
        )  # fmt: skip
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()
    fit = Fit(sorted(info["missing_keys"]), sorted(info["unexpected_keys"]),
              {k: (tuple(a), tuple(b)) for k, a, b in sorted(info["mismatched_keys"])})  # fmt: skip
    if not fit.exact:
        raise WeightsMismatch(f"the weights do not fit the architecture: {fit.describe()}", fit)
    return model


@register_backbone("transformers")
class TransformersBackbone(Backbone):
    """``AutoModel.from_config(AutoConfig.for_model(model_type, ...))``; ``h_i`` = pooled ``hidden_states[i]``."""

    takes_weights = True  # a local file

    @classmethod
    def check_config(cls, data: dict[str, Any]) -> None:
        name = data.get("model")
        if name not in MODEL_TYPES:
            raise refuse("backbone.model", name,
                         f"must be a transformers model_type among {', '.join(MODEL_TYPES)}{cls.closest(name)}")
        kwargs = data.get("model_kwargs", {})
        check_value("backbone.model_kwargs", kwargs, dict[str, Any])
        check_kwargs("backbone.model_kwargs", kwargs, CONFIG_KWARGS)

    @classmethod
    def model_names(cls) -> list[str]:
        return list(MODEL_TYPES)

    def __init__(self, config: BackboneConfig, base_dir: Path | None = None) -> None:
        super().__init__(config)
        transformers = require("transformers", "backbone 'transformers'")
        AutoModel, ForClassification = transformers.AutoModel, transformers.AutoModelForImageClassification  # noqa: N806

        if config.model not in MODEL_TYPES:
            raise ValueError(
                f"transformers model_type {config.model!r} is not supported; use one of {list(MODEL_TYPES)}"
            )
        kwargs = _with_stages(config.model, config.model_kwargs)
        model_class = ForClassification if config.pre_logits else AutoModel
        hf_config = self._hf_config(kwargs, config.input_size)
        folder = weights_folder(config.weights, base_dir) if config.weights else None
        if folder is not None:  # a Trainer's output folder
            self.model = _from_folder(model_class, hf_config, folder)
            self.weights_note = f"read the Trainer folder {folder.name}/ ({WEIGHTS_FILE} with config.json's settings)"
        else:
            self.model = model_class.from_config(hf_config)
        if config.weights and folder is None:
            loaded = load_weights(self.model, config.weights, base_dir, config.weights_by_order)
            self.weights_mapping, self.weights_note = loaded.pairs, loaded.note
        self.pre_logits = PreLogits(self.model, [final_linear(self.model)], self) if config.pre_logits else None
        has_cls = MODEL_TYPES[config.model]
        self.pool = ("cls" if has_cls else "avg") if config.pool == "auto" else config.pool
        if self.pool == "cls" and not has_cls:
            raise ValueError(f"pool='cls' needs a model with a CLS token; {config.model!r} has none (use 'avg')")
        with torch.no_grad():
            was_training = self.model.training
            self.model.eval()
            try:
                with forward_call(self) as call:  # the probe's pass, its features kept as a forward's
                    states = self._states(torch.zeros(1, config.in_channels, config.input_size, config.input_size))
            except SIZE_ERRORS as error:
                raise self._size_refusal(kwargs, error) from error
            self.model.train(was_training)
        self.indices = self._resolve(len(states))
        dims = [pool_hidden(states[i], self.pool).shape[1] for i in self.indices]
        if self.pre_logits is not None:
            dims.append(self.pre_logits.read(call).shape[1])
        self.layer_dims = tuple(dims)
        kind = "block" if has_cls else "stage"
        self._finish([f"{kind} {i}" for i in self.indices] + [PRE_LOGITS] * config.pre_logits)

    def _hf_config(self, kwargs: dict[str, Any], size: int) -> Any:
        """The transformers config of ``config.model`` with ``kwargs``, the channels and the input side ``size``."""
        from transformers import AutoConfig

        hf_config = AutoConfig.for_model(self.config.model, **kwargs)
        hf_config.num_channels = self.config.in_channels
        # a model_type with several classification classes (DeiT: plain and with-teacher) picks by `architectures`;
        # none recorded means its first, the plain classifier (a fresh config has None, which transformers cannot read)
        hf_config.architectures = hf_config.architectures or []
        if hasattr(hf_config, "image_size"):
            hf_config.image_size = size
        return hf_config

    def _size_refusal(self, kwargs: dict[str, Any], error: Exception) -> ValueError:
        """The error for an input side the model cannot take, with the sides at which it builds and runs
        (each tried on the ``meta`` device: shapes only, no memory, no weights)."""
        from transformers import AutoConfig, AutoModel

        c = self.config
        native = int(getattr(AutoConfig.for_model(c.model), "image_size", 224))
        works = []
        with torch.device("meta"), torch.no_grad():
            for side in candidate_sides(c.input_size, native):
                try:
                    model = AutoModel.from_config(self._hf_config(kwargs, side)).eval()
                    model(pixel_values=torch.zeros(1, c.in_channels, side, side), output_hidden_states=True)
                except SIZE_ERRORS:
                    continue
                works.append(side)
        return size_refusal(f"transformers model_type {c.model!r}", c.input_size, c.model_kwargs, error, works, native)

    def _resolve(self, count: int) -> list[int]:
        """``config.indices`` -> indices into ``hidden_states`` (default: all but the embeddings)."""
        indices = self.config.indices
        if indices is None:
            return list(range(1, count))
        chosen = list(range(count - indices, count)) if isinstance(indices, int) else [i % count for i in indices]
        if not all(0 <= i < count for i in chosen):
            raise ValueError(f"indices {indices} out of range for {count} hidden states")
        return chosen

    def _states(self, x: Tensor) -> tuple[Tensor, ...]:
        """``hidden_states`` of the model on ``x`` (outside a forward of the backbone: no features kept)."""
        return self.model(pixel_values=x, output_hidden_states=True, return_dict=True).hidden_states

    def forward(self, x: Tensor) -> list[Tensor]:
        with forward_call(self) as call:
            states = self._states(x)
            hidden = [pool_hidden(states[i], self.pool) for i in self.indices]
            if self.pre_logits is not None:
                hidden.append(self.pre_logits.read(call))
            call.layers = [None] * len(self.indices)  # token layers: no exact maps are read here
        return hidden


__all__ = ["CONFIG_KWARGS", "MODEL_TYPES", "WEIGHTS_FILE", "TrainerFolder", "TransformersBackbone", "trainer_folder"]
