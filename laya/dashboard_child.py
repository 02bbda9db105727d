"""The Streamlit child of ``laya dashboard``: it ends with its launcher, whatever ends the launcher.

``python -m laya.dashboard_child PARENT_PID ARGS...`` arms :func:`guard` and then runs ``streamlit ARGS...``
in this process. SIGTERM and SIGINT reach the child through the launcher (:func:`laya.dashboard.run`); a
launcher ended by SIGKILL (the OOM killer, a supervisor that kills only the main process) forwards nothing,
and without the guard its server went on serving the port. The guard:

* on Linux asks the kernel for SIGTERM when the launcher dies (``prctl(PR_SET_PDEATHSIG)``, kept across exec;
  it fires when the thread that started the child ends, which in the launcher is its main thread);
* everywhere (the portable fallback) checks every ``POLL_S`` seconds on a daemon thread that the launcher is
  still this process's parent: an orphan is reparented, so ``os.getppid()`` changes. Then it sends this
  process SIGTERM (Streamlit stops its server), and SIGKILL ``GRACE_S`` seconds later if it is still alive;
* ends the child at once if the launcher was already gone before the guard was armed (the race between the
  fork and the ``prctl``).

Windows keeps a process's first parent id after that parent is gone, so there only the launcher's own
handlers stop the child.
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_S = 0.5
GRACE_S = 5.0
ORPHANED = 128 + signal.SIGTERM  # exit status of a child whose launcher was gone before the guard was armed


def parent_death_signal(signum: int) -> bool:
    """Ask Linux to send ``signum`` to this process when its parent dies; False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def watch(parent: int, poll: float = POLL_S, grace: float = GRACE_S) -> None:
    """Block while ``parent`` is this process's parent; then SIGTERM this process, and SIGKILL after ``grace``."""
    while os.getppid() == parent:
        time.sleep(poll)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace)
    os.kill(os.getpid(), signal.SIGKILL)


def guard(parent: int, poll: float = POLL_S, grace: float = GRACE_S) -> None:
    """End this process when ``parent`` (the launcher's pid) ends: see the module docstring.

    Raises:
        SystemExit: ``ORPHANED``, if ``parent`` is already not this process's parent.
    """
    parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent:  # the launcher died before the prctl: no signal will ever come
        raise SystemExit(ORPHANED)
    if os.name == "posix":
        threading.Thread(target=watch, args=(parent, poll, grace), name="laya-launcher-watch", daemon=True).start()


def main(argv: list[str]) -> None:
    """``PARENT_PID ARGS...``: arm the guard, then run ``streamlit ARGS...`` as ``python -m streamlit`` would."""
    if len(argv) < 2 or not argv[0].isdigit():
        raise SystemExit(f"usage: python -m laya.dashboard_child PARENT_PID STREAMLIT_ARGS...; given: {argv}")
    guard(int(argv[0]))
    sys.argv = ["streamlit", *argv[1:]]
    runpy.run_module("streamlit", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
