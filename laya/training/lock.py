"""An exclusive lock on a training output folder, so two ``train`` runs never write the same ``--out``.

The lock is a file ``OUT/.laya-train.lock`` holding the owner's pid, created with ``O_EXCL``.
A lock whose process is gone (killed with ``kill -9``, machine rebooted) is stale and taken over,
so ``--resume`` after a crash works without manual clean-up.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".laya-train.lock"


class OutputLockedError(RuntimeError):
    """Another live process is training into the same output folder."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _owner(lock: Path) -> int | None:
    try:
        return int(lock.read_text().strip() or "0") or None
    except (OSError, ValueError):
        return None


@contextmanager
def output_lock(out: str | Path) -> Iterator[Path]:
    """Hold ``out``'s lock for the ``with`` block; a stale lock (dead pid) is taken over.

    Raises:
        OutputLockedError: a live process (named by pid) holds the lock.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK_FILE
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pid = _owner(lock)
            if pid is not None and pid != os.getpid() and _alive(pid):
                raise OutputLockedError(
                    f"{out} is being written by another train process (pid {pid}); wait for it to finish, "
                    f"or choose another --out (the lock is {lock})"
                ) from None
            lock.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        break
    else:
        raise OutputLockedError(f"could not take the lock {lock}; another process keeps recreating it")
    try:
        yield lock
    finally:
        if _owner(lock) == os.getpid():
            lock.unlink(missing_ok=True)


__all__ = ["LOCK_FILE", "OutputLockedError", "output_lock"]
