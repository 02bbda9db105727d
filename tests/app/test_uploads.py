"""An uploaded checkpoint (laya/app/uploads.py): which uploaded files make it (every other file is named, with
why), and it is checked before it is written and kept in a bounded, expiring store."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from laya.app import uploads
from laya.app.uploads import ignored_reason, sort_upload
from laya.model.checkpoint import META_FILE, WEIGHTS_FILE, CheckpointError, load_checkpoint


@pytest.fixture(scope="module")
def good(tiny_models: Path) -> Path:
    return tiny_models / "colours-mlp" / "laya"


def test_every_ignored_file_is_named_with_its_reason_and_the_checkpoint_files_are_kept() -> None:
    """The issue's case and its neighbours: ``../model.json`` beside ``model.safetensors`` was ignored silently."""
    upload = sort_upload([
        ("../model.json", b"path"), (WEIGHTS_FILE, b"w1"), ("notes.txt", b"n"), (META_FILE, b"m1"),
        ("config.json", b"c"), (WEIGHTS_FILE, b"w2"), ("a\\model.json", b"win"),
    ])  # fmt: skip
    assert upload.files == {WEIGHTS_FILE: b"w1", META_FILE: b"m1"}  # the first copy of each
    assert upload.ignored == (
        ("../model.json", "a path, not a plain file name"),
        ("notes.txt", "not a .json or .safetensors file"),
        ("config.json", "not named model.json or model.safetensors"),
        (WEIGHTS_FILE, "a second model.safetensors; the first one is used"),
        ("a\\model.json", "a path, not a plain file name"),
    )
    message = upload.message()
    assert message.startswith("Ignored 5 uploaded files: '../model.json' (a path, not a plain file name); ")
    assert all(repr(name) in message for name, _ in upload.ignored)


@pytest.mark.parametrize("name", ["", ".", "..", "/model.json", "model.json\x00.txt", "x/../model.json"])
def test_a_name_that_is_not_a_plain_file_name_is_a_path(name: str) -> None:
    assert ignored_reason(name, ()) == "a path, not a plain file name"


def test_an_upload_with_nothing_ignored_has_no_message() -> None:
    upload = sort_upload([(META_FILE, b"m"), (WEIGHTS_FILE, b"w")])
    assert upload.ignored == () and upload.message() is None and set(upload.files) == {META_FILE, WEIGHTS_FILE}
    only = sort_upload([("../model.json", b"m")])
    assert only.files == {} and only.message().startswith("Ignored 1 uploaded file: '../model.json' ")


def test_upload_store_checks_before_writing_caps_and_expires(good: Path, tmp_path: Path) -> None:
    files = {name: (good / name).read_bytes() for name in (META_FILE, WEIGHTS_FILE)}
    size = sum(map(len, files.values()))
    store = uploads.UploadStore(tmp_path / "store", cap_bytes=2 * size + 10, ttl=60)
    with pytest.raises(CheckpointError, match="exactly two files"):
        store.store({META_FILE: files[META_FILE]})
    with pytest.raises(CheckpointError, match="head.d_star = 'x'"):
        store.store({**files, META_FILE: files[META_FILE].replace(b'"d_star": 8', b'"d_star": "x"')})
    with pytest.raises(CheckpointError, match="sha256 differs"):
        store.store({**files, WEIGHTS_FILE: files[WEIGHTS_FILE][:-4] + b"\x00\x00\x00\x00"})
    assert list(store.root.iterdir()) == []  # nothing written for refused uploads
    first, second = store.store(files), store.store(files)
    assert load_checkpoint(first).meta.classes == load_checkpoint(good).meta.classes
    with pytest.raises(CheckpointError, match="space for uploaded checkpoints"):
        store.store(files)  # over the cap
    old = time.time() - 120
    os.utime(first, (old, old))
    assert store.sweep() == 1 and not first.exists() and second.exists()
    store.discard(second)
    store.discard(good)  # outside the store: ignored
    assert not second.exists() and good.exists()
    store.close()
    assert not store.root.exists()


def test_upload_size_limit_is_separate(monkeypatch: pytest.MonkeyPatch, good: Path) -> None:
    files = {name: (good / name).read_bytes() for name in (META_FILE, WEIGHTS_FILE)}
    monkeypatch.setenv("LAYA_MAX_CHECKPOINT_MB", "1")
    files[WEIGHTS_FILE] = files[WEIGHTS_FILE] + b"\x00" * (2 * 2**20)
    with pytest.raises(CheckpointError, match="the checkpoint upload limit is 1 MB"):
        uploads.check_upload(files)


def test_a_gone_sessions_uploads_are_swept_on_a_timer_and_cannot_fill_the_store(good: Path, tmp_path: Path) -> None:
    """The sweeper thread (not another session's event) deletes a disconnected session's uploads after the
    grace time and reports each deletion; one session's share is capped; a full store first drops the gone."""
    files = {name: (good / name).read_bytes() for name in (META_FILE, WEIGHTS_FILE)}
    size = sum(map(len, files.values()))
    discarded: list[Path] = []
    forgotten: list[str] = []
    store = uploads.UploadStore(tmp_path / "store", cap_bytes=3 * size, session_cap=2 * size, grace=0.2,
                               on_discard=discarded.append)  # fmt: skip
    alive = {"a": True, "b": True}
    store.alive = alive.__getitem__
    store.on_gone = forgotten.append
    a1, a2 = store.store(files, owner="a"), store.store(files, owner="a")
    with pytest.raises(CheckpointError, match="this session's uploaded checkpoints would exceed"):
        store.store(files, owner="a")
    b1 = store.store(files, owner="b")
    with pytest.raises(CheckpointError, match="is full"):  # everyone alive: the cap holds
        store.store(files, owner="c")
    alive["a"] = False  # a's browser closed
    store.start_sweeper(period=0.05)
    deadline = time.monotonic() + 10
    while (a1.exists() or a2.exists() or not forgotten) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not a1.exists() and not a2.exists() and b1.is_dir() and set(discarded) == {a1, a2}
    assert forgotten == ["a"]  # once: the gone session's uploaded bytes are released with its folders
    assert store.store(files, owner="c").is_dir()  # a's leftovers no longer take c's space
    store.close()
