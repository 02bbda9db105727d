"""Which uploaded files make a checkpoint upload, and which are ignored, each named with the reason.

A checkpoint upload is ``model.json`` and ``model.safetensors``. Any other file is ignored: a path-like name
(``../model.json``, ``a\\model.json``: the store writes plain names only), a file of another kind, another
``.json``/``.safetensors`` name, a second file of one name (the first is used). Nothing is ignored silently:
:meth:`SortedUpload.message` names every ignored file, and the sidebar shows it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from laya.model.checkpoint import META_FILE, WEIGHTS_FILE

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


__all__ = ["KINDS", "SortedUpload", "ignored_reason", "sort_upload"]
