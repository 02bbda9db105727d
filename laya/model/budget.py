"""Memory and compute budget of a model, computed from its config before any real tensor exists.

The model is built on PyTorch's ``meta`` device (shapes only, no memory) with the same
constructors as the real one, so the counts are exact for every family (MLP, CNN, any timm
model) and cost milliseconds. It counts

- ``params``: parameters **and all buffers**, persistent or not (a timm BEiT's relative-position
  index is a non-persistent buffer that grows as ``tokens**2``);
- ``activations``: the **peak** bytes of live tensors during one meta forward pass of a single
  input (the hidden states kept for the head included), tracked by a dispatch mode that adds each
  new tensor storage and subtracts it when it is freed, plus the head's largest ablation tensor
  ``L * L * d*`` (one mask per layer, :class:`~laya.model.heads.MixHead`); in float32 elements (bytes / 4);
- ``flops``: floating-point operations of that pass (:class:`torch.utils.flop_counter.FlopCounterMode`,
  2 per multiply-add), the per-image CPU cost;
- ``state``: the shape and dtype of every state-dict tensor, checked against the weights file's
  header (:mod:`laya.model.header`) before the weights are read or the model is built.

Limits (environment, read by :mod:`laya.model.limits`): ``LAYA_MAX_PARAMS`` (default 500 M parameters +
buffer elements), ``LAYA_MAX_ACTIVATIONS`` (default 200 M float32 elements at the peak of one input, 800 MB),
``LAYA_MAX_GFLOPS`` (default 200 GFLOP per input: a few seconds per image on one CPU core).

The meta forward goes through PyTorch's Python meta kernels, whose first call imports
``torch._dynamo`` (≈ 2–3 CPU-s, the largest single cost of a cold dashboard start). The estimate is
a pure function of the configs and the library versions, so it is kept on disk
(``$LAYA_CACHE/budget/<sha256>.json``, default ``~/.cache/laya``): a restarted server checks the
same checkpoints against the current limits without the meta forward. Only the estimate is
cached, never the verdict; an unreadable cache entry is measured again.
"""

from __future__ import annotations

import hashlib
import json
import os
import weakref
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from laya import settings
from laya.model.backbones import BackboneConfig, build_backbone
from laya.model.heads import HeadConfig, build_head
from laya.model.limits import limits
from laya.model.validation import refuse


@dataclass(frozen=True)
class Budget:
    """What a model would cost: ``params`` (parameters + buffers, elements), ``activations`` (peak float32
    elements of one input's forward pass), ``flops`` per input, layer widths, and ``state``: name ->
    (shape, dtype) of every state-dict tensor."""

    params: int
    activations: int
    layer_dims: tuple[int, ...]
    flops: int = 0
    buffers: int = 0
    state: dict[str, tuple[tuple[int, ...], torch.dtype]] = field(default_factory=dict, compare=False, repr=False)


