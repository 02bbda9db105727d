"""The ``LAYA_*`` variables as the docs list them: one table per group of :data:`laya.settings.SETTINGS`."""

from __future__ import annotations

from claims.common import ROOT  # noqa: F401 - puts the checkout on sys.path first

from laya.settings import SETTINGS, Setting


def _default(setting: Setting) -> str:
    if setting.shown:
        return setting.shown
    value = setting.default_value()
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return f"`{int(value)}`"
    return f"`{value:_}`" if isinstance(value, int) and value >= 10_000 else f"`{value:g}`"


def settings_table(arg: str) -> str:
    """``| variable | default | allowed | meaning |`` for the settings of group ``arg`` (``server``, ``workers``)."""
    rows = [s for s in SETTINGS.values() if s.group == arg]
    if not rows:
        groups = sorted({s.group for s in SETTINGS.values()})
        raise ValueError(f"no settings in group {arg!r}; expected one of {groups}")
    lines = ["| variable | default | allowed | meaning |", "|---|---|---|---|"]
    lines += [f"| `{s.name}` | {_default(s)} | {s.expected()} | {s.meaning} |" for s in rows]
    return "\n".join(lines) + "\n"


CLAIMS = {"settings-table": settings_table}
