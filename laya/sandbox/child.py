"""Entry point of a sandboxed worker process (started by :class:`laya.sandbox.pool.WorkerPool`).

Run as a script, this file imports only the standard library until the process is confined:

1. **Network.** ``unshare(CLONE_NEWUSER | CLONE_NEWNET)`` (or ``CLONE_NEWNET`` alone where the
   process may already do so, e.g. as root) moves the worker into an empty network namespace: no
   interface but a down loopback, so every ``connect`` fails in the kernel. It must run while the
   process has one thread, i.e. before torch is imported. Where namespaces are not permitted
   (macOS, Windows, containers without user namespaces) an audit hook (:func:`sys.addaudithook`)
   refuses ``socket.connect``, ``socket.bind``, ``socket.sendto``, ``socket.getaddrinfo`` and
   ``socket.gethostbyname``; the hook is installed in every case. It binds Python code (urllib,
   torchvision's downloads, hub loaders), not native code that opens sockets itself.
2. **Memory, CPU, files.** After the imports: ``RLIMIT_AS`` = the address space then in use plus
   ``LAYA_WORKER_MEMORY_MB`` (default 4096), so an over-budget model fails its allocation;
   ``RLIMIT_NOFILE`` = ``LAYA_WORKER_FILES`` (default 64); ``RLIMIT_CPU`` is set per request by
   :mod:`laya.sandbox.serve` (``LAYA_WORKER_CPU_S``, default 120 CPU-seconds), so a runaway request
   is killed by ``SIGXCPU``. The ``resource`` limits hold on Linux and macOS; none of this applies
   on Windows, where the pool still gives process isolation and wall-clock timeouts.

Then :func:`laya.sandbox.serve.serve` answers requests on stdin/stdout (:mod:`laya.sandbox.protocol`);
the original stdout is kept for frames and fd 1 points to stderr, so a stray ``print`` cannot
corrupt the stream.
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
BLOCKED_EVENTS = frozenset(
    {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo", "socket.gethostbyname"}
)


def _unshare(flags: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(flags) == 0
    except (OSError, AttributeError):  # not Linux, or no unshare in this libc
        return False


def _refuse_network(event: str, args: tuple) -> None:
    if event in BLOCKED_EVENTS:
        raise PermissionError(f"network access is disabled in the LAYA worker ({event})")


def isolate_network() -> str:
    """Cut the process off the network as far as the platform allows; returns what holds (see module doc)."""
    if sys.platform.startswith("linux") and (_unshare(CLONE_NEWNET) or _unshare(CLONE_NEWUSER | CLONE_NEWNET)):
        how = "network namespace"
    else:
        how = "audit hook"
    sys.addaudithook(_refuse_network)
    return how if how == "audit hook" else f"{how} + audit hook"


def address_space() -> int:
    """Bytes of address space this process uses now (``VmSize``), 0 where unknown."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError):
        return 0


def limit_resources(memory_mb: int, open_files: int) -> dict[str, int]:
    """Set ``RLIMIT_AS`` (address space in use + ``memory_mb``) and ``RLIMIT_NOFILE``; returns what was set."""
    import resource

    limits = {}
    used = address_space()
    if used:
        limit = used + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        limits["address_space"] = limit
    files = min(open_files, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))
    limits["open_files"] = files
    return limits


def main() -> None:
    network = isolate_network()
    frames = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints go to the server log, not into the frame stream
    sys.stdout = sys.stderr
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)  # run by path: this folder's modules must not shadow top-level names
    from laya import settings
    from laya.sandbox.serve import serve  # torch and laya, imported once confined

    limits = limit_resources(settings.integer("LAYA_WORKER_MEMORY_MB"), settings.integer("LAYA_WORKER_FILES"))
    serve(sys.stdin.buffer, frames, {"network": network, **limits}, settings.integer("LAYA_WORKER_CPU_S"))


if __name__ == "__main__":
    main()
