"""Deployment settings of the dashboard and the rules for what visitors may load.

Environment (all optional): ``LAYA_MODELS``, ``LAYA_ALLOW_PATHS``, ``LAYA_PATH_ROOTS``, ``LAYA_ALLOW_IMPORT``,
``LAYA_SANDBOX``, ``LAYA_MAX_CHECKPOINT_MB`` and the ``LAYA_UPLOAD_*`` limits, each with its default, bounds and
meaning in :data:`laya.settings.SETTINGS` and read through it.

A path typed by a visitor resolves only inside ``LAYA_MODELS`` + ``LAYA_PATH_ROOTS``, and every
refusal is the same :data:`PATH_REFUSED` sentence, whether or not the file exists, so the box
cannot be used to learn which server files exist. Uploaded checkpoints are checked and kept by
:mod:`laya.app.uploads`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from pathlib import Path

from laya import settings
from laya.data.datasets import data_dirs
from laya.model.checkpoint import META_FILE, WEIGHTS_FILE, CheckpointError, Confinement
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


def sandboxed(path: str | Path) -> bool:
    """Whether a checkpoint is loaded and run only in a sandboxed worker (:mod:`laya.sandbox`): every
    checkpoint outside ``LAYA_MODELS`` (uploads, typed paths), and all of them with ``LAYA_SANDBOX=all``."""
    if settings.text("LAYA_SANDBOX") == "all":
        return True
    return not inside(path, [models_root()])


__all__ = [
    "PATH_REFUSED",
    "allow_import",
    "allow_paths",
    "confinement",
    "data_roots",
    "max_checkpoint_mb",
    "models_root",
    "path_roots",
    "release_memory",
    "resolve_path",
    "sandboxed",
]
