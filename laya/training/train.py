"""Training: Adam, early stopping on validation accuracy, resumable, deterministic, DDP under torchrun.

``train(config)`` trains a :class:`~laya.model.classifier.LayerwiseClassifier` end to end, or — for a
frozen backbone — only its head on cached per-layer features. Each epoch a training state
(weights, best weights, optimiser, counters) is written atomically to ``out/train_state.*``
so ``resume=True`` continues a killed run exactly. The final checkpoint (best validation
weights, reference vectors, metrics) goes to ``out/model.{safetensors,json}``.

Under ``torchrun`` (``WORLD_SIZE > 1``) the same call uses DistributedDataParallel
(gloo on CPU, NCCL on GPUs), a DistributedSampler, and rank 0 writes all files.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
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

from laya.data.datasets import ImageArrays, InputSpec, Preprocess, channel_stats, load_dataset, split_indices
from laya.data.features import cached_hidden_states, hidden_states
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
from laya.model.heads import HeadConfig, build_head
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
        return config


@dataclass
class _Dist:
    rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")  # noqa: RUF009 - immutable

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


def _setup_distributed() -> _Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return _Dist(device=torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank()
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    return _Dist(rank, dist.get_world_size(), device)


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


def input_spec_for(config: TrainConfig, data: ImageArrays) -> InputSpec:
    """Normalisation of the backbone's pretrained weights, else the training images' statistics."""
    channels, source = data.images.shape[1], data.images.shape[-1]
    size = config.backbone.input_size or source
    weights = config.backbone.weights
    if weights in SOURCES:
        mean, std = SOURCES[weights].mean, SOURCES[weights].std
    elif weights == "timm":
        import timm

        cfg = timm.create_model(config.backbone.model, pretrained=False).pretrained_cfg
        mean, std = tuple(cfg["mean"]), tuple(cfg["std"])
    else:
        mean, std = channel_stats(data.images)
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


def _accuracy(net: nn.Module, inputs: list[Tensor], labels: Tensor, index: Tensor, batch: int, env: _Dist) -> float:
    """Accuracy over ``index``, sharded across ranks and summed."""
    shard = index[env.rank :: env.world]
    correct = torch.zeros(2, dtype=torch.float64, device=env.device)
    net.eval()
    with torch.inference_mode():
        for start in range(0, len(shard), batch):
            idx = shard[start : start + batch]
            logits = net(*[x[idx].to(env.device) for x in inputs])
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


def train(config: TrainConfig, on_epoch_end: Callable[[int, dict], None] | None = None) -> Path:
    """Train as ``config`` says; returns the output directory holding the final checkpoint.

    ``on_epoch_end(epoch, record)`` is called after each epoch's state is saved (tests use it to
    simulate an interruption). The main process holds ``config.out``'s lock (:mod:`laya.training.lock`).

    Raises:
        OutputLockedError: another live ``train`` is writing ``config.out``.
    """
    if int(os.environ.get("RANK", "0")) != 0:
        return _train(config, on_epoch_end)
    with output_lock(config.out):
        return _train(config, on_epoch_end)


def _train(config: TrainConfig, on_epoch_end: Callable[[int, dict], None] | None) -> Path:
    env = _setup_distributed()
    out = Path(config.out)
    if config.resume and (out / META_FILE).is_file() and not (out / STATE_META).is_file():
        if env.main:
            tqdm.write(f"{out} already holds a finished run; nothing to resume")
        return out
    seed_everything(config.seed)
    started = time.time()

    data = load_dataset(config.dataset, "train", config.image_size)
    spec = input_spec_for(config, data)
    bb_config = BackboneConfig.from_dict(
        {**config.backbone.to_dict(), "in_channels": spec.channels, "input_size": spec.size}
    )
    check_budget(bb_config, config.head, len(data.classes))  # before any tensor of the model exists
    backbone = build_backbone(bb_config)
    head = build_head(config.head, backbone.layer_dims, len(data.classes))
    model = LayerwiseClassifier(backbone, head).to(env.device)
    preprocess = Preprocess(spec).to(env.device)
    train_idx, val_idx = split_indices(len(data), config.val_fraction, config.split_seed)

    frozen = bb_config.freeze
    if frozen:  # heads train on per-layer features computed once
        inputs = cached_hidden_states(
            backbone, preprocess, data.images, config.eval_batch_size, "features (train split)"
        )
        net: nn.Module = _Logits(model, None)
    else:
        inputs = [data.images]
        net = _Logits(model, preprocess)
    trainable = [p for p in net.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trainable, lr=config.lr, weight_decay=config.weight_decay)
    ddp = nn.parallel.DistributedDataParallel(net) if env.world > 1 else net

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
        bar = tqdm(
            range(0, len(order), config.batch_size),
            desc=f"epoch {epoch + 1}",
            disable=not env.main,
            leave=False,
            mininterval=1.0,
        )
        for start in bar:
            idx = order[start : start + config.batch_size]
            batch = [x[idx] for x in inputs]
            if config.augment == "flip_crop" and not frozen:
                batch[0] = flip_crop(batch[0], generator)
            loss = F.cross_entropy(ddp(*[b.to(env.device) for b in batch]), data.labels[idx].to(env.device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total, seen = total + loss.item() * len(idx), seen + len(idx)
            bar.set_postfix(loss=f"{total / seen:.4f}", refresh=False)
        val_acc = _accuracy(net, inputs, data.labels, val_idx, config.eval_batch_size, env)
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
    data: ImageArrays,
    inputs: list[Tensor],
    train_idx: Tensor,
    best_acc: float,
    history: list[dict],
    seconds: float,
    out: Path,
) -> None:
    """Reference vectors, test accuracy, final checkpoint; removes the training state."""
    model.eval()
    frozen = bb_config.freeze
    train_hidden = (
        [h[train_idx] for h in inputs]
        if frozen
        else hidden_states(
            model.backbone, preprocess, data.images[train_idx], config.eval_batch_size, "reference vectors"
        )
    )
    model.head.set_references([h.double().mean(0).float() for h in train_hidden])
    test = load_dataset(config.dataset, "test", config.image_size)
    if test.classes != data.classes:
        raise ValueError(f"train and test splits have different classes: {data.classes} vs {test.classes}")
    extract = cached_hidden_states if frozen else hidden_states
    test_hidden = extract(model.backbone, preprocess, test.images, config.eval_batch_size, "test split")
    with torch.inference_mode():
        test_acc = (model.head(test_hidden).logits.argmax(-1).cpu() == test.labels).double().mean().item()
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
