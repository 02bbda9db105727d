"""Deployment rules (laya.app.deploy): typed paths cannot probe the server, uploads are checked before
they are written and kept in a bounded, expiring store."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from laya.app import deploy
from laya.model.checkpoint import META_FILE, WEIGHTS_FILE, CheckpointError, load_checkpoint


@pytest.fixture(scope="module")
def good(tiny_models: Path) -> Path:
    return tiny_models / "colours-mlp" / "laya"


def refusal(text: str, roots: list[Path]) -> str:
    with pytest.raises(CheckpointError) as refused:
        deploy.resolve_path(text, roots)
    return str(refused.value)


def test_typed_paths_resolve_only_inside_the_roots(good: Path, tiny_models: Path, tmp_path: Path) -> None:
    roots = [tiny_models]
    assert deploy.resolve_path(str(good), roots) == good.resolve()
    assert deploy.resolve_path(str(good / META_FILE), roots) == good.resolve()
    assert deploy.resolve_path("colours-mlp/laya", roots) == good.resolve()  # relative to the first root
    secret = tmp_path / "secret.txt"
    secret.write_text("token")
    (tmp_path / "escape").symlink_to(good)
    link_root = tmp_path / "root"
    link_root.mkdir()
    (link_root / "out").symlink_to(tmp_path)
    answers = {
        refusal(text, roots if text != "out/escape" else [link_root])
        for text in (
            str(secret),  # exists, outside
            str(tmp_path / "missing.txt"),  # missing, outside
            "/etc/shadow",
            "/root/.ssh/id_rsa",
            str(tiny_models / ".." / "secret.txt"),
            str(tiny_models / "colours-mlp"),  # inside, not a checkpoint
            str(tiny_models / "nothing-here"),  # inside, missing
            "../../etc/passwd",
            "bad\x00name",
            "x" * 300,  # one name over 255 bytes
            "/a" * 3000,  # path over 4096 bytes
            "",
            "out/escape",  # a symlink leading out of the root to a real checkpoint
        )
    }
    assert answers == {deploy.PATH_REFUSED}  # one answer for everything: no oracle


def test_allow_paths_and_roots_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LAYA_ALLOW_PATHS", "0")
    assert not deploy.allow_paths()
    monkeypatch.setenv("LAYA_ALLOW_PATHS", "1")
    assert deploy.allow_paths()
    monkeypatch.setenv("LAYA_MODELS", str(tmp_path / "m"))
    monkeypatch.setenv("LAYA_PATH_ROOTS", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    assert deploy.path_roots() == [tmp_path / "m", tmp_path / "a", tmp_path / "b"]
    assert tmp_path / "a" in deploy.data_roots()


def test_upload_store_checks_before_writing_caps_and_expires(good: Path, tmp_path: Path) -> None:
    files = {name: (good / name).read_bytes() for name in (META_FILE, WEIGHTS_FILE)}
    size = sum(map(len, files.values()))
    store = deploy.UploadStore(tmp_path / "store", cap_bytes=2 * size + 10, ttl=60)
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
        deploy.check_upload(files)


def test_a_gone_sessions_uploads_are_swept_on_a_timer_and_cannot_fill_the_store(good: Path, tmp_path: Path) -> None:
    """The sweeper thread (not another session's event) deletes a disconnected session's uploads after the
    grace time and reports each deletion; one session's share is capped; a full store first drops the gone."""
    files = {name: (good / name).read_bytes() for name in (META_FILE, WEIGHTS_FILE)}
    size = sum(map(len, files.values()))
    discarded: list[Path] = []
    forgotten: list[str] = []
    store = deploy.UploadStore(tmp_path / "store", cap_bytes=3 * size, session_cap=2 * size, grace=0.2,
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
