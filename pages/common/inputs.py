"""Page inputs: an uploaded or bundled example image, and the checkpoints a page may compare."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import streamlit as st

from laya.app import views
from laya.app.catalog import Entry
from laya.data.images import FORMATS, MAX_BYTES
from pages.common.sharing import opened_link, option_index, share
from pages.common.sidebar import Selection

CURRENT_INPUT = "laya_current_input"  # (name, bytes) of the input shown on Inspect, for the Depth analytics page
IMAGE_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "gif"]


def image_input(key: str, examples: Sequence[Path]) -> tuple[str, bytes] | None:
    """An uploaded image, else the chosen bundled example: ``(name, bytes)``, or None."""
    upload = st.file_uploader(
        f"Upload an image ({', '.join(FORMATS)})",
        type=IMAGE_TYPES,
        key=f"{key}_upload",
        max_upload_size=MAX_BYTES // 2**20,
    )
    if upload is not None:
        return upload.name, upload.getvalue()
    if not examples:
        return None
    by_name = {p.name: p for p in examples}
    index = option_index(list(by_name), opened_link().example)
    name = st.selectbox("…or pick a bundled example", list(by_name), index=index, key=f"{key}_example")
    share(example=name)
    return name, by_name[name].read_bytes()


def group_members(selection: Selection, entries: list[Entry]) -> tuple[list[str], dict[str, str]]:
    """Every readable checkpoint path (catalog and selection) and a ``group · head`` label for each; a
    checkpoint outside the catalog (uploaded, typed) is marked ``(yours)``, so no two labels are equal
    (Streamlit's multiselect tells its options apart by label)."""
    catalogued = {str(e.path): e for e in entries if e.error is None}
    known = catalogued | {str(e.path): e for e in selection.group}
    labels = {p: f"{e.group} · {views.head_title(e.head)}" + ("" if p in catalogued else " (yours)")
              for p, e in known.items()}  # fmt: skip
    labels.setdefault(selection.path, Path(selection.path).name)
    return list(labels), labels
