"""Page inputs: an uploaded or bundled example image, and the checkpoints a page may compare."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import streamlit as st

from laya.app.catalog import Entry, read_example
from laya.app.labels import head_title
from laya.app.text import shown
from laya.data.images import FORMATS, MAX_BYTES, ImageError
from pages.common.loading import load_sample
from pages.common.sharing import opened_link, option_index, share
from pages.common.sidebar import SELECTION, Selection

CURRENT_INPUT = "laya_current_input"  # (name, bytes) of the input shown on Inspect, for the Depth analytics page
IMAGE_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "gif"]
BROWSED = "laya_browsed_input"  # (checkpoint path, test index) opened from the test-set browser
PATCH_SOURCE = "laya_patch_source"  # (checkpoint path, test index) chosen as patching source in the browser
SOURCE_KINDS = ("bundled example", "upload", "test input")


def image_input(key: str, examples: Sequence[Path]) -> tuple[str, bytes] | None:
    """An uploaded image, else a test input opened from the browser (or a link), else the chosen bundled
    example: ``(name, bytes)``, or None. An upload is never part of the link: the page says so."""
    upload = st.file_uploader(
        f"Upload an image ({', '.join(FORMATS)})",
        type=IMAGE_TYPES,
        key=f"{key}_upload",
        max_upload_size=MAX_BYTES // 2**20,
    )
    if upload is not None:
        share(example=None, switches=share().with_switch("input", None).switches)
        st.caption(
            f":material/link_off: The uploaded image ({shown(upload.name)}) is not part of this page's link: "
            "a link opens on a bundled example or a test input instead."
        )
        return upload.name, upload.getvalue()
    chosen = browsed_input()
    if chosen is not None:
        return chosen
    if not examples:
        return None
    by_name = {p.name: p for p in examples}
    index = option_index(list(by_name), opened_link().example)
    name = st.selectbox("…or pick a bundled example", list(by_name), index=index, key=f"{key}_example")
    share(example=name)
    return _example(name, by_name[name])


def _example(name: str, path: Path) -> tuple[str, bytes] | None:
    """``(name, bytes)`` of a bundled example, or None with a warning naming it where it is over the image size
    limit or unreadable (its size checked before a byte is read)."""
    try:
        return name, read_example(path)
    except ImageError as error:
        st.warning(shown(f"Cannot use the example {name!r}: {error}"))
        return None


def browsed_input() -> tuple[str, bytes] | None:
    """The test input opened from the browser for the selected checkpoint (or named by the link's ``input``),
    with a button back to the examples; None if there is none."""
    selection = st.session_state.get(SELECTION)
    if selection is None:
        return None
    memory = st.session_state.get(BROWSED)
    index = memory[1] if memory and memory[0] == selection.path else None
    if index is None and opened_link().switch("input") and not st.session_state.get(f"{BROWSED}_dropped"):
        index = int(opened_link().switch("input"))
    sample = load_sample(selection.path) if index is not None else None
    rows = sample.table.index[sample.table["index"] == index] if sample is not None else []
    if len(rows) == 0 or sample.sprite is None:
        return None
    row = int(rows[0])
    label = sample.classes[int(sample.table.at[row, "label"])]
    st.caption(f"Test input #{index:d} (label: {shown(label)}), opened from the test-set browser.")
    if st.button("Back to the examples", key="browsed_back"):
        st.session_state.pop(BROWSED, None)
        st.session_state[f"{BROWSED}_dropped"] = True
        share(switches=share().with_switch("input", None).switches)
        st.rerun()
    share(example=None, switches=share().with_switch("input", index).switches)
    return f"test-{index}.png", sample.png(row)


def source_input(key: str, examples: Sequence[Path]) -> tuple[str, bytes] | None:
    """The Activation patching page's source: a bundled example, an upload, or a test input of the browser's
    sample (preselected when the browser's "Patch source" button sent one): ``(name, bytes)``, or None."""
    selection = st.session_state.get(SELECTION)
    sample = load_sample(selection.path) if selection is not None else None
    memory = st.session_state.get(PATCH_SOURCE)
    sent = memory[1] if memory and selection is not None and memory[0] == selection.path else None
    kinds = [k for k in SOURCE_KINDS if (k != "bundled example" or examples)
             and (k != "test input" or (sample is not None and sample.sprite is not None))]  # fmt: skip
    start = kinds.index("test input") if sent is not None and "test input" in kinds else 0
    kind = st.radio("Source", kinds, index=start, horizontal=True, key=f"{key}_kind", format_func=shown)
    if kind == "bundled example":
        by_name = {p.name: p for p in examples}
        names = list(by_name)
        name = st.selectbox("Source example", names, index=min(1, len(names) - 1), key=f"{key}_example")
        return _example(name, by_name[name])
    if kind == "upload":
        upload = st.file_uploader("Upload the source image", type=IMAGE_TYPES, key=f"{key}_upload",
                                  max_upload_size=MAX_BYTES // 2**20)  # fmt: skip
        return None if upload is None else (upload.name, upload.getvalue())
    indices = [int(i) for i in sample.table["index"]]
    labels = {i: sample.classes[int(c)] for i, c in zip(indices, sample.table["label"])}
    index = st.selectbox("Source test input", indices, index=indices.index(sent) if sent in indices else 0,
                         format_func=lambda i: f"#{i} ({labels[i]})", key=f"{key}_test")  # fmt: skip
    row = int(sample.table.index[sample.table["index"] == index][0])
    return f"test-{index}.png", sample.png(row)


def group_members(selection: Selection, entries: list[Entry]) -> tuple[list[str], dict[str, str]]:
    """Every readable checkpoint path (catalog and selection) and a ``group · head`` label for each; a
    checkpoint outside the catalog (uploaded, typed) is marked ``(yours)``, so no two labels are equal
    (Streamlit's multiselect tells its options apart by label)."""
    catalogued = {str(e.path): e for e in entries if e.error is None}
    known = catalogued | {str(e.path): e for e in selection.group}
    labels = {p: f"{e.group} · {head_title(e.head)}" + ("" if p in catalogued else " (yours)")
              for p, e in known.items()}  # fmt: skip
    labels.setdefault(selection.path, Path(selection.path).name)
    return list(labels), labels
