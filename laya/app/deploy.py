"""Deployment settings of the dashboard and the rules for what visitors may load.

Environment (all optional): ``LAYA_MODELS``, ``LAYA_ALLOW_PATHS``, ``LAYA_PATH_ROOTS``, ``LAYA_ALLOW_IMPORT``,
``LAYA_SANDBOX``, ``LAYA_MAX_CHECKPOINT_MB`` and the ``LAYA_UPLOAD_*`` limits, each with its default, bounds and
meaning in :data:`laya.settings.SETTINGS` and read through it.

A path typed by a visitor resolves only inside ``LAYA_MODELS`` + ``LAYA_PATH_ROOTS``, and every
refusal is the same :data:`PATH_REFUSED` sentence, whether or not the file exists, so the box
cannot be used to learn which server files exist. Uploaded checkpoints are checked completely
(:func:`laya.model.checkpoint.check_model`, sha256) before a byte is written, then kept in one
per-process folder (:class:`UploadStore`).
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import gc
import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from laya import settings
from laya.data.datasets import data_dirs
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
from laya.paths import PathRefused, canonical_path, inside

APP_DIR = Path(__file__).resolve().parents[2]
CHECKPOINT_FILES = (META_FILE, WEIGHTS_FILE)
PATH_REFUSED = (
    "No LAYA checkpoint at that path among the folders this server shares (LAYA_MODELS, LAYA_PATH_ROOTS). "
    "Give a checkpoint directory (holding model.json and model.safetensors) inside one of them."
)


def models_root() -> Path:
    """Folder of bundled checkpoints (``LAYA_MODELS``, default ``models/``)."""
    return settings.path("LAYA_MODELS") or APP_DIR / "models"


def allow_paths() -> bool:
    """Whether visitors may type a server path (``LAYA_ALLOW_PATHS``, default on; ``0`` in the Docker image)."""
    return settings.flag("LAYA_ALLOW_PATHS")


def allow_import() -> bool:
    """Whether wrapped-module checkpoints in the operator's ``LAYA_MODELS`` may import their code (``LAYA_ALLOW_IMPORT=1``)."""
    return settings.flag("LAYA_ALLOW_IMPORT")


def path_roots() -> list[Path]:
    """Folders a typed path may resolve into: ``LAYA_MODELS`` then ``LAYA_PATH_ROOTS``."""
    return [models_root(), *settings.paths("LAYA_PATH_ROOTS")]


def data_roots() -> tuple[Path, ...]:
    """Folders a checkpoint's ImageFolder ``dataset`` may be in: the dataset folders and :func:`path_roots`."""
    return (*data_dirs(), *path_roots())


def max_checkpoint_mb() -> int:
    """Upload limit per checkpoint file, in MB (``LAYA_MAX_CHECKPOINT_MB``, default 200)."""
    return settings.integer("LAYA_MAX_CHECKPOINT_MB")


def _root_of(path: str | Path, roots: list[Path]) -> Path | None:
    """The root holding ``path`` (:func:`laya.paths.canonical_path`: after symlinks and ``..``), or None."""
    return next((root for root in roots if inside(path, [root])), None)


def resolve_path(text: str, roots: list[Path] | None = None) -> Path:
    """The checkpoint directory a typed path names, if it lies inside ``roots`` (default :func:`path_roots`).

    Relative paths are taken from the first root; ``~`` is not expanded (:func:`laya.paths.canonical_path`).
    A path to ``model.json`` or ``model.safetensors`` means its directory.

    Raises:
        CheckpointError: :data:`PATH_REFUSED` for every refusal (outside the roots, missing, not a
            checkpoint, NUL bytes, over-long names, ``~``), so the answer says nothing about other files.
    """
    roots = path_roots() if roots is None else roots
    try:
        path = canonical_path(text, roots[0], roots)
    except PathRefused as error:
        raise CheckpointError(PATH_REFUSED) from error
    if path.name in CHECKPOINT_FILES:
        path = path.parent
    try:
        if not ((path / META_FILE).is_file() and (path / WEIGHTS_FILE).is_file()):
            raise CheckpointError(PATH_REFUSED)
    except OSError as error:
        raise CheckpointError(PATH_REFUSED) from error
    return path


def confinement(path: str | Path, uploads: Path | None = None) -> Confinement:
    """What a checkpoint loaded by the dashboard may point to: its upload folder, or the allowed root holding it."""
    uploaded = uploads is not None and inside(path, [uploads])
    root = uploads if uploaded else _root_of(path, path_roots())
    operators = not uploaded and root is not None and os.path.realpath(root) == os.path.realpath(models_root())
    return Confinement(
        weights_root=Path(root or path), data_roots=data_roots(), allow_import=operators and allow_import()
    )


def release_memory() -> None:
    """Give freed memory back to the OS after a failed load (glibc keeps freed arenas otherwise)."""
    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc:
        try:
            ctypes.CDLL(libc).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc
            pass


def check_upload(files: Mapping[str, bytes]) -> CheckpointMeta:
    """Everything about an uploaded checkpoint that needs no disk: names, sizes, metadata, budget, sha256.

    Raises:
        CheckpointError: naming the problem; nothing has been written or allocated.
    """
    names = sorted(files)
    if names != sorted(CHECKPOINT_FILES):
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


def sandboxed(path: str | Path) -> bool:
    """Whether a checkpoint is loaded and run only in a sandboxed worker (:mod:`laya.sandbox`): every
    checkpoint outside ``LAYA_MODELS`` (uploads, typed paths), and all of them with ``LAYA_SANDBOX=all``."""
    if settings.text("LAYA_SANDBOX") == "all":
        return True
    return not inside(path, [models_root()])


__all__ = [
    "PATH_REFUSED",
    "UploadStore",
    "allow_import",
    "allow_paths",
    "check_upload",
    "confinement",
    "data_roots",
    "max_checkpoint_mb",
    "models_root",
    "path_roots",
    "release_memory",
    "resolve_path",
    "sandboxed",
    "upload_store",
]
