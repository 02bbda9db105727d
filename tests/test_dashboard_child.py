"""The guard of ``laya dashboard``'s Streamlit child (laya/dashboard_child.py), in real processes: the portable
watch ends a child whose parent was SIGKILLed, and a child whose launcher is already gone exits at once.
The whole launcher killed by SIGKILL is tests/cli/test_cli.py::test_dashboard_server_ends_with_a_launcher_killed_by_sigkill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from laya import dashboard_child

# the module alone (stdlib only), so that a child starts in well under a second, with no torch import
LOAD = (
    "import importlib.util, sys; "
    f"spec = importlib.util.spec_from_file_location('guard', {str(Path(dashboard_child.__file__))!r}); "
    "guard = importlib.util.module_from_spec(spec); spec.loader.exec_module(guard); "
)


def ended(pid: int) -> bool:
    """Whether ``pid`` has exited (gone, or a zombie that no init reaps in this container)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def end_group(process: subprocess.Popen) -> None:
    """SIGKILL what is left of ``process``'s session (started with ``start_new_session``), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from Linux's /proc")
def test_the_portable_watch_ends_a_child_whose_parent_was_killed() -> None:
    """The fallback alone (no prctl): a parent ended by SIGKILL; its child, which watches it, ends within a second."""
    # the parent's pid is read before the child says it is ready: read after, a parent killed in between would be
    # the init process the child was handed to, and the watch would wait on that one (a race seen under load)
    child = LOAD + "import os; p = os.getppid(); print(os.getpid(), flush=True); guard.watch(p, poll=0.05, grace=2)"
    parent_code = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)"
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)  # fmt: skip
    try:
        watched = int(parent.stdout.readline())
        assert not ended(watched)
        parent.kill()
        parent.wait(timeout=10)
        killed = time.monotonic()
        while not ended(watched) and time.monotonic() - killed < 10:
            time.sleep(0.02)
        took = time.monotonic() - killed
        assert ended(watched) and took < 1.5, f"the child outlived its parent by {took:.1f} s"
    finally:
        end_group(parent)


def test_a_child_whose_launcher_is_already_gone_exits_at_once() -> None:
    """The race between the fork and the prctl: a launcher gone by then sends no signal, so the guard exits."""
    gone = subprocess.run([sys.executable, "-c", LOAD + "import os; guard.guard(os.getppid() + 1); print('ran')"],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert gone.returncode == dashboard_child.ORPHANED and "ran" not in gone.stdout, gone.stderr
    ours = subprocess.run([sys.executable, "-c", LOAD + "import os; guard.guard(os.getppid()); print('ran')"],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert ours.returncode == 0 and ours.stdout == "ran\n", ours.stderr
