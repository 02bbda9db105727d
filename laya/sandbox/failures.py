"""Which failures of a checkpoint are worth remembering, and a bounded memory of them.

A refusal (:class:`CheckpointError`: a bad field, a model whose code fails) and a model past the
worker's memory or CPU-time limit fail the same way on every try: remembering them spares the
server a rebuild (and a worker a restart) on every rerun of a page. A worker ended by a signal,
a request past the wall-clock timeout (a loaded machine) or a busy pool may pass on the next try,
so they are never remembered: one such failure must not break a model for every visitor.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from laya.model.validation import CheckpointError
from laya.sandbox.pool import WorkerError


def deterministic(error: BaseException) -> bool:
    """Whether ``error`` would happen again on the same checkpoint: a refusal, or a worker's memory or CPU limit."""
    if isinstance(error, WorkerError):
        return not error.transient
    return isinstance(error, CheckpointError)


class FailureMemory:
    """Messages of deterministic failures by key, at most ``cap`` of them, least recently used out; thread-safe."""

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError(f"a failure memory holds at least 1 entry; got cap = {cap}")
        self.cap = cap
        self._messages: OrderedDict[Hashable, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> str | None:
        """The remembered message for ``key`` (now the most recently used), or None."""
        with self._lock:
            if key not in self._messages:
                return None
            self._messages.move_to_end(key)
            return self._messages[key]

    def remember(self, key: Hashable, error: BaseException) -> bool:
        """Keep ``str(error)`` for ``key`` if the failure is :func:`deterministic`; returns whether it was kept."""
        if not deterministic(error):
            return False
        with self._lock:
            self._messages[key] = str(error)
            self._messages.move_to_end(key)
            while len(self._messages) > self.cap:
                self._messages.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._messages)


__all__ = ["FailureMemory", "deterministic"]
