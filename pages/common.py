"""Shared dashboard code: the model catalog, cached loading, the sidebar model picker, image input.

Models are loaded once per process (``st.cache_resource``, keyed by path and file time) and
shared by every session; reports and explanations are cached per argument (``st.cache_data``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
import torch

from laya.analysis.depth import FIT_FILE, DepthFit, DepthReport, InputDepth, input_depth
from laya.analysis.explain import Explanation, explain_bytes
from laya.analysis.report import REPORT_FILE, Report
from laya.app import views
from laya.app.catalog import Entry, catalog_table, describe, find_checkpoints
from laya.data.images import FORMATS, ImageError, load_image_tensor
from laya.model.checkpoint import META_FILE, WEIGHTS_FILE, Checkpoint, CheckpointError, load_checkpoint

APP_DIR = Path(__file__).resolve().parent.parent
SELECTION = "laya_selection"
CURRENT_INPUT = "laya_current_input"  # (name, bytes) of the input shown on Inspect, for the Depth analytics page
SOURCES = ("Bundled models", "Upload a checkpoint", "Path on this machine")
IMAGE_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "gif"]
NO_MODELS = (
    "No models found under `{root}`. Bundle the paper's settings with "
    "`python -m laya reproduce fashion-mnist-mlp` (trains every head and writes `models/fashion-mnist-mlp/<head>/`), "
    "evaluate your own checkpoint with `python -m laya evaluate --checkpoint DIR` and copy it under `{root}`, "
    "or set `LAYA_MODELS` to a folder of checkpoints. You can also upload a checkpoint or give its path in the sidebar."
)


@dataclass(frozen=True)
class Selection:
    """The checkpoint chosen in the sidebar and the checkpoints comparable with it (its group)."""

    path: str
    group: tuple[Entry, ...]


def models_root() -> Path:
    return Path(os.environ.get("LAYA_MODELS", APP_DIR / "models"))


@st.cache_resource
def configure_torch() -> int:
    """Torch CPU threads for the whole process (``LAYA_THREADS``, default half the cores, at most 4)."""
    threads = int(os.environ.get("LAYA_THREADS", max(1, min(4, (os.cpu_count() or 2) // 2))))
    torch.set_num_threads(threads)
    return threads


def _stamp(path: str | Path) -> int:
    """Modification time of a file (0 if missing): part of cache keys, so changed files are reread."""
    try:
        return Path(path).stat().st_mtime_ns
    except OSError:
        return 0


@st.cache_data(ttl=60, show_spinner=False)
def catalog(root: str) -> list[Entry]:
    return find_checkpoints(root)


@st.cache_resource(max_entries=32, show_spinner="Loading the model…")
def _load_model(path: str, stamp: int) -> Checkpoint:
    return load_checkpoint(path)


def load_model(path: str) -> Checkpoint:
    """The checkpoint at ``path``, loaded once per process. Raises :class:`CheckpointError`."""
    return _load_model(path, _stamp(Path(path) / WEIGHTS_FILE))


@st.cache_data(max_entries=64, show_spinner=False)
def _load_report(path: str, stamp: int) -> Report:
    return Report.load(path)


def load_report(path: str | Path, warn: bool = True) -> Report | None:
    """The evaluation report next to a checkpoint, or None (with a warning saying why)."""
    try:
        return _load_report(str(path), _stamp(Path(path) / REPORT_FILE))
    except (FileNotFoundError, ValueError) as error:
        if warn:
            st.warning(str(error))
        return None


@st.cache_data(max_entries=128, show_spinner=False)
def _explain(path: str, stamp: int, data: bytes, mode: str, posthoc: tuple[str, ...]) -> Explanation:
    return explain_bytes(_load_model(path, stamp), data, mode=mode, posthoc=posthoc)


def explain(path: str, name: str, data: bytes, mode: str = "zero", posthoc: tuple[str, ...] = ()) -> Explanation:
    """Explain an uploaded or example image; an unusable image shows ``st.error`` and stops the page."""
    try:
        with st.spinner(f"Running {Path(path).name} on {name}…"):
            return _explain(path, _stamp(Path(path) / WEIGHTS_FILE), data, mode, posthoc)
    except ImageError as error:
        st.error(f"Cannot use {name!r} as an image: {error}")
        st.stop()


@st.cache_data(max_entries=16, show_spinner=False)
def _load_depth(path: str, stamp: int) -> DepthReport | None:
    return DepthReport.load(path)


def load_depth(path: str | Path) -> DepthReport | None:
    """``depth.json`` beside a checkpoint (``python -m laya depth``), or None."""
    return _load_depth(str(path), _stamp(Path(path) / "depth.json"))


@st.cache_resource(max_entries=16, show_spinner=False)
def _depth_fit(path: str, stamp: int) -> DepthFit | None:
    return DepthFit.load(path)


@st.cache_data(max_entries=128, show_spinner=False)
def _input_depth(path: str, stamp: int, fit_stamp: int, data: bytes) -> InputDepth:
    checkpoint = _load_model(path, stamp)
    spec = checkpoint.meta.input
    return input_depth(
        checkpoint, load_image_tensor(data, spec.channels, spec.source_size), _depth_fit(path, fit_stamp)
    )


def depth_of_input(path: str, name: str, data: bytes) -> InputDepth:
    """Depth analytics of an uploaded or example image; an unusable image shows ``st.error`` and stops the page."""
    try:
        with st.spinner(f"Running {Path(path).name} on {name}…"):
            return _input_depth(path, _stamp(Path(path) / WEIGHTS_FILE), _stamp(Path(path) / FIT_FILE), data)
    except ImageError as error:
        st.error(f"Cannot use {name!r} as an image: {error}")
        st.stop()


# ---------------------------------------------------------------- sidebar


def _pick_bundled(entries: list[Entry]) -> Selection:
    groups = views.group_entries(entries)
    if not groups:
        st.info(NO_MODELS.format(root=models_root()))
        st.stop()
    group = st.sidebar.selectbox(
        "Setting (dataset · backbone)", list(groups), key="model_group", format_func=lambda g: f"{g} ({len(groups[g])})"
    )
    members = groups[group]
    paths = [str(e.path) for e in members]
    labels = dict(zip(paths, map(views.entry_label, members)))
    laya = next((i for i, e in enumerate(members) if e.head == "laya"), 0)
    path = st.sidebar.radio("Head", paths, index=laya, key=f"model_head_{group}", format_func=labels.__getitem__)
    with st.sidebar.expander("All checkpoints"):
        st.dataframe(catalog_table(entries).drop(columns="path"), hide_index=True)
    return Selection(path, tuple(members))


def _upload_checkpoint() -> str | None:
    files = st.sidebar.file_uploader(
        f"{META_FILE} and {WEIGHTS_FILE}", type=["json", "safetensors"], accept_multiple_files=True, key="model_upload"
    )
    if not files:
        st.sidebar.caption("Upload both files of one checkpoint directory.")
        return None
    contents = {f.name: f.getvalue() for f in files}
    digest = hashlib.sha256(
        b"".join(n.encode() + hashlib.sha256(d).digest() for n, d in sorted(contents.items()))
    ).hexdigest()
    uploads: dict[str, str] = st.session_state.setdefault("laya_uploads", {})
    if digest not in uploads:
        try:
            uploads[digest] = str(views.write_uploaded_checkpoint(contents))
        except CheckpointError as error:
            st.sidebar.error(str(error))
            return None
    return uploads[digest]


def _single(path: str, entries: list[Entry]) -> Selection:
    """A checkpoint outside the catalog is its own group; one inside it keeps its group."""
    found = next((e for e in entries if str(e.path) == path), None)
    if found is not None:
        return Selection(path, tuple(e for e in entries if e.group == found.group and e.error is None))
    entry = describe(Path(path))
    return Selection(path, (entry,) if entry.error is None else ())


def pick_model() -> None:
    """Sidebar: choose a bundled, uploaded or local checkpoint; store the :class:`Selection` in the session."""
    entries = catalog(str(models_root()))
    st.sidebar.header("Model")
    source = st.sidebar.radio("Source", SOURCES, key="model_source", label_visibility="collapsed")
    selection = None
    if source == SOURCES[0]:
        selection = _pick_bundled(entries)
    elif source == SOURCES[1]:
        path = _upload_checkpoint()
        selection = _single(path, entries) if path else None
    else:
        text = st.sidebar.text_input("Checkpoint directory", key="model_path", placeholder="runs/…/seed0").strip()
        path = Path(text).expanduser().resolve()
        selection = _single(str(path.parent if path.is_file() else path), entries) if text else None
    broken = [e for e in entries if e.error]
    if broken:
        with st.sidebar.expander(f"{len(broken)} unreadable checkpoint(s)"):
            for e in broken:
                st.caption(f"`{e.path}`: {e.error}")
    st.session_state[SELECTION] = selection


def selected() -> Selection:
    """The sidebar's selection; stops the page with a hint if there is none."""
    chosen: Selection | None = st.session_state.get(SELECTION)
    if chosen is None:
        st.info("Choose a model in the sidebar.")
        st.stop()
    return chosen


