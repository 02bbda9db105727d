"""Deployment settings of the dashboard and the rules for what visitors may load.

Environment (all optional):

``LAYA_MODELS``            folder of bundled checkpoints (default ``models/`` next to ``app.py``)
``LAYA_ALLOW_PATHS``       ``1`` (default) shows the "Path on this machine" box; ``0`` removes it (Docker default)
``LAYA_PATH_ROOTS``        extra folders (``os.pathsep``-separated) the path box and checkpoint datasets may use
``LAYA_MAX_CHECKPOINT_MB`` upload limit per checkpoint file (default 200; images keep their own 20 MB limit)
``LAYA_UPLOAD_CAP_MB``     all uploaded checkpoints of this process together (default 2000)
``LAYA_UPLOAD_TTL``        seconds an uploaded checkpoint is kept (default 3600; also deleted when its session ends)
``LAYA_ALLOW_IMPORT``      ``1``: wrapped-module checkpoints inside ``LAYA_MODELS`` may import the code path they record
                           (``laya dashboard --allow-import``; default off, never for uploads or other roots)

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
from collections.abc import Mapping
from pathlib import Path

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


def _env_number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def models_root() -> Path:
    """Folder of bundled checkpoints (``LAYA_MODELS``, default ``models/``)."""
    return Path(os.environ.get("LAYA_MODELS", APP_DIR / "models"))


def allow_paths() -> bool:
    """Whether visitors may type a server path (``LAYA_ALLOW_PATHS``, default on; ``0`` in the Docker image)."""
    return os.environ.get("LAYA_ALLOW_PATHS", "1").strip().lower() not in ("0", "false", "no", "off", "")


def allow_import() -> bool:
    """Whether wrapped-module checkpoints in the operator's ``LAYA_MODELS`` may import their code (``LAYA_ALLOW_IMPORT=1``)."""
    return os.environ.get("LAYA_ALLOW_IMPORT", "0").strip().lower() in ("1", "true", "yes", "on")


def path_roots() -> list[Path]:
    """Folders a typed path may resolve into: ``LAYA_MODELS`` then ``LAYA_PATH_ROOTS``."""
    extra = [Path(p) for p in os.environ.get("LAYA_PATH_ROOTS", "").split(os.pathsep) if p]
    return [models_root(), *extra]


def data_roots() -> tuple[Path, ...]:
    """Folders a checkpoint's ImageFolder ``dataset`` may be in: the dataset folders and :func:`path_roots`."""
    return (*data_dirs(), *path_roots())


def max_checkpoint_mb() -> int:
    """Upload limit per checkpoint file, in MB (``LAYA_MAX_CHECKPOINT_MB``, default 200)."""
    return max(1, int(_env_number("LAYA_MAX_CHECKPOINT_MB", 200)))


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
    """Uploaded checkpoints of this process: one folder, a total size cap, a time to live.

    ``store`` checks (:func:`check_upload`) before writing; ``discard`` deletes one checkpoint (a
    session ended); checkpoints older than ``ttl`` seconds are deleted on every ``store``.
    """

    def __init__(self, root: Path | None = None, cap_bytes: int | None = None, ttl: float | None = None) -> None:
        self.root = root or Path(tempfile.mkdtemp(prefix=f"laya-uploads-{os.getpid()}-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.cap = cap_bytes if cap_bytes is not None else int(_env_number("LAYA_UPLOAD_CAP_MB", 2000) * 2**20)
        self.ttl = ttl if ttl is not None else _env_number("LAYA_UPLOAD_TTL", 3600)
        self._lock = threading.Lock()

    def used(self) -> int:
        return sum(f.stat().st_size for f in self.root.glob("*/*") if f.is_file())

    def sweep(self, now: float | None = None) -> int:
        """Delete checkpoints older than the TTL; returns how many."""
        now = time.time() if now is None else now
        old = [d for d in self.root.iterdir() if d.is_dir() and now - d.stat().st_mtime > self.ttl]
        for directory in old:
            shutil.rmtree(directory, ignore_errors=True)
        return len(old)

    def store(self, files: Mapping[str, bytes]) -> Path:
        """Check an upload, then write it to a new folder; returns the folder.

        Raises:
            CheckpointError: the upload fails :func:`check_upload`, or the store is full.
        """
        check_upload(files)
        size = sum(len(d) for d in files.values())
        with self._lock:
            self.sweep()
            if self.used() + size > self.cap:
                raise CheckpointError(
                    f"the server's space for uploaded checkpoints ({self.cap / 2**20:.0f} MB) is full; try again later"
                )
            directory = Path(tempfile.mkdtemp(prefix="upload-", dir=self.root))
            for name, data in files.items():
                (directory / name).write_bytes(data)
        return directory

    def discard(self, directory: str | Path) -> None:
        """Delete one stored checkpoint (only folders inside this store)."""
        directory = Path(directory)
        if directory.parent == self.root:
            shutil.rmtree(directory, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


_STORE: UploadStore | None = None


def upload_store() -> UploadStore:
    """The process's :class:`UploadStore` (created on first use, deleted at exit)."""
    global _STORE
    if _STORE is None:
        _STORE = UploadStore()
        atexit.register(_STORE.close)
    return _STORE


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
    "upload_store",
]
