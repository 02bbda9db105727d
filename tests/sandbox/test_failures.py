"""Which failures are remembered (refusals and a worker's memory or CPU limit, never a signal, a timeout or a
busy pool), and the memory's bound: least recently used out."""

from __future__ import annotations

import pytest

from laya.model.checkpoint import CheckpointError
from laya.sandbox.failures import FailureMemory, deterministic
from laya.sandbox.pool import WorkerError


def test_only_deterministic_failures_are_remembered() -> None:
    memory = FailureMemory(cap=8)
    kept = {kind: memory.remember(kind, WorkerError(kind, f"{kind} message"))
            for kind in ("memory", "cpu", "signal", "timeout", "died", "busy")}  # fmt: skip
    assert kept == {"memory": True, "cpu": True, "signal": False, "timeout": False, "died": False, "busy": False}
    assert memory.remember("refused", CheckpointError("head.tau = -1: must be in [0.001, 1000]"))
    assert not memory.remember("other", RuntimeError("anything else"))
    assert memory.get("refused") == "head.tau = -1: must be in [0.001, 1000]" and memory.get("timeout") is None
    assert len(memory) == 3 and not deterministic(ValueError("x")) and deterministic(CheckpointError("x"))


def test_the_memory_is_bounded_least_recently_used_out() -> None:
    memory = FailureMemory(cap=3)
    for key in "abc":
        memory.remember(key, CheckpointError(key))
    assert memory.get("a") == "a"  # used: now the most recent
    memory.remember("d", CheckpointError("d"))
    assert [memory.get(k) for k in "abcd"] == ["a", None, "c", "d"] and len(memory) == 3
    for i in range(1000):
        memory.remember(i, CheckpointError(str(i)))
    assert len(memory) == 3 and memory.get(999) == "999"
    with pytest.raises(ValueError, match="cap = 0"):
        FailureMemory(cap=0)