def current() -> tuple[Checkpoint, Selection]:
    """The selected checkpoint, loaded; stops the page with a message if there is none or it fails to load."""
    selection = selected()
    try:
        return load_model(selection.path), selection
    except CheckpointError as error:
        st.error(f"Cannot load the checkpoint: {error}")
        st.stop()


# ---------------------------------------------------------------- page widgets


def image_input(key: str, examples: Sequence[Path]) -> tuple[str, bytes] | None:
    """An uploaded image, else the chosen bundled example: ``(name, bytes)``, or None."""
    upload = st.file_uploader(f"Upload an image ({', '.join(FORMATS)})", type=IMAGE_TYPES, key=f"{key}_upload")
    if upload is not None:
        return upload.name, upload.getvalue()
    if not examples:
        return None
    by_name = {p.name: p for p in examples}
    name = st.selectbox("…or pick a bundled example", list(by_name), key=f"{key}_example")
    return name, by_name[name].read_bytes()


def group_members(selection: Selection, entries: list[Entry]) -> tuple[list[str], dict[str, str]]:
    """Every readable checkpoint path (catalog and selection) and a ``group · head`` label for each."""
    known = {str(e.path): e for e in entries if e.error is None} | {str(e.path): e for e in selection.group}
    labels = {p: f"{e.group} · {views.head_title(e.head)}" for p, e in known.items()}
    labels.setdefault(selection.path, Path(selection.path).name)
    return list(labels), labels
