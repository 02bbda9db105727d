"""Views as links: what a page shows, encoded in the URL's query string and decoded back.

A :class:`View` names the checkpoint itself: ``model``, its path relative to the models folder (a
catalog path: two checkpoints of one dataset · backbone group never share a link), or ``path``, a
directory typed on a server that allows it. Links of older versions (bundled ``group`` + ``head``)
still decode and open the first matching checkpoint. Beside the model: the bundled ``example``, the
ablation ``mode``, the ``posthoc`` methods, and every page switch in ``switches`` (reduction, the
Values/Inputs switches, the class, the depth threshold, the ROC task, the browser's filters and
sort: :data:`SWITCHES`). The page itself is the URL path (``st.navigation``). Decoding is forgiving:
unknown keys, over-long or unknown values are dropped, so a hand-edited link opens a sane view.

An uploaded image is never part of a link (a link stays short and never carries user data); a page
showing an upload says so next to its link, and a link opens on the bundled example it names, or on
a test input of the browser's sample (``input``: its test-set index).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from laya.analysis.head.attribution import POSTHOC_METHODS
from laya.model.heads import ABLATION_MODES

if TYPE_CHECKING:
    from laya.app.catalog import Entry

MAX_VALUE = 300
PARAMS = {"model": "model", "path": "path", "group": "group", "head": "head", "example": "example", "mode": "mode"}
# page switches: URL parameter -> what its value may look like (the page checks it against its options)
SWITCHES = {
    "class": r".+",  # Class-wise: the class picked
    "values": r"scores|loo",  # Class-wise: layer scores or LOO drops
    "inputs": r"all|correct|incorrect",  # Class-wise: which inputs
    "method": r"[a-z_]+",  # Class-wise: the method of the all-classes profile
    "reduction": r"signed|magnitude",  # Faithfulness
    "threshold": r"0(\.\d{1,4})?|1(\.0{1,4})?",  # Depth analytics: early-exit confidence threshold
    "task": r".+",  # Depth analytics: the ROC task
    "input": r"\d{1,9}",  # Inspect / Depth analytics: a test input of the browser's sample
    # test-set browser
    "bclass": r".+",  # true class
    "bpred": r".+",  # predicted class
    "outcome": r"all|correct|wrong",
    "top": r".+",  # top layer
    "layer": r".+",  # the layer whose score and LOO drop are shown
    "score": r"[a-z_]+",  # the error/OOD score shown
    "sort": r"[a-z_]+",
    "order": r"asc|desc",
}


@dataclass(frozen=True)
class View:
    """One view of the dashboard (``None``/empty: the page's default)."""

    model: str | None = None
    path: str | None = None
    group: str | None = None  # older links only
    head: str | None = None  # older links only
    example: str | None = None
    mode: str | None = None
    posthoc: tuple[str, ...] = ()
    switches: tuple[tuple[str, str], ...] = field(default=())

    def switch(self, name: str) -> str | None:
        """The value of page switch ``name`` in this view, or None."""
        return dict(self.switches).get(name)

    def with_switch(self, name: str, value: object) -> View:
        """This view with switch ``name`` set to ``str(value)`` (removed for None)."""
        if name not in SWITCHES:
            raise ValueError(f"unknown page switch {name!r}; expected one of {sorted(SWITCHES)}")
        rest = {k: v for k, v in self.switches if k != name}
        if value is not None:
            rest[name] = str(value)
        return View(**{**self.__dict__, "switches": tuple(sorted(rest.items()))})


def encode_view(view: View) -> dict[str, str]:
    """``View`` -> query parameters (only the fields that are set; ``posthoc`` comma-separated)."""
    params = {PARAMS[f]: getattr(view, f) for f in PARAMS if getattr(view, f)}
    if view.posthoc:
        params["posthoc"] = ",".join(view.posthoc)
    return params | dict(view.switches)


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
    switches = {}
    for name, pattern in SWITCHES.items():
        value = _clean(params.get(name))
        if value is not None and re.fullmatch(pattern, value):
            switches[name] = value
    return View(
        **values,
        posthoc=tuple(dict.fromkeys(m for m in posthoc if m in POSTHOC_METHODS)),
        switches=tuple(sorted(switches.items())),
    )


def catalog_path(path: str | Path, root: str | Path) -> str:
    """How a link names the checkpoint at ``path``: its path relative to the models folder ``root``
    (POSIX separators), or ``path`` itself for a checkpoint outside it."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)


def linked_entry(
    entries: Sequence[Entry], root: str | Path, model: str | None, group: str | None = None, head: str | None = None
) -> Entry | None:
    """The readable catalog entry a link names: by ``model`` (catalog path), else, for older links, the first
    of ``group`` with ``head``; None if it names none."""
    readable = [e for e in entries if e.error is None]
    if model:
        return next((e for e in readable if catalog_path(e.path, root) == model), None)
    return next((e for e in readable if e.group == group and e.head == head), None)


def view_url(base: str | None, view: View) -> str:
    """The shareable link: ``base`` (the page's URL, no query) plus the encoded view."""
    query = urlencode(encode_view(view))
    return f"{base or ''}?{query}" if query else (base or "")


__all__ = ["MAX_VALUE", "SWITCHES", "View", "catalog_path", "decode_view", "encode_view", "linked_entry", "view_url"]
