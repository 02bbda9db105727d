"""The sidebar model picker: bundled, uploaded or typed checkpoints; the page's selection and loaded checkpoint."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from laya.app import deploy, links
from laya.app.catalog import Entry, catalog_table, describe, group_entries
from laya.app.export import Provenance, weights_sha256
from laya.app.labels import entry_label
from laya.app.text import shown
from laya.app.uploads import sort_upload, upload_store
from laya.model.checkpoint import META_FILE, NONFINITE, WEIGHTS_FILE, CheckpointError
from laya.sandbox.client import check_upload_in_worker
from laya.sandbox.info import ModelInfo
from laya.sandbox.pool import WorkerError, worker_pool
from pages.common.loading import ALLOW_NONFINITE, anyway, catalog, load_model
from pages.common.sharing import VIEW, opened_link, option_index, view_link

SELECTION = "laya_selection"
SOURCES = ("Models folder", "Upload a checkpoint", "Path on this machine")
NO_MODELS = (
    "No models found under `{root}`. Bundle the paper's settings with "
    "`python -m laya reproduce fashion-mnist-mlp` (trains every head and writes `models/fashion-mnist-mlp/<head>/`), "
    "evaluate your own checkpoint with `python -m laya evaluate --checkpoint DIR` and copy it under `{root}`, "
    "or set `LAYA_MODELS` to a folder of checkpoints. You can also upload a checkpoint or give its path in the sidebar."
)


CHECKING = (
    "Checking the uploaded checkpoint (upload {digest}) in a sandboxed worker… "
    "On a busy server this waits for a free worker."
)


@dataclass(frozen=True)
class Selection:
    """The checkpoint chosen in the sidebar and the checkpoints comparable with it (its group)."""

    path: str
    group: tuple[Entry, ...]


models_root = deploy.models_root


def source_label(source: str) -> str:
    """A source as the sidebar names it: the models folder by the folder it reads (``LAYA_MODELS``, which
    ``laya dashboard --models DIR`` sets); the page shows it through :func:`~laya.app.text.shown`."""
    return f"Models in {models_root()}" if source == SOURCES[0] else source


def _pick_bundled(entries: list[Entry]) -> Selection:
    groups = group_entries(entries)
    if not groups:
        st.info(NO_MODELS.format(root=shown(models_root(), "code")))
        st.stop()
    link = opened_link()
    linked = links.linked_entry(entries, models_root(), link.model, link.group, link.head)
    group = st.sidebar.selectbox(
        "Setting (dataset · backbone)",
        list(groups),
        index=option_index(list(groups), linked.group if linked else None),
        key="model_group",
        format_func=lambda g: f"{g} ({len(groups[g])})",
    )
    members = groups[group]
    paths = [str(e.path) for e in members]
    labels = dict(zip(paths, map(entry_label, members)))
    repeated = {label for label in labels.values() if list(labels.values()).count(label) > 1}
    labels = {p: f"{label} · {Path(p).name}" if label in repeated else label for p, label in labels.items()}
    heads = [e.head for e in members]
    index = option_index(paths, str(linked.path) if linked else None, option_index(heads, "laya"))
    path = st.sidebar.radio("Head", paths, index=index, key=f"model_head_{group}",
                            format_func=lambda p: shown(labels[p]))
    st.session_state[VIEW] = links.View(model=links.catalog_path(path, models_root()))
    with st.sidebar.expander("All checkpoints"):
        st.dataframe(catalog_table(entries).drop(columns="path"), hide_index=True)
    return Selection(path, tuple(members))


def session_id() -> str:
    """This browser session's id (Streamlit's), which owns its uploads."""
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


def session_alive(session: str) -> bool:
    """Whether a browser session is still connected (its websocket open); True outside a Streamlit server."""
    if not Runtime.exists():
        return True
    return Runtime.instance().is_active_session(session)


def close_gone_session(session: str) -> None:
    """Shut a gone browser session down, with its uploaded files and its state. Streamlit (1.67) keeps a
    disconnected session for 2 minutes in case it reconnects, but never shuts an expired one down, so its
    uploaded bytes would stay in the server for good (streamlit#12506); the upload sweeper calls this once
    the session has been gone for ``LAYA_UPLOAD_GRACE`` seconds (its stored checkpoint is deleted then too).
    ``clear_user_info_for_session`` is Streamlit's thread-safe way to close a stored session (on logout)."""
    if Runtime.exists() and not Runtime.instance().is_active_session(session):
        Runtime.instance().clear_user_info_for_session(session)


def upload_digest(contents: dict[str, bytes]) -> str:
    """The sha256 naming one upload of checkpoint files (file name -> bytes); its first 12 digits are in the
    upload's messages."""
    return hashlib.sha256(b"".join(n.encode() + hashlib.sha256(d).digest() for n, d in sorted(contents.items()))).hexdigest()


def _upload_checkpoint() -> str | None:
    limit = deploy.max_checkpoint_mb()
    files = st.sidebar.file_uploader(  # no type filter: sort_upload names each file of another kind
        f"{META_FILE} and {WEIGHTS_FILE} (up to {limit:d} MB each)",
        accept_multiple_files=True,
        key="model_upload",
        max_upload_size=limit,
    )
    upload = sort_upload((f.name, f.getvalue()) for f in files or ())
    if upload.ignored:
        st.sidebar.warning(shown(upload.message()))
    if not upload.files:
        st.sidebar.caption("Upload both files of one checkpoint directory.")
        return None
    contents = upload.files
    digest = upload_digest(contents)
    store = upload_store()
    store.alive = session_alive  # the sweeper deletes a closed browser's uploads (and their models)
    store.on_gone = close_gone_session  # ... and the session Streamlit holds for it
    uploads = st.session_state.setdefault("laya_uploads", {})
    if digest not in uploads or not Path(uploads[digest]).is_dir():
        try:
            check = partial(check_upload_in_worker, worker_pool())  # the upload's JSON is checked in a sandboxed worker
            with st.spinner(shown(CHECKING.format(digest=digest[:12]))):  # a wait for a free worker is never silent
                uploads[digest] = str(store.store(contents, owner=session_id(), check=check))
        except (CheckpointError, WorkerError) as error:
            st.sidebar.error(shown(f"Cannot use this checkpoint (upload {digest[:12]}): {error}"))  # tells it from the last
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
        st.sidebar.error(shown(error))
        return None


def _single(path: str, entries: list[Entry]) -> Selection:
    """A checkpoint outside the catalog is its own group; one inside it keeps its group."""
    found = next((e for e in entries if str(e.path) == path), None)
    if found is not None:
        return Selection(path, tuple(e for e in entries if e.group == found.group and e.error is None))
    entry = describe(Path(path))
    return Selection(path, (entry,) if entry.error is None else ())


def pick_model() -> None:
    """Sidebar: choose a checkpoint of the models folder, an uploaded or a local one; store the
    :class:`Selection` in the session."""
    entries = catalog(str(models_root()))
    st.sidebar.header("Model")
    sources = SOURCES if deploy.allow_paths() else SOURCES[:2]
    opened = 2 if opened_link().path and len(sources) == 3 else 0
    source = st.sidebar.radio("Source", sources, index=opened, key="model_source", label_visibility="collapsed",
                              format_func=lambda source: shown(source_label(source)))  # fmt: skip
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
                st.caption(shown(f"{e.path}: {e.error}"))
    st.session_state[SELECTION] = selection
    st.query_params.from_dict(links.encode_view(st.session_state[VIEW]))


def selected() -> Selection:
    """The sidebar's selection; stops the page with a hint if there is none."""
    chosen: Selection | None = st.session_state.get(SELECTION)
    if chosen is None:
        st.info("Choose a model in the sidebar.")
        st.stop()
    return chosen


ANYWAY_LABEL = "Load it anyway (predictions and scores may be NaN)"


def anyway_box() -> None:
    """The "load anyway" checkbox. Its choice lives in the session (:data:`ALLOW_NONFINITE`), not in the
    widget, so it holds on every page: the box has no key and starts from the choice, and a click
    stores the new choice and reruns."""
    checked = st.checkbox(ANYWAY_LABEL, value=anyway())
    if checked != anyway():
        st.session_state[ALLOW_NONFINITE] = checked
        st.rerun()


def show_load_warnings(model: ModelInfo) -> None:
    """A loaded-anyway checkpoint's warnings."""
    for warning in model.warnings:
        st.warning(shown(warning))


def current() -> tuple[ModelInfo, Selection]:
    """The selected checkpoint, loaded; stops the page with a message if there is none or it fails to load."""
    selection = selected()
    try:
        checkpoint = load_model(selection.path)
    except CheckpointError as error:
        st.error(shown(f"Cannot load the checkpoint: {error}"))
        if NONFINITE in str(error):
            anyway_box()
        st.stop()
    show_load_warnings(checkpoint)
    if checkpoint.warnings:  # kept on screen, so the choice can be undone
        anyway_box()
    return checkpoint, selection


def provenance(checkpoint: ModelInfo, image: tuple[str, object] | None = None, reproduce: str = "") -> Provenance:
    """What an exported view was made from: the selected setting, the checkpoint and its weights' sha256, the
    ``(name, pixels)`` input, and ``reproduce`` (default: the link to this view)."""
    selection = selected()
    setting = next((e.group for e in selection.group if str(e.path) == selection.path), checkpoint.name)
    name, pixels = image or ("", None)
    return Provenance(setting, checkpoint.name, weights_sha256(checkpoint.path), reproduce or view_link(), pixels, name)
