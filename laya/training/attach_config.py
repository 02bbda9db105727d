"""What ``laya attach`` takes: :class:`AttachConfig`, the network's family and weights, the dataset and the recipe.

Kept apart from :mod:`laya.training.attach` (which runs it) so that :mod:`laya.training.preflight`, which checks it
before any long step, and ``attach`` both import it and neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from laya.analysis.depth.report import DepthOptions
from laya.analysis.evaluate import EvalOptions
from laya.analysis.network.budget import ATTACH
from laya.analysis.network.report import NetworkOptions
from laya.model.own_head import OWN

FAMILIES = ("timm", "torchvision", "transformers", "wrapped")
FITTED = ("laya", "scalarmix", "concat")


@dataclass
class AttachConfig:
    """What ``laya attach`` takes (defaults: the training recipe of :class:`~laya.training.train.TrainConfig`).

    ``family``/``model``: e.g. ``timm``/``resnet18``, ``torchvision``/``resnet18``, ``transformers``/``vit``
    (a ``model_type``, its config arguments in ``model_kwargs``), or ``wrapped`` (the module from Python,
    ``layers`` naming the submodules read). ``weights``: the user's ``.safetensors`` or ``.pth``/``.pt``/``.ckpt``
    state dict or training checkpoint (read with ``torch.load(weights_only=True)``; an entry named after ``#``:
    :func:`~laya.model.weights.split_entry`), fitted to the architecture exactly by name (a shared key prefix
    stripped where the rest then fits by name) unless ``weights_by_order``; for ``transformers`` also a Trainer's
    output folder (``config.json`` + ``model.safetensors``), which sets ``model`` and ``model_kwargs``.
    ``mean``/``std``: the normalisation the network was trained with (default: ImageNet's for 3 channels, 0.5
    otherwise).
    """

    family: str
    model: str | None
    weights: str | None
    dataset: str
    weights_by_order: bool = False  # match the file's tensors to the architecture's in order (never by default)
    out: str = "attached"
    setting: str | None = None  # default: "<dataset folder name>-<model>"
    overwrite: bool = False  # replace an existing setting folder (once the new one is whole)
    image_size: int | None = None  # side the network sees; default: the dataset's (ImageFolder: 32)
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    layers: list[str] | None = None  # torchvision / wrapped: modules read (default torchvision: the stages)
    import_path: str | None = None  # wrapped: "package.module:callable" that rebuilds the module (dashboard)
    heads: tuple[str, ...] = FITTED
    depth_heads: tuple[str, ...] = (OWN, "laya")  # heads whose depth analytics run
    lr: float = 3e-4
    patience: int = 5
    max_epochs: int = 50
    val_fraction: float = 0.1
    batch_size: int = 128
    seed: int = 0
    evaluation: EvalOptions = field(default_factory=EvalOptions)
    depth: DepthOptions = field(default_factory=DepthOptions)
    # None: no tuned lens, no network report; by default its samples sized to ``laya attach``'s budget
    network: NetworkOptions | None = field(default_factory=lambda: NetworkOptions(budget=ATTACH))
    command: str = ""  # the command line that ran this (stored with the tuned lens); default: named from Python

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}; got {self.family!r}")
        if self.family == "transformers" and self.weights and Path(self.weights).is_dir():
            self._read_trainer_folder()
        if self.family != "wrapped" and not (self.model and self.weights):
            raise ValueError(f"a {self.family} classifier needs its architecture name and weights file")
        unknown = [h for h in self.heads if h not in FITTED] + [h for h in self.depth_heads if h not in (OWN, *FITTED)]
        if unknown:
            raise ValueError(f"heads must be among {', '.join(FITTED)} (depth heads: also {OWN!r}); got {unknown}")

    def setting_path(self, module: Any = None) -> Path:
        """``out/<setting>``: the folder ``attach`` writes (default name ``<dataset folder>-<model>``, a wrapped
        module's class name for its model)."""
        name = self.setting or f"{Path(self.dataset).name}-{self.model or type(module).__name__}".lower()
        return Path(self.out) / name

    def _read_trainer_folder(self) -> None:
        """``weights`` a Hugging Face Trainer's output folder: its model_type, config arguments and input side
        (:func:`~laya.model.backbones.transformers.trainer_folder`) fill ``model``, ``model_kwargs`` and an unset
        ``image_size`` (its weights are read from the folder by the backbone). Arguments given that differ from the
        folder's are refused."""
        from laya.model.backbones.transformers import trainer_folder

        found = trainer_folder(Path(self.weights), self.model)  # type: ignore[arg-type]
        clash = {k: (v, found.kwargs[k]) for k, v in self.model_kwargs.items() if found.kwargs.get(k, v) != v}
        if clash:
            shown = ", ".join(f"{k}: given {a!r}, config.json {b!r}" for k, (a, b) in clash.items())
            raise ValueError(f"model_kwargs differ from the weights folder's config.json ({shown}); leave them out")
        self.model = found.model_type
        self.model_kwargs = {**found.kwargs, **self.model_kwargs}
        self.image_size = self.image_size or found.image_size


__all__ = ["FAMILIES", "FITTED", "AttachConfig"]
