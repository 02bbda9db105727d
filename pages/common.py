"""Shared dashboard code: the model catalog, cached loading, the sidebar model picker, image input, the page guard.

Models are loaded once per process (``st.cache_resource``, keyed by path and file time) and
shared by every session; a checkpoint that fails to load is remembered as failed (not rebuilt on
every rerun) and its memory handed back to the OS. Reports and explanations are cached per
argument (``st.cache_data``). Uploaded and typed checkpoints follow :mod:`laya.app.deploy`.

Every page runs inside :func:`guard` (``app.py`` wraps ``page.run()``), so a new page gets it for
free; a script run on its own can use ``with common.guard(): ...`` (one line). A page adopts links
and reports with one line each: ``common.share(mode=mode)`` (its state into the URL; widgets take
their first value from ``common.opened_link()``), ``common.copy_link()`` and
``common.report_button(title, [(heading, figure_or_table), ...], file_stem)``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import streamlit as st
import torch

from laya.analysis.depth import FIT_FILE, DepthFit, DepthReport, InputDepth, input_depth
from laya.analysis.explain import Explanation, explain_bytes
from laya.analysis.report import REPORT_FILE, Report
from laya.app import deploy, links, views
from laya.app.catalog import Entry, catalog_table, describe, find_checkpoints
from laya.app.export import Section, html_report
from laya.data.images import FORMATS, MAX_BYTES, ImageError, load_image_tensor
from laya.model.checkpoint import META_FILE, NONFINITE, WEIGHTS_FILE, Checkpoint, CheckpointError, load_checkpoint

LOG = logging.getLogger("laya.app")
SELECTION = "laya_selection"
VIEW = "laya_view"  # the links.View of this run (sidebar + page), written to the URL
OPENED = "laya_opened_link"  # the links.View the session was opened with (decoded once)
CURRENT_INPUT = "laya_current_input"  # (name, bytes) of the input shown on Inspect, for the Depth analytics page
SOURCES = ("Bundled models", "Upload a checkpoint", "Path on this machine")
MAX_FAILURES = 256
ALLOW_NONFINITE = "laya_allow_nonfinite"
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


models_root = deploy.models_root


@contextmanager
def guard(where: str = "this page") -> Iterator[None]:
    """Turn an unexpected exception into a short ``st.error`` and log its traceback server-side.

    Streamlit's own stop/rerun signals are ``BaseException`` and pass through. The message carries an
    id that is also in the log line, so an operator can find the traceback without showing it.
    """
    try:
        yield
    except Exception as error:  # the last line of defence for every page
        incident = secrets.token_hex(4)
        LOG.exception("unexpected error on %s (incident %s)", where, incident)
        st.error(
            f"Something went wrong on {where} ({type(error).__name__}); the app keeps running. "
            f"The details are in the server log (incident {incident})."
        )


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
def _load_model(path: str, stamp: int, allow_nonfinite: bool = False) -> Checkpoint:
    confine = deploy.confinement(path, deploy.upload_store().root)
    device = os.environ.get("LAYA_DEVICE", "auto")  # auto: CUDA when available
    return load_checkpoint(path, map_location=device, confine=confine, allow_nonfinite=allow_nonfinite)


@st.cache_resource
def _failures() -> OrderedDict[tuple[str, int, bool], str]:
    """Checkpoints that failed to load in this process (path, file time) -> message; bounded."""
    return OrderedDict()


def load_model(path: str, allow_nonfinite: bool | None = None) -> Checkpoint:
    """The checkpoint at ``path``, loaded once per process. Raises :class:`CheckpointError`.

    A failure is remembered (same path and file time: the same error, without rebuilding) and the
    memory the attempt took is handed back to the OS. ``allow_nonfinite``: load NaN/Inf weights with
    a warning (``Checkpoint.warnings``) instead of refusing (default: the session's "load anyway" box).
    """
    if allow_nonfinite is None:
        allow_nonfinite = bool(st.session_state.get(ALLOW_NONFINITE, False))
    key = (path, _stamp(Path(path) / WEIGHTS_FILE), allow_nonfinite)
    failures = _failures()
    if key in failures:
        raise CheckpointError(failures[key])
    try:
        return _load_model(*key)
    except CheckpointError as error:
        failures[key] = str(error)
        while len(failures) > MAX_FAILURES:
            failures.popitem(last=False)
        deploy.release_memory()
        raise


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
def _explain(path: str, stamp: int, anyway: bool, data: bytes, mode: str, posthoc: tuple[str, ...]) -> Explanation:
    return explain_bytes(_load_model(path, stamp, anyway), data, mode=mode, posthoc=posthoc)


def explain(path: str, name: str, data: bytes, mode: str = "mean", posthoc: tuple[str, ...] = ()) -> Explanation:
    """Explain an uploaded or example image; an unusable image shows ``st.error`` and stops the page."""
    try:
        with st.spinner(f"Running {Path(path).name} on {name}…"):
            anyway = bool(st.session_state.get(ALLOW_NONFINITE, False))
            return _explain(path, _stamp(Path(path) / WEIGHTS_FILE), anyway, data, mode, posthoc)
    except ImageError as error:
        st.error(f"Cannot use {name!r} as an image: {error}")
        st.stop()


# ---------------------------------------------------------------- links and reports


def opened_link() -> links.View:
    """The view in the URL this session was opened with (widgets start from it; decoded once per session)."""
    if OPENED not in st.session_state:
        st.session_state[OPENED] = links.decode_view(st.query_params.to_dict())
    return st.session_state[OPENED]


def _index(options: Sequence[object], value: object, default: int = 0) -> int:
    return list(options).index(value) if value in options else default


def share(**changes: object) -> links.View:
    """Add the page's own state (``example``, ``mode``, ``posthoc``, ``cls``) to this run's view and the URL."""
    view = replace(st.session_state.get(VIEW) or links.View(), **changes)
    st.session_state[VIEW] = view
    st.query_params.from_dict(links.encode_view(view))
    return view


def copy_link() -> None:
    """A "copy link" box: the URL that reopens this view (the code block has a copy button)."""
    with st.popover("Copy link to this view", icon=":material/link:"):
        st.code(links.view_url(st.context.url, st.session_state.get(VIEW) or links.View()), language=None)
        st.caption("Anyone with access to this server opens the same model, page, example and options.")


def report_button(title: str, sections: Sequence[Section], stem: str, subtitle: str = "") -> None:
    """Download a static HTML report of ``sections`` (built only when clicked)."""
    st.download_button(
        "Download HTML report",
        lambda: html_report(title, sections, subtitle),
        f"{stem}.html",
        "text/html",
        icon=":material/description:",
        on_click="ignore",
    )


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
    link = opened_link()
    group = st.sidebar.selectbox(
        "Setting (dataset · backbone)",
        list(groups),
        index=_index(list(groups), link.group),
        key="model_group",
        format_func=lambda g: f"{g} ({len(groups[g])})",
    )
    members = groups[group]
    paths = [str(e.path) for e in members]
    labels = dict(zip(paths, map(views.entry_label, members)))
    heads = [e.head for e in members]
    index = _index(heads, link.head if group == link.group else None, _index(heads, "laya"))
    path = st.sidebar.radio("Head", paths, index=index, key=f"model_head_{group}", format_func=labels.__getitem__)
    st.session_state[VIEW] = links.View(group=group, head=members[paths.index(path)].head)
    with st.sidebar.expander("All checkpoints"):
        st.dataframe(catalog_table(entries).drop(columns="path"), hide_index=True)
    return Selection(path, tuple(members))


class SessionUploads(dict):
    """This session's uploaded checkpoints (digest -> folder); deleted from disk when the session ends
    (its session state is garbage-collected), besides the store's TTL."""

    def __init__(self, store: deploy.UploadStore) -> None:
        super().__init__()
        self.folders: list[str] = []
        weakref.finalize(self, _discard_all, store, self.folders)  # must not reference self

    def __setitem__(self, digest: str, folder: str) -> None:
        self.folders.append(folder)
        super().__setitem__(digest, folder)


def _discard_all(store: deploy.UploadStore, folders: list[str]) -> None:
    for folder in folders:
        store.discard(folder)


def _upload_checkpoint() -> str | None:
    limit = deploy.max_checkpoint_mb()
    files = st.sidebar.file_uploader(
        f"{META_FILE} and {WEIGHTS_FILE} (up to {limit} MB each)",
        type=["json", "safetensors"],
        accept_multiple_files=True,
        key="model_upload",
        max_upload_size=limit,
    )
    if not files:
        st.sidebar.caption("Upload both files of one checkpoint directory.")
        return None
    contents = {f.name: f.getvalue() for f in files}
    digest = hashlib.sha256(
        b"".join(n.encode() + hashlib.sha256(d).digest() for n, d in sorted(contents.items()))
    ).hexdigest()
    store = deploy.upload_store()
    uploads = st.session_state.get("laya_uploads")
    if not isinstance(uploads, SessionUploads):
        uploads = st.session_state["laya_uploads"] = SessionUploads(store)
    if digest not in uploads or not Path(uploads[digest]).is_dir():
        try:
            uploads[digest] = str(store.store(contents))
        except CheckpointError as error:
            st.sidebar.error(f"Cannot use this checkpoint: {error}")
            deploy.release_memory()
            return None
    return uploads[digest]


def _typed_path(entries: list[Entry]) -> Selection | None:
    text = st.sidebar.text_input(
        "Checkpoint directory", value=opened_link().path or "", key="model_path", placeholder="runs/…/seed0"
    ).strip()
    if not text:
        return None
    st.session_state[VIEW] = links.View(path=text)
    try:
        return _single(str(deploy.resolve_path(text)), entries)
    except CheckpointError as error:
        st.sidebar.error(str(error))
        return None


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
    sources = SOURCES if deploy.allow_paths() else SOURCES[:2]
    opened = 2 if opened_link().path and len(sources) == 3 else 0
    source = st.sidebar.radio("Source", sources, index=opened, key="model_source", label_visibility="collapsed")
    st.session_state[VIEW] = links.View()
    selection = None
    if source == SOURCES[0]:
        selection = _pick_bundled(entries)
    elif source == SOURCES[1]:
        path = _upload_checkpoint()
        selection = _single(path, entries) if path else None
    else:
        selection = _typed_path(entries)
    broken = [e for e in entries if e.error]
    if broken:
        with st.sidebar.expander(f"{len(broken)} unreadable checkpoint(s)"):
            for e in broken:
                st.caption(f"`{e.path}`: {e.error}")
    st.session_state[SELECTION] = selection
    st.query_params.from_dict(links.encode_view(st.session_state[VIEW]))


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
        checkpoint = load_model(selection.path)
    except CheckpointError as error:
        st.error(f"Cannot load the checkpoint: {error}")
        if NONFINITE in str(error):
            st.checkbox("Load it anyway (predictions and scores may be NaN)", key=ALLOW_NONFINITE)
        st.stop()
    for warning in checkpoint.warnings:
        st.warning(warning)
    if checkpoint.warnings:  # kept on screen, so the choice stays in the session (and can be undone)
        st.checkbox("Load it anyway (predictions and scores may be NaN)", key=ALLOW_NONFINITE)
    return checkpoint, selection


# ---------------------------------------------------------------- page widgets


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
    index = _index(list(by_name), opened_link().example)
    name = st.selectbox("…or pick a bundled example", list(by_name), index=index, key=f"{key}_example")
    share(example=name)
    return name, by_name[name].read_bytes()


def group_members(selection: Selection, entries: list[Entry]) -> tuple[list[str], dict[str, str]]:
    """Every readable checkpoint path (catalog and selection) and a ``group · head`` label for each."""
    known = {str(e.path): e for e in entries if e.error is None} | {str(e.path): e for e in selection.group}
    labels = {p: f"{e.group} · {views.head_title(e.head)}" for p, e in known.items()}
    labels.setdefault(selection.path, Path(selection.path).name)
    return list(labels), labels
