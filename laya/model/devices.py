"""Where tensors live and in what precision: ``--device auto|cpu|cuda|cuda:N``, ``--precision float32|bf16``.

``auto`` is the first CUDA device when ``torch.cuda.is_available()``, else the CPU. The dashboard
reads the same spelling from ``$LAYA_DEVICE`` (default ``auto``). Asking for a device this machine
does not have is an error that says what is available, never a crash deep inside a forward pass.
``bf16`` runs the forward passes under ``torch.autocast`` (CPU and CUDA); weights, optimiser state,
checkpoints and the float64 decodes of leave-one-out and faithfulness are unaffected.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as dist

from laya import settings

Precision = Literal["float32", "bf16"]
PRECISIONS: tuple[str, ...] = ("float32", "bf16")
DEVICE_ENV = "LAYA_DEVICE"  # read through laya.settings


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """The :class:`torch.device` named by ``spec`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``; ``None`` = auto).

    Raises:
        ValueError: an unknown spelling, or a CUDA device this machine does not have.
    """
    text = "auto" if spec is None else str(spec).strip().lower()
    if text == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if text == "cpu":
        return torch.device("cpu")
    if text == "cuda" or text.startswith("cuda:"):
        index = text.partition(":")[2]
        if index and not index.isdigit():
            raise ValueError(f"device {spec!r}: expected cuda:N with N a GPU index, e.g. cuda:0")
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {spec!r} asked for, but CUDA is not available here (torch {torch.__version__}, "
                f"built with CUDA {torch.version.cuda}); use --device cpu or auto"
            )
        count = torch.cuda.device_count()
        n = int(index) if index else torch.cuda.current_device()
        if n >= count:
            raise ValueError(
                f"device {spec!r} asked for, but this machine has {count} GPU(s): cuda:0..cuda:{count - 1}"
            )
        return torch.device("cuda", n)
    raise ValueError(f"unknown device {spec!r}; expected auto, cpu, cuda or cuda:N")


def env_device() -> torch.device:
    """The device named by ``$LAYA_DEVICE`` (default ``auto``), for the dashboard."""
    return resolve_device(settings.text(DEVICE_ENV))


def check_precision(precision: str) -> Precision:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return precision  # type: ignore[return-value]


@contextlib.contextmanager
def autocast(device: torch.device, precision: str) -> Iterator[None]:
    """``torch.autocast(device.type, bfloat16)`` for ``bf16``; nothing for ``float32``."""
    if check_precision(precision) == "bf16":
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            yield
    else:
        yield


@dataclass(frozen=True)
class Placement:
    """This process's place in a (possibly single-process) run: rank, world size, device."""

    rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")  # noqa: RUF009 - immutable

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


def setup_distributed(spec: str | torch.device | None = "auto") -> Placement:
    """Resolve the device; under ``torchrun`` (``WORLD_SIZE > 1``) also join the process group.

    One process per GPU: rank ``r`` uses ``cuda:LOCAL_RANK`` with NCCL. When ``auto`` meets more
    processes on this node than GPUs, or no GPU, every process runs on the CPU with gloo (with a
    warning in the first case). An explicit ``cuda`` with too few GPUs, or a fixed ``cuda:N``
    under torchrun, is an error.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Placement(device=resolve_device(spec))
    text = "auto" if spec is None else str(spec).strip().lower()
    if text.startswith("cuda:"):
        raise ValueError(f"--device {spec} under torchrun: pass cuda or auto; process r uses cuda:LOCAL_RANK")
    local, local_world = int(os.environ.get("LOCAL_RANK", "0")), int(os.environ.get("LOCAL_WORLD_SIZE", world))
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    use_cuda = text in ("auto", "cuda") and 0 < gpus
    if use_cuda and local_world > gpus:
        message = (
            f"torchrun started {local_world} processes on this node but it has {gpus} GPU(s); "
            "start at most one process per GPU (--nproc_per_node)"
        )
        if text == "cuda":
            raise ValueError(message)
        warnings.warn(f"{message}. Falling back to the CPU with gloo for every process.", stacklevel=2)
        use_cuda = False
    if text == "cuda" and not use_cuda:
        resolve_device("cuda")  # raises: CUDA is not available
    if use_cuda:
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return Placement(
        dist.get_rank(), dist.get_world_size(), torch.device("cuda", local) if use_cuda else torch.device("cpu")
    )


def process_rank() -> tuple[int, int]:
    """``(rank, world size)`` inside an initialised process group (torchrun), else ``(0, 1)``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def model_device(module: torch.nn.Module) -> torch.device:
    """The device of a module's first parameter or buffer (CPU for a module with neither)."""
    for tensor in module.parameters():
        return tensor.device
    for tensor in module.buffers():
        return tensor.device
    return torch.device("cpu")


def release_memory(device: str | torch.device | None = None) -> None:
    """Give back what a finished step freed: Python's unreachable objects, the CUDA caching allocator's unused
    blocks on a CUDA ``device``, and the C heap's free pages (glibc's ``malloc_trim``; nothing where the C library
    has none), so that one step's peak does not stay in the resident size of the next (``laya attach``'s steps)."""
    gc.collect()
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


__all__ = [
    "DEVICE_ENV",
    "PRECISIONS",
    "Placement",
    "Precision",
    "autocast",
    "check_precision",
    "env_device",
    "model_device",
    "process_rank",
    "release_memory",
    "resolve_device",
    "setup_distributed",
]
