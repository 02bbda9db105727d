"""Optional packages (the extras of ``pyproject.toml``): import one, or say the command that installs it."""

from __future__ import annotations

import importlib
from types import ModuleType

EXTRAS = {"transformers": "transformers"}  # importable module -> the extra of laya that installs it


class MissingExtraError(ImportError):
    """An optional package is not installed; the message ends with the ``pip install`` command."""


def require(module: str, needed_for: str) -> ModuleType:
    """``import module``, or raise :class:`MissingExtraError` naming ``needed_for`` and the install command."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        extra = EXTRAS.get(module)
        install = f'pip install "laya[{extra}]"' if extra else f"pip install {module}"
        raise MissingExtraError(f"{needed_for} needs the optional package {module!r}, not installed: {install}") from error


__all__ = ["EXTRAS", "MissingExtraError", "require"]
