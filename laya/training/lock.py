"""An exclusive lock on a training output folder, so two ``train`` runs never write the same ``--out``.

The lock is an OS file lock (``fcntl.flock``, exclusive, non-blocking) on ``OUT/.laya-train.lock``,
held for the whole run. Taking it is one atomic system call, so of many processes that start at
once exactly one holds it. The kernel releases it when its process exits, however it exits
(``kill -9``, a crash), so ``--resume`` after a crash needs no clean-up and no staleness guess: there
is no "dead owner" to detect, and an empty or garbled lock file means nothing. The file holds the
holder's pid only to name it in the refusal; it is left in place (deleting a lock file while another
process opens it would let two processes lock two different files).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".laya-train.lock"


class OutputLockedError(RuntimeError):
    """Another live process is training into the same output folder."""


def _owner(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"


@contextmanager
def output_lock(out: str | Path) -> Iterator[Path]:
    """Hold ``out``'s lock for the ``with`` block.

    Raises:
        OutputLockedError: another process (named by pid when it wrote it) holds the lock.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK_FILE
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputLockedError(
                f"{out} is being written by another train process (pid {_owner(fd)}); wait for it to finish, "
                f"or choose another --out (the lock is {lock})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            yield lock
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


__all__ = ["LOCK_FILE", "OutputLockedError", "output_lock"]
