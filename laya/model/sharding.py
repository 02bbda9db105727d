"""A pass over batches split between ``torchrun``'s processes, its results put back in one process's order.

Under ``torchrun`` (``WORLD_SIZE > 1``; the process group joined by :func:`~laya.model.devices.setup_distributed`)
a pass over ``B`` batches is split by batch: process ``r`` of ``W`` computes batches ``r, r + W, ...``
(:class:`Shard`), each exactly as one process computes it, and the per-input rows are gathered back in batch order
(:func:`gather_batches`: ``all_gather`` of padded tensors on the process group's device, no pickling). Every process
then holds what one process would have computed, bit for bit, and goes on with it; whatever follows a gather (a
reduction, a bootstrap, a fit) runs on the gathered rows in one process's order, so it is the one-process result.

A sharded pass is a collective: every process of the group must run it, with the same arguments. Outside
``torchrun``, or for a pass the caller marks as run by one process alone (``Shard.of(..., shard=False)``), a
:class:`Shard` is the whole pass and its gather a concatenation.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor, nn

from laya.model.devices import Placement, process_rank, setup_distributed


def torchrun_placement() -> Placement:
    """Under ``torchrun``: join the process group (:func:`~laya.model.devices.setup_distributed` with ``auto``:
    ``cuda:LOCAL_RANK`` and NCCL where every process of the node has a GPU, else the CPU and gloo). One process:
    rank 0 of 1 on the CPU, where ``laya attach`` and ``laya network`` run their passes in one process."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return setup_distributed("auto")
    return Placement()


def wire_device() -> torch.device:
    """Where a collective's tensors must be: this process's GPU under NCCL, else the CPU (gloo)."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def gather_batches(local: Tensor, sizes: Sequence[int]) -> Tensor:
    """Every process's rows of one per-input array, in batch order; the inverse of a round-robin batch split.

    Process ``r`` of ``W`` holds the rows of batches ``r, r + W, ...`` (sizes ``sizes[b]``) concatenated:
    ``local (n_r, ...)`` (``n_r`` may be 0). All processes receive the full ``(sum(sizes), ...)`` array, on
    :func:`wire_device` (``all_gather`` of tensors padded to the largest share; bools travel as uint8, which gloo
    gathers).
    """
    rank, world = process_rank()
    owned = [list(range(r, len(sizes), world)) for r in range(world)]
    counts = [sum(sizes[b] for b in batches) for batches in owned]
    if len(local) != counts[rank]:
        raise ValueError(f"process {rank} holds {len(local)} rows, its batches have {counts[rank]}")
    dtype, device = local.dtype, wire_device()
    wire = torch.uint8 if dtype == torch.bool else dtype
    padded = torch.zeros((max(counts), *local.shape[1:]), dtype=wire, device=device)
    padded[: counts[rank]] = local.to(device=device, dtype=wire)
    received = [torch.empty_like(padded) for _ in range(world)]
    if world > 1:
        dist.all_gather(received, padded)
    else:
        received = [padded]
    pieces: dict[int, Tensor] = {}
    for r, batches in enumerate(owned):
        pieces.update(zip(batches, received[r][: counts[r]].split([sizes[b] for b in batches])))
    return torch.cat([pieces[b] for b in range(len(sizes))]).to(dtype)


@dataclass(frozen=True)
class Shard:
    """This process's share of a pass over batches of ``sizes`` inputs: it owns batches ``rank, rank + W, ...``."""

    sizes: tuple[int, ...]
    rank: int = 0
    world: int = 1

    @classmethod
    def of(cls, batches: Sequence[Tensor], shard: bool = True) -> Shard:
        """The share of ``batches`` (index tensors) of this process of the group; ``shard=False``: all of them
        (a pass one process runs alone, even inside a process group)."""
        rank, world = process_rank() if shard else (0, 1)
        return cls(tuple(len(b) for b in batches), rank, world)

    @property
    def owned(self) -> list[int]:
        return list(range(self.rank, len(self.sizes), self.world))

    @property
    def run(self) -> list[int]:
        """The batches this process computes: those it owns, or batch 0 alone where it owns none (more processes
        than batches): its rows give the arrays' shapes and are dropped by :meth:`gather`."""
        return self.owned or [0]

    def gather(self, pieces: Sequence[Tensor]) -> Tensor:
        """The whole pass's rows, in batch order, on the pieces' device: ``pieces`` are this process's per-batch
        results for :attr:`run`, ``(b, ...)`` each."""
        rows = torch.cat(list(pieces))[: sum(self.sizes[b] for b in self.owned)]
        if self.world == 1:
            return rows
        return gather_batches(rows, self.sizes).to(rows.device)

    def rounds(self) -> Iterator[Shard]:
        """The pass in rounds of ``W`` consecutive batches, one per process: gathering round by round keeps one
        round's rows in memory (the feature cache, which the main process writes as they come)."""
        for start in range(0, len(self.sizes), self.world):
            yield Shard(self.sizes[start : start + self.world], self.rank, self.world)


def broadcast_module(module: nn.Module) -> None:
    """Copy the main process's parameters and buffers into every process's ``module`` (in place): the one state
    every process goes on with after each fitted its own copy from the same inputs. A no-op in one process."""
    if process_rank()[1] == 1:
        return
    device = wire_device()
    for tensor in [*module.parameters(), *module.buffers()]:
        wire = tensor.detach().to(device)
        dist.broadcast(wire, src=0)
        with torch.no_grad():
            tensor.copy_(wire)


def main_says(flag: bool) -> bool:
    """The main process's ``flag``, in every process (a decision all must take alike, e.g. whether a cache exists)."""
    if process_rank()[1] == 1:
        return flag
    wire = torch.tensor([int(flag)], device=wire_device())
    dist.broadcast(wire, src=0)
    return bool(wire.item())


@contextlib.contextmanager
def scratch_unless_main(place: Placement, folder: str | Path) -> Iterator[Path]:
    """``folder`` for the main process; for every other one a temporary folder, deleted on leaving: each process
    runs the same steps (so every collective meets all of them) and only the main one's files are kept."""
    if place.main:
        yield Path(folder)
        return
    with tempfile.TemporaryDirectory(prefix=f"laya-rank{place.rank}-") as scratch:
        yield Path(scratch)


@contextlib.contextmanager
def quiet_unless_main(place: Placement) -> Iterator[None]:
    """The other processes' printouts and progress bars silenced (they repeat the main one's); an error still
    reaches the caller, which prints it after leaving."""
    if place.main:
        yield
        return
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield
    sys.stderr.flush()


def end_distributed() -> None:
    """Leave the process group where one was joined (a command's clean end under ``torchrun``)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


__all__ = [
    "Shard",
    "broadcast_module",
    "end_distributed",
    "gather_batches",
    "main_says",
    "quiet_unless_main",
    "scratch_unless_main",
    "torchrun_placement",
    "wire_device",
]
