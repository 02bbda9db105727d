"""The one path function for every file a checkpoint or a visitor names: weights, dataset, checkpoint, example.

:func:`canonical_path` turns a path *text* into the real path that will be opened, and, given
``roots``, refuses it unless that real path lies inside one of them. Callers open the returned
path and nothing else, so the containment check and the open see the same file (no
check-then-expand):

- ``~`` is never expanded. A path whose first component starts with ``~`` (``~``, ``~/x``,
  ``~user/x``) is refused, from its text alone: neither the home folder nor any user's is reachable,
  and the user sees why rather than a "not found" for a folder literally named ``~``.
- Symlinks and ``..`` are resolved (``os.path.realpath``) *before* the containment test; a link
  inside a root that points outside it is outside.
- NUL bytes, lone surrogates, names over 255 bytes and paths over 4096 bytes are refused.

Every refusal is decided without touching the file system beyond ``realpath`` (which follows links
but does not need the target to exist), and its message quotes only the text given, so the answer
is the same whether or not the file exists: it is not an existence oracle.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255


class PathRefused(ValueError):
    """A path text that may not be used; the message says why without revealing anything about the file."""


def _shown(text: str) -> str:
    shown = text.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    return repr(shown if len(shown) <= 80 else shown[:77] + "...")


def check_text(text: str) -> None:
    """Refuse path texts that are empty, hold NUL or lone surrogates, start with ``~``, or are over-long.

    Raises:
        PathRefused: naming the rule.
    """
    if not isinstance(text, str) or not text:
        raise PathRefused("the path is empty")
    if "\x00" in text:
        raise PathRefused(f"the path {_shown(text)} holds a NUL byte")
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        raise PathRefused(f"the path {_shown(text)} is not valid Unicode (a lone surrogate)") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise PathRefused(f"the path is {len(encoded):,} bytes long; at most {MAX_PATH_BYTES} are allowed")
    parts = Path(text).parts
    if any(len(p.encode("utf-8")) > MAX_NAME_BYTES for p in parts):
        raise PathRefused(f"the path {_shown(text)} has a name over {MAX_NAME_BYTES} bytes")
    if text.startswith("~"):
        raise PathRefused(f"the path {_shown(text)} starts with '~', which is not expanded here; write the full path")


def canonical_path(text: str | os.PathLike[str], base: Path | None = None, roots: Sequence[Path] | None = None) -> Path:
    """The real path ``text`` names, relative paths taken from ``base`` (default: the working folder).

    ``roots``: the real path must lie inside one of these folders (after symlinks and ``..`` of both),
    otherwise :class:`PathRefused`; None: no containment (a trusted path, e.g. from the CLI).
    The file need not exist: callers say "not found" only for paths already inside ``roots``.

    Raises:
        PathRefused: see :func:`check_text`, or outside ``roots``.
    """
    text = os.fspath(text)
    check_text(text)
    path = Path(text)
    if not path.is_absolute():
        path = Path(base if base is not None else os.getcwd()) / path
    try:
        real = Path(os.path.realpath(path))
    except (OSError, ValueError) as error:  # a symlink loop on some Pythons, an over-long expansion
        raise PathRefused(f"the path {_shown(text)} cannot be resolved") from error
    if roots is not None and not any(real.is_relative_to(os.path.realpath(root)) for root in roots):
        raise PathRefused(f"the path {_shown(text)} is outside the folders allowed here")
    return real


def inside(text: str | os.PathLike[str], roots: Sequence[Path], base: Path | None = None) -> bool:
    """Whether :func:`canonical_path` accepts ``text`` within ``roots``."""
    try:
        canonical_path(text, base, roots)
    except PathRefused:
        return False
    return True


__all__ = ["MAX_NAME_BYTES", "MAX_PATH_BYTES", "PathRefused", "canonical_path", "check_text", "inside"]
