"""An uploaded checkpoint: which uploaded files make it, its check before a byte is written, and the store
that keeps it.

A checkpoint upload is ``model.json`` and ``model.safetensors``. Any other file is ignored: a path-like name
(``../model.json``, ``a\\model.json``: the store writes plain names only), a file of another kind, another
``.json``/``.safetensors`` name, a second file of one name (the first is used). Nothing is ignored silently:
:meth:`SortedUpload.message` names every ignored file, and the sidebar shows it.

The kept files are checked completely (:func:`check_upload`: :func:`laya.model.checkpoint.check_model`,
sha256) before a byte is written, then kept in one per-process folder (:class:`UploadStore`). The
dashboard runs the check in a sandboxed worker (:func:`laya.sandbox.client.check_upload_in_worker`, which
runs :func:`check_upload` there); the sidebar is where the worker's check is chosen.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from laya import settings
from laya.app.deploy import max_checkpoint_mb, release_memory
from laya.model.checkpoint import (
    META_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    CheckpointMeta,
    Confinement,
    check_confined,
    check_model,
    parse_meta,
)

KINDS = (".json", ".safetensors")


@dataclass(frozen=True)
class SortedUpload:
    """``files``: the checkpoint files kept (name -> bytes); ``ignored``: ``(name, reason)`` of every other
    uploaded file, in upload order."""

    files: dict[str, bytes] = field(default_factory=dict)
    ignored: tuple[tuple[str, str], ...] = ()

    def message(self) -> str | None:
        """One sentence naming every ignored file and why (names as ``repr``), or None when none is."""
        if not self.ignored:
            return None
        count = len(self.ignored)
        named = "; ".join(f"{name!r} ({reason})" for name, reason in self.ignored)
        return (
            f"Ignored {count} uploaded file{'s' if count > 1 else ''}: {named}. "
            f"A checkpoint upload is {META_FILE} and {WEIGHTS_FILE} from one checkpoint directory."
        )


def ignored_reason(name: str, kept: Iterable[str]) -> str | None:
    """Why an uploaded file named ``name`` is ignored, given the names already kept; None if it is kept."""
    if not name or name in (".", "..") or any(c in name for c in "/\\\0"):
        return "a path, not a plain file name"
    if not name.lower().endswith(KINDS):
        return f"not a {' or '.join(KINDS)} file"
    if name not in (META_FILE, WEIGHTS_FILE):
        return f"not named {META_FILE} or {WEIGHTS_FILE}"
    if name in kept:
        return f"a second {name}; the first one is used"
    return None


def sort_upload(uploads: Iterable[tuple[str, bytes]]) -> SortedUpload:
    """Split uploaded ``(name, bytes)`` pairs into the checkpoint files kept and the files ignored."""
    files: dict[str, bytes] = {}
    ignored = []
    for name, data in uploads:
        reason = ignored_reason(name, files)
        if reason is None:
            files[name] = data
        else:
            ignored.append((name, reason))
    return SortedUpload(files, tuple(ignored))


def check_upload(files: Mapping[str, bytes]) -> CheckpointMeta:
    """Everything about an uploaded checkpoint that needs no disk: names, sizes, metadata, budget, sha256.

    Raises:
        CheckpointError: naming the problem; nothing has been written or allocated.
    """
    names = sorted(files)
    if names != sorted((META_FILE, WEIGHTS_FILE)):
        raise CheckpointError(
            f"upload exactly two files, {META_FILE} and {WEIGHTS_FILE}, from one checkpoint directory; got {names or 'none'}"
        )
    limit = max_checkpoint_mb()
    for name, data in files.items():
        if len(data) > limit * 2**20:
            raise CheckpointError(f"{name} is {len(data) / 2**20:.0f} MB; the checkpoint upload limit is {limit} MB")
    record = parse_meta(files[META_FILE])
    expected = record.get("weights", {}).get("sha256")
    if expected and hashlib.sha256(files[WEIGHTS_FILE]).hexdigest() != expected:
        raise CheckpointError(
            f"{WEIGHTS_FILE} does not match {META_FILE} (sha256 differs): not the pair of one checkpoint"
        )
    meta = check_model(record, files[WEIGHTS_FILE])
    pending = Path(tempfile.gettempdir()) / "laya-upload-pending"  # not created: only its name is compared
    check_confined(meta, Confinement(pending), pending, exists=False)
    return meta


class UploadStore:
    """Uploaded checkpoints of this process: one folder, a total size cap, a per-session cap, a time to live.

    ``store`` checks an upload (``check``, default :func:`check_upload`; the dashboard runs it in a
    sandboxed worker) before writing it to a new folder owned by a session. A timer thread
    (:meth:`start_sweeper`, every ``period`` seconds, independent of any session's events) deletes
    folders older than ``ttl`` and those whose owner has not been alive (``alive(owner)``) for
    ``grace`` seconds, so a closed browser's upload is gone within ``grace + period`` seconds; each
    deletion calls ``on_discard(folder)`` (the dashboard drops the model from its workers), and each gone
    owner ``on_gone(owner)`` (the dashboard drops the session's uploaded bytes from Streamlit). One
    session holds at most ``session_cap`` bytes, and a full store first deletes the uploads of
    sessions that are gone, so leftovers cannot fill the space another session needs.
    """

    def __init__(
        self,
        root: Path | None = None,
        cap_bytes: int | None = None,
        ttl: float | None = None,
        session_cap: int | None = None,
        grace: float | None = None,
        on_discard: Callable[[Path], None] | None = None,
    ) -> None:
        parent = settings.path("LAYA_UPLOAD_DIR")
        self.root = root or Path(tempfile.mkdtemp(prefix=f"laya-uploads-{os.getpid()}-", dir=parent))
        self.root.mkdir(parents=True, exist_ok=True)
        self.cap = cap_bytes if cap_bytes is not None else int(settings.number("LAYA_UPLOAD_CAP_MB") * 2**20)
        self.session_cap = (
            session_cap if session_cap is not None else int(settings.number("LAYA_UPLOAD_SESSION_MB") * 2**20)
        )
        self.ttl = ttl if ttl is not None else settings.number("LAYA_UPLOAD_TTL")
        self.grace = grace if grace is not None else settings.number("LAYA_UPLOAD_GRACE")
        self.on_discard = on_discard
        self.alive: Callable[[str], bool] | None = None  # set by the app: is this session still connected?
        self.on_gone: Callable[[str], None] | None = None  # set by the app: release what a gone session holds
        self.owners: dict[Path, str] = {}
        self._gone_since: dict[str, float] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None

    def used(self, owner: str | None = None) -> int:
        """Bytes stored (by ``owner`` only, if given)."""
        folders = [d for d, o in self.owners.items() if o == owner] if owner is not None else [self.root]
        return sum(f.stat().st_size for d in folders for f in d.rglob("*") if f.is_file())

    def _gone(self, now: float) -> set[str]:
        """Owners not alive for at least ``grace`` seconds (first seen gone: the clock starts)."""
        if self.alive is None:
            return set()
        gone = set()
        for owner in set(self.owners.values()):
            if owner and not self.alive(owner):
                since = self._gone_since.setdefault(owner, now)
                if now - since >= self.grace:
                    gone.add(owner)
            else:
                self._gone_since.pop(owner, None)
        return gone

    def sweep(self, now: float | None = None) -> int:
        """Delete checkpoints older than the TTL and those of sessions gone for ``grace`` seconds; returns how many."""
        with self._lock:
            now = time.time() if now is None else now
            gone = self._gone(now)
            old = [d for d in self.root.iterdir() if d.is_dir() and (now - d.stat().st_mtime > self.ttl
                                                                   or self.owners.get(d) in gone)]  # fmt: skip
            for directory in old:
                self.discard(directory)
            for owner in gone if self.on_gone is not None else ():
                self.on_gone(owner)
            if old:
                release_memory()
            for owner in gone - set(self.owners.values()):
                self._gone_since.pop(owner, None)
            return len(old)

    def store(
        self, files: Mapping[str, bytes], owner: str = "", check: Callable[[Mapping[str, bytes]], object] = check_upload
    ) -> Path:
        """Check an upload, then write it to a new folder owned by ``owner``; returns the folder.

        Raises:
            CheckpointError: the upload fails ``check``, the session's share or the store is full.
        """
        check(files)
        size = sum(len(d) for d in files.values())
        with self._lock:
            self.sweep()
            if owner and self.used(owner) + size > self.session_cap:
                raise CheckpointError(
                    f"this session's uploaded checkpoints would exceed {self.session_cap / 2**20:.0f} MB; "
                    "reload the page to start over"
                )
            if self.used() + size > self.cap:
                raise CheckpointError(
                    f"the server's space for uploaded checkpoints ({self.cap / 2**20:.0f} MB) is full; try again later"
                )
            directory = Path(tempfile.mkdtemp(prefix="upload-", dir=self.root))
            for name, data in files.items():
                (directory / name).write_bytes(data)
            self.owners[directory] = owner
        return directory

    def discard(self, directory: str | Path) -> None:
        """Delete one stored checkpoint (only folders inside this store), then call ``on_discard``."""
        directory = Path(directory)
        if directory.parent != self.root:
            return
        with self._lock:
            self.owners.pop(directory, None)
            shutil.rmtree(directory, ignore_errors=True)
        if self.on_discard is not None:
            self.on_discard(directory)

    def start_sweeper(self, period: float | None = None) -> None:
        """Run :meth:`sweep` every ``period`` seconds (``LAYA_UPLOAD_SWEEP``, default 10) on a daemon thread."""
        period = period if period is not None else settings.number("LAYA_UPLOAD_SWEEP")
        with self._lock:
            if self._sweeper is not None:
                return
            self._sweeper = threading.Thread(target=self._sweep_every, args=(period,), name="laya-upload-sweeper",
                                             daemon=True)  # fmt: skip
            self._sweeper.start()

    def _sweep_every(self, period: float) -> None:
        while not self._stop.wait(period):
            try:
                self.sweep()
            except OSError:  # the folder vanished under us (shutdown); try again next time
                continue

    def close(self) -> None:
        self._stop.set()
        shutil.rmtree(self.root, ignore_errors=True)


_STORE: UploadStore | None = None


def upload_store() -> UploadStore:
    """The process's :class:`UploadStore` (created on first use with its sweeper running; deleted at exit).

    A deleted upload's model is dropped from the sandboxed workers (:func:`laya.sandbox.pool.forget`).
    """
    global _STORE
    if _STORE is None:
        from laya.sandbox.pool import forget

        _STORE = UploadStore(on_discard=lambda folder: forget(str(folder)))
        _STORE.start_sweeper()
        atexit.register(_STORE.close)
    return _STORE


__all__ = ["KINDS", "SortedUpload", "UploadStore", "check_upload", "ignored_reason", "sort_upload", "upload_store"]
