"""Views as links: what a page shows, encoded in the URL's query string and decoded back.

A :class:`View` holds the sidebar selection (bundled ``group`` + ``head``, or a typed ``path``),
the chosen bundled ``example``, the ablation ``mode``, the ``posthoc`` methods and the Class-wise
``cls``; the page itself is the URL path (``st.navigation``). Decoding is forgiving: unknown
keys, over-long or unknown values are dropped, so a hand-edited link opens a sane view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from laya.analysis.attribution import POSTHOC_METHODS
from laya.model.heads import ABLATION_MODES

MAX_VALUE = 300
PARAMS = {"group": "group", "head": "head", "path": "path", "example": "example", "mode": "mode", "cls": "class"}


@dataclass(frozen=True)
class View:
    """One view of the dashboard (``None``/empty: the page's default)."""

    group: str | None = None
    head: str | None = None
    path: str | None = None
    example: str | None = None
    mode: str | None = None
    posthoc: tuple[str, ...] = ()
    cls: str | None = None


def encode_view(view: View) -> dict[str, str]:
    """``View`` -> query parameters (only the fields that are set; ``posthoc`` comma-separated)."""
    params = {PARAMS[f]: getattr(view, f) for f in PARAMS if getattr(view, f)}
    if view.posthoc:
        params["posthoc"] = ",".join(view.posthoc)
    return params


def _clean(value: object) -> str | None:
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    if not isinstance(value, str) or not value or len(value) > MAX_VALUE or "\x00" in value:
        return None
    return value


def decode_view(params: Mapping[str, object]) -> View:
    """Query parameters -> ``View``; anything malformed is dropped, never an error."""
    values = {f: _clean(params.get(p)) for f, p in PARAMS.items()}
    if values["mode"] not in ABLATION_MODES:
        values["mode"] = None
    posthoc = (_clean(params.get("posthoc")) or "").split(",")
    return View(**values, posthoc=tuple(dict.fromkeys(m for m in posthoc if m in POSTHOC_METHODS)))


def view_url(base: str | None, view: View) -> str:
    """The shareable link: ``base`` (the page's URL, no query) plus the encoded view."""
    query = urlencode(encode_view(view))
    return f"{base or ''}?{query}" if query else (base or "")


__all__ = ["MAX_VALUE", "View", "decode_view", "encode_view", "view_url"]
