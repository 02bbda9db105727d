"""The checkpoint upload in the sidebar (pages/common/sidebar.py) is never silent: while the upload is checked,
which on a busy server first waits for a free sandboxed worker, the page shows a spinner naming the upload,
and every uploaded file it ignores is named in a warning."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from laya.app.text import unplain
from laya.app.uploads import check_upload
from laya.model.checkpoint import META_FILE, WEIGHTS_FILE
from pages.common import sidebar, upload_digest

APP = Path(__file__).resolve().parents[2] / "app.py"


@pytest.fixture(autouse=True)
def _data_root(monkeypatch: pytest.MonkeyPatch, image_folder: Path) -> None:
    monkeypatch.setenv("LAYA_PATH_ROOTS", str(image_folder))


def test_the_upload_check_runs_under_a_spinner_naming_the_upload(
    monkeypatch: pytest.MonkeyPatch, tiny_models: Path
) -> None:
    """Before the spinner, a check waiting for a worker left the previous run's "Choose a model in the sidebar."
    on screen with no spinner and no message (12 browser sessions: 10-55 s each, benchmarks/upload_load.py)."""
    showing: list[str] = []
    seen: list[list[str]] = []
    spinner = st.spinner

    @contextlib.contextmanager
    def recorded(text: str, *args, **kwargs):
        showing.append(text)
        try:
            with spinner(text, *args, **kwargs):
                yield
        finally:
            showing.pop()

    def check(pool, files) -> None:  # a sandboxed worker's check, as seen from the server: it waits
        seen.append(list(showing))
        check_upload(files)

    monkeypatch.setattr(st, "spinner", recorded)
    monkeypatch.setattr(sidebar, "check_upload_in_worker", check)
    monkeypatch.setenv("LAYA_MODELS", str(tiny_models))
    good = tiny_models / "colours-mlp" / "laya"
    files = {name: (good / name).read_bytes() for name in (META_FILE, WEIGHTS_FILE)}
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.sidebar.radio[0].set_value("Upload a checkpoint").run()
    uploads = [(name, data, "application/octet-stream") for name, data in files.items()]
    at.sidebar.file_uploader(key="model_upload").set_value(uploads).run()
    assert not at.exception and not at.error
    assert [len(texts) for texts in seen] == [1], seen  # one check, under one spinner
    assert upload_digest(files)[:12] in seen[0][0] and "sandboxed worker" in seen[0][0]
    assert "Upload an image" in at.info[0].value  # it took effect: the Inspect page runs on the upload


def test_every_ignored_upload_file_is_named_in_the_sidebar(monkeypatch: pytest.MonkeyPatch, tiny_models: Path) -> None:
    """``../model.json`` with ``model.safetensors`` was ignored with no message; a file of another kind ended the
    page with Streamlit's redacted error; a second ``model.json`` was dropped silently."""
    monkeypatch.setattr(sidebar, "check_upload_in_worker", lambda pool, files: check_upload(files))
    monkeypatch.setenv("LAYA_MODELS", str(tiny_models))
    good = tiny_models / "colours-mlp" / "laya"
    meta, weights = (good / META_FILE).read_bytes(), (good / WEIGHTS_FILE).read_bytes()
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.sidebar.radio[0].set_value("Upload a checkpoint").run()
    at.sidebar.file_uploader(key="model_upload").set_value([("../model.json", meta, "application/json"),
                                                            (WEIGHTS_FILE, weights, "application/octet-stream")]).run()  # fmt: skip
    assert not at.exception and len(at.sidebar.warning) == 1
    assert "Ignored 1 uploaded file: '../model.json' (a path, not a plain file name)" in unplain(at.sidebar.warning[0].value)
    assert "got ['model.safetensors']" in unplain(at.sidebar.error[0].value)  # what is left is not a checkpoint

    extras = [("notes.txt", b"hi", "text/plain"), (META_FILE, b"{}", "application/json")]
    files = [(META_FILE, meta, "application/json"), (WEIGHTS_FILE, weights, "application/octet-stream"), *extras]
    at.sidebar.file_uploader(key="model_upload").set_value(files).run()
    assert not at.exception and not at.sidebar.error and "Upload an image" in at.info[0].value  # the pair loaded
    warning = unplain(at.sidebar.warning[0].value)
    assert "'notes.txt' (not a .json or .safetensors file); 'model.json' (a second model.json" in warning
