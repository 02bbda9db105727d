"""Training: Adam, early stopping on validation accuracy, resumable, deterministic, DDP under torchrun.

``train(config)`` trains a :class:`~laya.model.classifier.LayerwiseClassifier` end to end, or — for a
frozen backbone — only its head on cached per-layer features. Each epoch a training state
(weights, best weights, optimiser, counters) is written atomically to ``out/train_state.*``
so ``resume=True`` continues a killed run exactly. The final checkpoint (best validation
weights, reference vectors, metrics) goes to ``out/model.{safetensors,json}``.

Under ``torchrun`` (``WORLD_SIZE > 1``) the same call uses DistributedDataParallel
(NCCL with one process per GPU, else gloo on CPU: :func:`laya.model.devices.setup_distributed`),
a DistributedSampler, and rank 0 writes all files. ``device`` (``auto|cpu|cuda|cuda:N``) and
``precision`` (``float32|bf16`` autocast) say where and how forward passes run; the checkpoint is
written from a CPU copy and loads on any device. Datasets too large for memory are streamed
(``stream``; see :func:`laya.data.datasets.load_dataset`).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import Tensor, nn
from torch.utils.data import DistributedSampler
from tqdm.auto import tqdm

from laya.data.datasets import Images, InputSpec, Preprocess, batch_indices, channel_stats, load_dataset, split_indices
from laya.data.features import cached_hidden_states, iter_hidden_states
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.budget import check_budget
from laya.model.checkpoint import (
    META_FILE,
    CheckpointMeta,
    atomic_write_json,
    atomic_write_tensors,
    save_checkpoint,
)
from laya.model.classifier import LayerwiseClassifier
from laya.model.configs import construct
from laya.model.devices import Placement, autocast, check_precision, model_device, setup_distributed
from laya.model.heads import HeadConfig, build_head
from laya.model.sharding import broadcast_module
from laya.training import small_data
from laya.model.weights import SOURCES
from laya.training.lock import output_lock

STATE_WEIGHTS = "train_state.safetensors"
STATE_META = "train_state.json"


@dataclass
class TrainConfig:
    """Everything a training run depends on (defaults: the paper's reference recipe)."""

    dataset: str = "fashion-mnist"
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    seed: int = 0
    out: str = "runs/model"
    lr: float = 3e-4
    weight_decay: float = 0.0
    batch_size: int = 128
    val_fraction: float = 0.1
    split_seed: int = 0  # the train/validation split is the same for every seed and head
    patience: int = 5
    max_epochs: int = 50
    augment: Literal["none", "flip_crop"] = "none"
    image_size: int | None = None  # ImageFolder datasets: side images are resized to (default 32)
    eval_batch_size: int = 256
    save_dtype: Literal["float32", "float16"] = "float32"
    resume: bool = False
    device: str = "auto"  # auto | cpu | cuda | cuda:N (under torchrun: auto | cuda | cpu)
    precision: Literal["float32", "bf16"] = "float32"  # bf16: forward passes under autocast
    stream: bool | None = None  # ImageFolder datasets: stream from disk (None: when too large for memory)
    mean: list[float] | None = None  # input normalisation (both or neither; None: the weights' own, else the data's)
    std: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["backbone"] = self.backbone.to_dict()
        data["head"] = self.head.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        data = dict(data)
        data["backbone"] = BackboneConfig.from_dict(data.get("backbone", {}))
        data["head"] = HeadConfig.from_dict(data.get("head", {}))
        config = construct(cls, data, "training")
        if config.augment not in ("none", "flip_crop"):
            raise ValueError(f"augment must be 'none' or 'flip_crop', got {config.augment!r}")
        if config.save_dtype not in ("float32", "float16"):
            raise ValueError(f"save_dtype must be 'float32' or 'float16', got {config.save_dtype!r}")
        check_precision(config.precision)
        return config


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def flip_crop(images: Tensor, generator: torch.Generator, pad: int = 4) -> Tensor:
    """Random horizontal flip and random ``pad``-pixel shift crop, batched: ``(B, C, H, W)``."""
    B, C, H, W = images.shape
    flip = torch.rand(B, generator=generator) < 0.5
    images = torch.where(flip.view(B, 1, 1, 1), images.flip(-1), images)
    padded = F.pad(images, (pad, pad, pad, pad))
    dy = torch.randint(0, 2 * pad + 1, (B,), generator=generator)
    dx = torch.randint(0, 2 * pad + 1, (B,), generator=generator)
    rows = (torch.arange(H).view(1, H) + dy.view(B, 1)).view(B, 1, H, 1).expand(B, C, H, W)
    cols = (torch.arange(W).view(1, W) + dx.view(B, 1)).view(B, 1, 1, W).expand(B, C, H, W)
    batch = torch.arange(B).view(B, 1, 1, 1).expand(B, C, H, W)
    chan = torch.arange(C).view(1, C, 1, 1).expand(B, C, H, W)
    return padded[batch, chan, rows, cols]


def input_spec_for(config: TrainConfig, data: Images) -> InputSpec:
    """``config.mean``/``std`` if given, else the normalisation of the backbone's pretrained weights, else the
    training images' statistics."""
    channels, source = data.channels, data.image_size
    size = config.backbone.input_size or source
    weights = config.backbone.weights
    if (config.mean is None) != (config.std is None):
        raise ValueError(f"give both mean and std or neither; got mean={config.mean}, std={config.std}")
    if config.mean is not None:
        mean, std = tuple(config.mean), tuple(config.std)
    elif weights in SOURCES:
        mean, std = SOURCES[weights].mean, SOURCES[weights].std
    elif weights == "timm":
        import timm

        cfg = timm.create_model(config.backbone.model, pretrained=False).pretrained_cfg
        mean, std = tuple(cfg["mean"]), tuple(cfg["std"])
    else:
        mean, std = channel_stats(data)
    if len(mean) != channels:
        raise ValueError(f"weights normalise {len(mean)} channels but the dataset has {channels}")
    return InputSpec(channels=channels, source_size=source, size=size, mean=tuple(mean), std=tuple(std))


class _Logits(nn.Module):
    """What DDP wraps: maps a batch to logits (images through the whole model, or features through the head)."""

    def __init__(self, model: LayerwiseClassifier, preprocess: Preprocess | None) -> None:
        super().__init__()
        self.model, self.preprocess = model, preprocess

    def forward(self, *inputs: Tensor) -> Tensor:
        if self.preprocess is None:  # cached features: the head alone
            return self.model.head(list(inputs)).logits
        return self.model(self.preprocess(inputs[0])).logits


def _batches(inputs: Images | list[Tensor], index_batches: list[Tensor]) -> Iterator[list[Tensor]]:
    """Per index batch, what the net takes: ``[uint8 images]`` from a dataset, or the L cached feature rows."""
    if isinstance(inputs, list):
        return ([x[idx] for x in inputs] for idx in index_batches)
    return ([images] for images in inputs.iter_batches(index_batches))


def _accuracy(
    net: nn.Module, inputs: Images | list[Tensor], labels: Tensor, index: Tensor, config: TrainConfig, env: Placement
) -> float:
    """Accuracy over ``index``, sharded across ranks and summed."""
    shard = index[env.rank :: env.world]
    index_batches = list(shard.split(config.eval_batch_size))
    correct = torch.zeros(2, dtype=torch.float64, device=env.device)
    net.eval()
    with torch.inference_mode(), autocast(env.device, config.precision):
        for idx, batch in zip(index_batches, _batches(inputs, index_batches), strict=True):
            logits = net(*[x.to(env.device, non_blocking=True) for x in batch])
            correct[0] += (logits.argmax(-1).cpu() == labels[idx]).sum().item()
            correct[1] += len(idx)
    if env.world > 1:
        dist.all_reduce(correct)
    return float(correct[0] / correct[1])


def _save_state(
    out: Path, net: nn.Module, best: dict[str, Tensor], optimizer: torch.optim.Optimizer, info: dict
) -> None:
    tensors = {f"model.{k}": v for k, v in net.state_dict().items()}
    tensors.update({f"best.{k}": v for k, v in best.items()})
    optim = optimizer.state_dict()
    for pid, state in optim["state"].items():
        for name, value in state.items():
            tensors[f"optim.{pid}.{name}"] = torch.as_tensor(value)
    atomic_write_tensors(out / STATE_WEIGHTS, tensors)
    atomic_write_json(out / STATE_META, {**info, "param_groups": optim["param_groups"]})


def _load_state(out: Path, net: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict[str, Tensor], dict]:
    info = json.loads((out / STATE_META).read_text())
    tensors = load_file(str(out / STATE_WEIGHTS))
    net.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    best = {k[5:]: v for k, v in tensors.items() if k.startswith("best.")}
    state: dict[int, dict[str, Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, pid, name = key.split(".", 2)
            state.setdefault(int(pid), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": info["param_groups"]})
    return best, info


def train(
    config: TrainConfig, on_epoch_end: Callable[[int, dict], None] | None = None, module: nn.Module | None = None,
    alone: Placement | None = None,
) -> Path:  # fmt: skip
    """Train as ``config`` says; returns the output directory holding the final checkpoint.

    ``module``: the user's ``nn.Module`` for a ``wrapped`` backbone (``config.backbone.layers`` names
    the submodules read; see :mod:`laya.model.backbones.wrapped`). ``alone``: this process trains the whole run
    by itself on ``alone.device``, no DDP, even under ``torchrun`` (``laya attach``: every process fits the same
    head from the same cached features, the feature pass still split between them, and all go on with the main
    process's weights).

    ``on_epoch_end(epoch, record)`` is called after each epoch's state is saved (tests use it to
    simulate an interruption). The main process holds ``config.out``'s lock (:mod:`laya.training.lock`).

    Raises:
        OutputLockedError: another live ``train`` is writing ``config.out``.
    """
    if int(os.environ.get("RANK", "0")) != 0:
        return _train(config, on_epoch_end, module, alone)
    with output_lock(config.out):
        return _train(config, on_epoch_end, module, alone)


def _train(
    config: TrainConfig, on_epoch_end: Callable[[int, dict], None] | None, module: nn.Module | None = None,
    alone: Placement | None = None,
) -> Path:  # fmt: skip
    env = alone or setup_distributed(config.device)
    out = Path(config.out)
    if config.resume and (out / META_FILE).is_file() and not (out / STATE_META).is_file():
        if env.main:
            tqdm.write(f"{out} already holds a finished run; nothing to resume")
        return out
    seed_everything(config.seed)
    started = time.time()

    data = load_dataset(config.dataset, "train", config.image_size, stream=config.stream)
    spec = input_spec_for(config, data)
    bb_config = BackboneConfig.from_dict(
        {**config.backbone.to_dict(), "in_channels": spec.channels, "input_size": spec.size}
    )
    if bb_config.name == "wrapped":  # the user's own module, already in memory
        backbone = build_backbone(bb_config, module=module)
    else:
        check_budget(bb_config, config.head, len(data.classes))  # before any tensor of the model exists
        backbone = build_backbone(bb_config)
    head = build_head(config.head, backbone.layer_dims, len(data.classes))
    model = LayerwiseClassifier(backbone, head).to(env.device)
    preprocess = Preprocess(spec).to(env.device)
    train_idx, val_idx = split_indices(len(data), config.val_fraction, config.split_seed)
    if env.main:
        for message in small_data.data_warnings(data.labels, train_idx, val_idx, data.classes):
            small_data.warn(message)

    frozen = bb_config.freeze
    if frozen:  # heads train on per-layer features computed once
        inputs: Images | list[Tensor] = cached_hidden_states(
            backbone, preprocess, data, config.eval_batch_size, "features (train split)", config.precision, shard=True
        )
        net: nn.Module = _Logits(model, None)
    else:
        inputs = data
        net = _Logits(model, preprocess)
    trainable = [p for p in net.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trainable, lr=config.lr, weight_decay=config.weight_decay)
    on_gpu = [env.device] if env.device.type == "cuda" else None
    ddp = nn.parallel.DistributedDataParallel(net, device_ids=on_gpu) if env.world > 1 else net

    epoch, best_acc, bad_epochs, history = 0, -1.0, 0, []
    best = {k: v.clone() for k, v in net.state_dict().items()}
    if config.resume and (out / STATE_META).is_file():
        best, info = _load_state(out, net, optimizer)
        epoch, best_acc, bad_epochs, history = info["epoch"], info["best_acc"], info["bad_epochs"], info["history"]
        # training time counts the interrupted part too (states from older versions: sum of epoch times)
        started -= info.get("elapsed", sum(r["seconds"] for r in history))
        if env.main:
            tqdm.write(f"resuming {out} after epoch {epoch} (best val acc {best_acc:.4f})")
    elif env.main and (out / STATE_META).is_file():
        tqdm.write(f"{out} holds an unfinished run; starting over (pass --resume to continue it)")

    sampler = DistributedSampler(train_idx, num_replicas=env.world, rank=env.rank, shuffle=True, seed=config.seed)
    while epoch < config.max_epochs and bad_epochs < config.patience:
        sampler.set_epoch(epoch)
        order = train_idx[torch.as_tensor(list(iter(sampler)))]
        generator = torch.Generator().manual_seed(config.seed * 100_003 + epoch * 7919 + env.rank)
        ddp.train()
        tick, total, seen = time.time(), 0.0, 0
        index_batches = list(order.split(config.batch_size))
        bar = tqdm(
            zip(index_batches, _batches(inputs, index_batches), strict=True),
            total=len(index_batches),
            desc=f"epoch {epoch + 1}",
            disable=not env.main,
            leave=False,
            mininterval=1.0,
        )
        for idx, batch in bar:
            if config.augment == "flip_crop" and not frozen:
                batch[0] = flip_crop(batch[0], generator)
            with autocast(env.device, config.precision):
                logits = ddp(*[b.to(env.device, non_blocking=True) for b in batch])
            loss = F.cross_entropy(logits.float(), data.labels[idx].to(env.device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total, seen = total + loss.item() * len(idx), seen + len(idx)
            bar.set_postfix(loss=f"{total / seen:.4f}", refresh=False)
        val_acc = _accuracy(net, inputs, data.labels, val_idx, config, env)
        epoch += 1
        if val_acc > best_acc:
            best_acc, bad_epochs = val_acc, 0
            best = {k: v.detach().clone() for k, v in net.state_dict().items()}
        else:
            bad_epochs += 1
        record = {"epoch": epoch, "train_loss": total / max(seen, 1), "val_acc": val_acc, "seconds": time.time() - tick}
        history.append(record)
        if env.main:
            tqdm.write(
                f"epoch {epoch:3d}  loss {record['train_loss']:.4f}  val acc {val_acc:.4f}  ({record['seconds']:.1f} s)"
            )
            info = {
                "epoch": epoch,
                "best_acc": best_acc,
                "bad_epochs": bad_epochs,
                "history": history,
                "elapsed": time.time() - started,
                "config": config.to_dict(),
            }
            _save_state(out, net, best, optimizer, info)
        env.barrier()
        if on_epoch_end is not None:
            on_epoch_end(epoch, record)

    net.load_state_dict(best)
    if alone is not None:
        broadcast_module(net)  # under torchrun: every process's copy is the main process's
    if env.main and (message := small_data.stopping_warning(best_acc, data.labels[val_idx], len(data.classes), epoch)):
        small_data.warn(message)
    if env.main:
        _finish(
            config,
            model,
            preprocess,
            spec,
            bb_config,
            data,
            inputs,
            train_idx,
            best_acc,
            history,
            time.time() - started,
            out,
        )
    env.barrier()
    return out


def _finish(
    config: TrainConfig,
    model: LayerwiseClassifier,
    preprocess: Preprocess,
    spec: InputSpec,
    bb_config: BackboneConfig,
    data: Images,
    inputs: Images | list[Tensor],
    train_idx: Tensor,
    best_acc: float,
    history: list[dict],
    seconds: float,
    out: Path,
) -> None:
    """Reference vectors, test accuracy, final checkpoint; removes the training state.

    Both stream over batches: the reference vector of layer i is ``mean_n h_i(x_n)`` over the training
    split (summed in float64), and test predictions go batch by batch through the head.
    """
    model.eval()
    frozen = bb_config.freeze
    device, batch = model_device(model.head), config.eval_batch_size
    train_batches = list(train_idx.split(batch))
    hidden = (
        _batches(inputs, train_batches)
        if frozen
        else iter_hidden_states(
            model.backbone, preprocess, data.subset(train_idx), batch, "reference vectors", config.precision
        )
    )
    sums = [torch.zeros(d, dtype=torch.float64, device=device) for d in model.backbone.layer_dims]
    for h in hidden:
        sums = [s + x.to(device).double().sum(0) for s, x in zip(sums, h)]
    model.head.set_references([(s / len(train_idx)).float() for s in sums])
    test = load_dataset(config.dataset, "test", config.image_size, stream=config.stream)
    if test.classes != data.classes:
        raise ValueError(f"train and test splits have different classes: {data.classes} vs {test.classes}")
    test_batches = batch_indices(len(test), batch)
    test_hidden = (
        _batches(
            cached_hidden_states(model.backbone, preprocess, test, batch, "test split", config.precision), test_batches
        )
        if frozen
        else iter_hidden_states(model.backbone, preprocess, test, batch, "test split", config.precision)
    )
    correct = 0
    with torch.inference_mode():
        for idx, h in zip(test_batches, test_hidden, strict=True):
            correct += (model.head([x.to(device) for x in h]).logits.argmax(-1).cpu() == test.labels[idx]).sum().item()
    test_acc = correct / len(test)
    tqdm.write(f"best val acc {best_acc:.4f}  test acc {test_acc:.4f}  ({seconds / 60:.1f} min)")
    meta = CheckpointMeta(
        backbone=bb_config,
        head=config.head,
        classes=data.classes,
        dataset=config.dataset,
        input=spec,
        seed=config.seed,
        train=config.to_dict(),
        metrics={
            "val_accuracy": best_acc,
            "test_accuracy": test_acc,
            "epochs": len(history),
            "train_seconds": seconds,
            "history": history,
        },
    )
    save_checkpoint(model.cpu(), meta, out, dtype=getattr(torch, config.save_dtype))
    for name in (STATE_WEIGHTS, STATE_META):
        (out / name).unlink(missing_ok=True)


__all__ = ["TrainConfig", "flip_crop", "input_spec_for", "seed_everything", "train"]
