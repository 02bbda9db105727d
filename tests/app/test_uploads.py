"""Which uploaded files make a checkpoint upload (laya/app/uploads.py): every other file is named, with why."""

from __future__ import annotations

import pytest

from laya.app.uploads import ignored_reason, sort_upload
from laya.model.checkpoint import META_FILE, WEIGHTS_FILE


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