class PeakMemory(TorchDispatchMode):
    """Peak bytes of the tensor storages alive at once while the mode is active (meta tensors included).

    Each op output's storage is counted once when it first appears and released when the last tensor
    viewing it is garbage-collected; storages in ``resident`` (parameters, buffers, the input) are not counted.
    """

    def __init__(self, resident: set[int]) -> None:
        super().__init__()
        self.resident = resident
        self.live: dict[int, list[int]] = {}  # storage key -> [bytes, tensors viewing it]
        self.now = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                self._track(tensor)
        return out

    def _track(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key in self.resident:
            return
        if key in self.live:
            self.live[key][1] += 1
        else:
            self.live[key] = [storage.nbytes(), 1]
            self.now += storage.nbytes()
            self.peak = max(self.peak, self.now)
        weakref.finalize(tensor, self._release, key)

    def _release(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] == 0:
                self.now -= entry[0]
                del self.live[key]


def _storage_keys(tensors) -> set[int]:
    return {t.untyped_storage()._cdata for t in tensors}


def _cache_file(backbone: BackboneConfig, head: HeadConfig, num_classes: int) -> Path:
    """Where the estimate of these configs is kept: keyed by the configs and the torch/timm versions."""
    try:
        timm_version = metadata.version("timm")
    except metadata.PackageNotFoundError:
        timm_version = None
    key = json.dumps([torch.__version__, timm_version, backbone.to_dict(), head.to_dict(), num_classes],
                     sort_keys=True, default=str)  # fmt: skip
    root = settings.path("LAYA_CACHE")
    return root / "budget" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"


def _to_json(budget: Budget) -> str:
    state = {k: [list(shape), str(dtype).removeprefix("torch.")] for k, (shape, dtype) in budget.state.items()}
    return json.dumps({"params": budget.params, "activations": budget.activations, "layer_dims": list(budget.layer_dims),
                       "flops": budget.flops, "buffers": budget.buffers, "state": state})  # fmt: skip


def _read_cached(path: Path) -> Budget | None:
    try:
        data = json.loads(path.read_text())
        state = {}
        for name, (shape, dtype_name) in data["state"].items():
            dtype = getattr(torch, dtype_name)
            if not isinstance(dtype, torch.dtype):
                return None
            state[str(name)] = (tuple(int(n) for n in shape), dtype)
        budget = Budget(int(data["params"]), int(data["activations"]), tuple(int(d) for d in data["layer_dims"]),
                        int(data["flops"]), int(data["buffers"]), state)  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return budget if min(budget.params, budget.activations, budget.flops, budget.buffers) >= 0 else None


def estimate(backbone: BackboneConfig, head: HeadConfig, num_classes: int) -> Budget:
    """:func:`measure`, kept on disk per (configs, torch and timm versions); see the module docstring.

    Raises:
        CheckpointError: the config cannot be built (never cached).
    """
    path = _cache_file(backbone, head, num_classes)
    if (cached := _read_cached(path)) is not None:
        return cached
    budget = measure(backbone, head, num_classes)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(_to_json(budget))
        partial.replace(path)  # atomic: a concurrent reader sees the whole entry or none
    except OSError:
        pass  # a read-only cache only costs the meta forward next time
    return budget


def measure(backbone: BackboneConfig, head: HeadConfig, num_classes: int) -> Budget:
    """Build the model on the ``meta`` device and count its parameters, buffers, peak activations and FLOPs
    for one input (see the module docstring).

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
            tensors = [*net.parameters(), *net.buffers(), *layer_net.parameters(), *layer_net.buffers()]
            with FlopCounterMode(display=False) as flops, PeakMemory(_storage_keys([*tensors, x])) as memory:
                layer_net(net(x))
    except (TypeError, ValueError, RuntimeError, AttributeError, IndexError, AssertionError, NotImplementedError) as error:
        what = f"timm model {config.model!r}" if config.name == "timm" else f"backbone {config.name!r}"
        raise refuse("backbone", config.model_kwargs or config.widths, f"{what} cannot be built: {error}") from error
    dims = tuple(int(d) for d in net.layer_dims)
    activations = memory.peak // 4 + len(dims) ** 2 * head.d_star + x.numel()
    buffers = sum(b.numel() for b in (*net.buffers(), *layer_net.buffers()))
    params = sum(p.numel() for p in (*net.parameters(), *layer_net.parameters())) + buffers
    state = {
        **{f"backbone.{k}": (tuple(v.shape), v.dtype) for k, v in net.state_dict().items()},
        **{f"head.{k}": (tuple(v.shape), v.dtype) for k, v in layer_net.state_dict().items()},
    }
    return Budget(params, activations, dims, int(flops.get_total_flops()), buffers, state)


def check_budget(backbone: BackboneConfig, head: HeadConfig, num_classes: int) -> Budget:
    """:func:`estimate`, refusing models over :func:`limits` before any memory is allocated.

    Raises:
        CheckpointError: over the parameter or activation limit (names both numbers and the variable).
    """
    limit = limits()
    budget = estimate(backbone, head, num_classes)
    if budget.params > limit.params:
        what = f"{budget.params:,} parameters" + (f" and buffer elements ({budget.buffers:,} in buffers)" if budget.buffers else "")
        raise refuse("backbone/head size", what, f"over the limit of {limit.params:,} (LAYA_MAX_PARAMS)")
    if budget.activations > limit.activations:
        raise refuse(
            "backbone.input_size/widths",
            f"{budget.activations:,} activations per input",
            f"over the limit of {limit.activations:,} (LAYA_MAX_ACTIVATIONS; float32 elements at the peak of one forward pass)",
        )
    if budget.flops > limit.gflops * 1e9:
        raise refuse(
            "backbone.input_size/model_kwargs",
            f"{budget.flops / 1e9:,.1f} GFLOP per input",
            f"over the limit of {limit.gflops:,g} GFLOP (LAYA_MAX_GFLOPS; seconds of CPU per image)",
        )
    return budget


__all__ = ["Budget", "PeakMemory", "check_budget", "estimate", "measure"]
