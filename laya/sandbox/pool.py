"""A bounded pool of sandboxed worker processes for untrusted checkpoints (:mod:`laya.sandbox.child`).

The server never loads an uploaded or typed checkpoint itself: it asks a worker, which loads it
under OS limits and without network, runs the analysis and replies with JSON and safetensors
(:mod:`laya.sandbox.protocol`). The pool:

- starts at most ``size`` workers (``LAYA_WORKERS``, default 2), lazily, and routes a request to
  the worker that already holds its model, else to an idle one; when all are busy a request waits
  up to ``queue_timeout`` seconds, then gets :class:`WorkerError` ("busy");
- gives every request ``timeout`` seconds of wall-clock time (``LAYA_WORKER_TIMEOUT``, default
  120); a worker that runs past it, runs out of memory (``RLIMIT_AS``), past its CPU time
  (``SIGXCPU``) or is ended by any other signal is removed, and the visitor gets a :class:`WorkerError`
  that says which (:func:`death`); a fresh worker is started at once in the background;
- replaces an idle worker that died (checked by the timer thread, and again before a request is
  routed to it), so that the next request does not fail for it;
- ends a worker idle for ``idle_timeout`` seconds (``LAYA_WORKER_IDLE``, default 300) from a timer
  thread, and one whose last model was forgotten (:meth:`WorkerPool.forget`), so their memory goes
  back to the OS.
"""

from __future__ import annotations

import atexit
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from laya import settings
from laya.sandbox.protocol import HEADER, ProtocolError, check_header, encode, parse_json

LOG = logging.getLogger("laya.sandbox")
CHILD = Path(__file__).with_name("child.py")
Progress = Callable[[float, str], None]
_OUT_OF_MEMORY = "the model needs more memory than this server allows per worker ({:.0f} MB)"


class WorkerError(RuntimeError):
    """A worker could not answer: it died, ran out of memory or time, or every worker is busy.

    ``kind``: ``memory`` (``RLIMIT_AS``), ``cpu`` (``RLIMIT_CPU``), ``signal`` (ended by another signal),
    ``timeout``, ``died`` (exited, broke the protocol, or did not start), ``busy``; the message is for the
    visitor. Memory and CPU time are limits of the model itself, the same on every try; the others are
    :attr:`transient`.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def transient(self) -> bool:
        """Whether trying again may succeed (a signal, the wall-clock timeout, a busy pool, a failed start)."""
        return self.kind not in ("memory", "cpu")


class Refused(RuntimeError):
    """The worker refused a request and stays usable (a bad checkpoint, image or dataset): ``kind``, message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class PoolConfig:
    """Pool size, per-request wall-clock limit, wait for a free worker, idle release, worker start-up limit (s)."""

    size: int = 2
    timeout: float = 120.0
    queue_timeout: float = 30.0
    idle_timeout: float = 300.0
    startup_timeout: float = 120.0
    env: dict[str, str] = field(default_factory=dict)  # extra environment of the workers (limits, threads)

    @classmethod
    def from_env(cls) -> PoolConfig:
        return cls(
            size=settings.integer("LAYA_WORKERS"),
            timeout=settings.number("LAYA_WORKER_TIMEOUT"),
            queue_timeout=settings.number("LAYA_WORKER_QUEUE_TIMEOUT"),
            idle_timeout=settings.number("LAYA_WORKER_IDLE"),
        )


