"""Processes of a running dashboard, from Linux's /proc: the streamlit server, its sandboxed workers, their memory."""

from __future__ import annotations

import os
from pathlib import Path


def children(pid: int) -> list[tuple[int, bytes]]:
    """``(pid, command line)`` of the live (not zombie) child processes of ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append((int(stat.parent.name), (stat.parent / "cmdline").read_bytes()))
        except (OSError, ValueError):
            continue
    return found


def server_pid(parent: int | None = None) -> int:
    """The streamlit server started by ``parent`` (default: this process)."""
    return next(pid for pid, cmd in children(parent or os.getpid()) if b"streamlit" in cmd)


def workers(server: int) -> list[int]:
    """The server's sandboxed worker processes (:mod:`laya.sandbox.child`)."""
    return [pid for pid, cmd in children(server) if b"sandbox/child.py" in cmd]


def memory_mb(pid: int) -> dict[str, float]:
    """``rss`` (VmRSS) and ``peak`` (VmHWM) of a process, in MB; zeros if it is gone."""
    try:
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    except (OSError, ValueError):
        return {"rss": 0.0, "peak": 0.0}
    return {"rss": int(status["VmRSS"].split()[0]) / 1024, "peak": int(status["VmHWM"].split()[0]) / 1024}