class Worker:
    """One worker process and its pipes; used by one request at a time (the pool's lock decides)."""

    def __init__(self, config: PoolConfig) -> None:
        path = os.pathsep.join(os.path.abspath(p or ".") for p in sys.path)  # the server's imports, cwd included
        env = {**os.environ, "MALLOC_ARENA_MAX": "2", "PYTHONPATH": path, **config.env}
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True
        )
        self.models: set[str] = set()  # paths whose model this worker holds
        self.busy = False
        self.last_used = time.monotonic()
        try:
            self.hello = self._receive(time.monotonic() + config.startup_timeout, None)[0]
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self, n: int, deadline: float) -> bytes:
        fd, chunks, left = self.process.stdout.fileno(), [], n
        while left:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _receive(self, deadline: float, progress: Progress | None) -> tuple[dict[str, Any], bytes]:
        """The next reply, passing progress frames to ``progress``."""
        while True:
            n_json, n_blob = check_header(self._read(HEADER.size, deadline))
            message = parse_json(self._read(n_json, deadline))
            blob = self._read(n_blob, deadline)
            if "progress" in message and "ok" not in message:
                if progress is not None:
                    progress(float(message["progress"]), str(message.get("text", "")))
                continue
            return message, blob

    def request(
        self, message: dict[str, Any], blob: bytes, timeout: float, progress: Progress | None = None
    ) -> tuple[dict[str, Any], bytes]:
        """Send one request and wait for its reply. Raises ``TimeoutError``, ``EOFError``/``OSError``
        (the worker died) or :class:`ProtocolError`."""
        self.process.stdin.write(encode(message, blob))
        self.process.stdin.flush()
        return self._receive(time.monotonic() + timeout, progress)

    def stop(self) -> None:
        """End the process (its memory goes back to the OS) and reap it."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass


def death(code: int | None, memory_mb: float, cpu_s: float) -> WorkerError:
    """Why a worker stopped answering, in words for the visitor, from its exit status (``None``: it closed its
    pipe but had not exited within 5 s, and was ended). Each cause has its own wording."""
    if code is None:
        return WorkerError("died", "the model's worker stopped answering and was ended")
    if code == 3:
        return WorkerError("memory", _OUT_OF_MEMORY.format(memory_mb))
    if code == -signal.SIGXCPU:
        return WorkerError("cpu", f"the model used more than the {cpu_s:.0f} CPU-seconds this server allows a request")
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"number {-code}"
        return WorkerError(
            "signal", f"the model's worker was ended by signal {name}, not by this server's limits; try again"
        )
    return WorkerError("died", f"the model's worker exited unexpectedly with status {code}")


def _death(worker: Worker, memory_mb: float, cpu_s: float) -> WorkerError:
    try:
        code = worker.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        worker.stop()
        code = None
    return death(code, memory_mb, cpu_s)


class WorkerPool:
    """See the module docstring. Thread-safe: Streamlit runs each session's script in its own thread."""

    def __init__(self, config: PoolConfig | None = None) -> None:
        self.config = config or PoolConfig.from_env()
        self.memory_mb = self._limit("LAYA_WORKER_MEMORY_MB")
        self.cpu_s = self._limit("LAYA_WORKER_CPU_S")
        self.workers: list[Worker] = []
        self._lock = threading.Condition()
        self._closed = threading.Event()
        self._reaper = threading.Thread(target=self._reap, name="laya-worker-reaper", daemon=True)
        self._reaper.start()

    def _limit(self, name: str) -> float:
        """A worker limit as the workers see it: the pool's ``env``, else the server's environment."""
        configured = self.config.env.get(name)
        value = settings.parse(name, configured) if configured else settings.integer(name)
        return float(value)  # type: ignore[arg-type]

    # -------------------------------------------------------------- choosing a worker

    def _acquire(self, path: str | None) -> Worker:
        """A worker marked busy: the idle one holding ``path``'s model, else any idle one, else a new one
        while the pool has room; otherwise wait up to ``queue_timeout`` (``startup_timeout`` while a worker
        is starting). An idle worker found dead is dropped (and replaced), never handed out."""
        start = time.monotonic()
        with self._lock:
            while True:
                self._drop_dead()
                idle = [w for w in self.workers if not w.busy]
                holder = next((w for w in idle if path is not None and path in w.models), None)
                chosen = holder or (min(idle, key=lambda w: len(w.models)) if idle else None)
                if chosen is not None:
                    chosen.busy = True
                    return chosen
                if len(self.workers) < self.config.size:
                    slot = _Starting()
                    self.workers.append(slot)  # type: ignore[arg-type]  # holds the place while starting
                    break
                starting = any(isinstance(w, _Starting) for w in self.workers)
                left = start + (self.config.startup_timeout if starting else self.config.queue_timeout)
                if left - time.monotonic() <= 0:
                    raise WorkerError("busy", "every model worker of this server is busy; try again in a moment")
                self._lock.wait(left - time.monotonic())
        return self._start(slot, busy=True)

    def _start(self, slot: _Starting, busy: bool) -> Worker:
        """Start the worker that takes ``slot``'s place. Raises :class:`WorkerError` if it cannot start."""
        try:
            worker = Worker(self.config)
        except (OSError, EOFError, TimeoutError, ProtocolError) as error:
            with self._lock:
                self.workers.remove(slot)  # type: ignore[arg-type]
                self._lock.notify_all()
            LOG.error("a model worker failed to start: %s", error)
            raise WorkerError("died", "a model worker could not be started; see the server log") from error
        worker.busy = busy
        with self._lock:
            if slot not in self.workers:  # the pool was closed meanwhile
                worker.stop()
                raise WorkerError("died", "the server is shutting down")
            self.workers[self.workers.index(slot)] = worker  # type: ignore[arg-type]
            self._lock.notify_all()
        return worker

    def _drop_dead(self) -> None:
        """(Lock held.) Remove idle workers whose process has exited, and start their replacements."""
        dead = [w for w in self.workers if isinstance(w, Worker) and not w.busy and w.process.poll() is not None]
        for worker in dead:
            self.workers.remove(worker)
            reason = death(worker.process.returncode, self.memory_mb, self.cpu_s)
            LOG.warning("idle worker %s died: %s; starting another", worker.pid, reason)
            threading.Thread(target=worker.stop, daemon=True).start()  # reap it and close its pipes
            self._spare()

    def _spare(self) -> None:
        """(Lock held.) Start an idle worker in the background if the pool has room (after one was lost)."""
        if self._closed.is_set() or len(self.workers) >= self.config.size:
            return
        slot = _Starting()
        self.workers.append(slot)  # type: ignore[arg-type]

        def start() -> None:
            try:
                self._start(slot, busy=False)
            except WorkerError:
                pass  # logged; the next request starts one itself

        threading.Thread(target=start, name="laya-worker-spare", daemon=True).start()

    def _release(self, worker: Worker, failed: bool, replace: bool = False) -> None:
        """Mark ``worker`` idle; ``failed``: end it (``replace``: and start a spare in its place)."""
        with self._lock:
            worker.busy = False
            worker.last_used = time.monotonic()
            if failed and worker in self.workers:
                self.workers.remove(worker)
                if replace:
                    self._spare()
            self._lock.notify_all()
        if failed:
            worker.stop()

    # -------------------------------------------------------------- requests

    def call(
        self, message: dict[str, Any], blob: bytes = b"", progress: Progress | None = None
    ) -> tuple[dict[str, Any], bytes]:
        """One request on a worker; the reply's ``(JSON, blob)``.

        Raises:
            Refused: the worker refused (bad checkpoint, image, dataset, or the model's code failed: ``kind``
                ``error``); the message is the reason.
            WorkerError: no worker could answer (memory, CPU, signal, timeout, died, busy).
        """
        if self._closed.is_set():
            raise WorkerError("died", "the server is shutting down")
        path = message.get("path")
        worker = self._acquire(path)
        failed = True
        try:
            reply, data = worker.request(message, blob, self.config.timeout, progress)
        except TimeoutError:
            LOG.warning("worker %s timed out on %s", worker.pid, message.get("op"))
            raise WorkerError(
                "timeout", f"the model took longer than the {self.config.timeout:.0f} s this server allows per request"
            ) from None
        except ProtocolError:  # alive but confused: end it
            worker.stop()
            raise WorkerError("died", "the model's worker sent a malformed reply and was ended") from None
        except (EOFError, OSError):
            lost = _death(worker, self.memory_mb, self.cpu_s)
            LOG.warning("worker %s failed on %s: %s", worker.pid, message.get("op"), lost)
            raise lost from None
        else:
            if not reply.get("ok"):
                kind = str(reply.get("kind", "error"))
                if kind == "memory":  # the worker exits after saying so
                    raise WorkerError("memory", _OUT_OF_MEMORY.format(self.memory_mb))
                failed = False
                if kind == "error":
                    LOG.warning("worker %s: %s failed: %s", worker.pid, message.get("op"), reply.get("error"))
                raise Refused(kind, str(reply.get("error", "")))
            failed = False
            if path is not None and message.get("op") != "forget":
                worker.models.add(path)
            return reply, data
        finally:
            self._release(worker, failed, replace=True)

    def warm(self) -> None:
        """Start a worker now if none is running (a deployment may pay the start-up before the first visitor)."""
        self._release(self._acquire(None), failed=False)

    def forget(self, path: str) -> None:
        """Drop the model at ``path`` from every worker; a worker left without models is ended (memory freed)."""
        with self._lock:
            holders = [w for w in self.workers if path in w.models and not w.busy]
            for worker in holders:
                worker.busy = True
        for worker in holders:
            worker.models.discard(path)
            failed = not worker.models
            if not failed:
                try:
                    worker.request({"op": "forget", "path": path}, b"", self.config.timeout)
                except (TimeoutError, EOFError, OSError, ProtocolError):
                    failed = True
            self._release(worker, failed)

    def _reap(self) -> None:
        """Timer thread: end workers idle for longer than ``idle_timeout``; replace idle workers that died."""
        period = max(0.05, min(5.0, self.config.idle_timeout / 4))
        while not self._closed.wait(period):
            now = time.monotonic()
            with self._lock:
                self._drop_dead()
                idle = [w for w in self.workers if not w.busy and isinstance(w, Worker)
                        and now - w.last_used > self.config.idle_timeout]  # fmt: skip
                for worker in idle:
                    self.workers.remove(worker)
            for worker in idle:
                LOG.info("ending idle worker %s", worker.pid)
                worker.stop()

    def pids(self) -> list[int]:
        with self._lock:
            return [w.pid for w in self.workers if isinstance(w, Worker)]

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            workers, self.workers = list(self.workers), []
        for worker in workers:
            if isinstance(worker, Worker):
                worker.stop()


class _Starting:
    """A pool slot whose worker is being started (busy, holds no model)."""

    busy = True
    models: frozenset[str] = frozenset()
    last_used = 0.0


_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def worker_pool() -> WorkerPool:
    """The process's pool (created on first use, closed at exit)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = WorkerPool()
            atexit.register(_POOL.close)
        return _POOL


def forget(path: str) -> None:
    """Drop ``path``'s model from the process's pool, if there is one (an upload was deleted)."""
    if _POOL is not None:
        _POOL.forget(path)


__all__ = ["PoolConfig", "Refused", "Worker", "WorkerError", "WorkerPool", "forget", "worker_pool"]
