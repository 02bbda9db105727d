"""The reader of an attached setting's stored files: confinement to the setting folder, bounded JSON, the
safetensors header checked before any tensor is read."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from laya.model.attached_files import AttachedFileError, attached_file, read_json, read_tensors, tensor_header


@pytest.fixture
def own(tmp_path: Path) -> Path:
    folder = tmp_path / "setting" / "own"
    folder.mkdir(parents=True)
    return folder


def test_files_inside_the_setting_are_read_and_links_out_are_refused(own: Path, tmp_path: Path) -> None:
    assert attached_file(own, "absent.json") is None
    (own.parent / "shared.json").write_text("{}")
    (own / "inside.json").symlink_to(own.parent / "shared.json")  # a link within the setting folder
    assert attached_file(own, "inside.json") == (own.parent / "shared.json").resolve()
    (tmp_path / "secret.json").write_text('{"key": 1}')
    (own / "out.json").symlink_to(tmp_path / "secret.json")
    (own / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    for name in ("out.json", "dangling.json"):
        with pytest.raises(AttachedFileError, match=f"^{name} links outside its setting folder") as refused:
            attached_file(own, name)
        assert refused.value.file == name and str(tmp_path) not in str(refused.value)
    (own / "folder.json").mkdir()
    with pytest.raises(AttachedFileError, match="not a regular file"):
        attached_file(own, "folder.json")


def test_json_is_bounded_in_bytes_depth_and_digits(own: Path) -> None:
    path = own / "x.json"
    path.write_text('{"units": ["a"]}')
    assert read_json(path, "x.json", 100) == {"units": ["a"]}
    for text, message in (("[" * 20 + "]" * 20, "over 30 bytes"), ("[" * 100_000 + "]" * 100_000, "nested too deep"),
                          ("1" * 50, "integer of 50 digits"), ("{", "not valid JSON")):  # fmt: skip
        path.write_text(text)
        with pytest.raises(AttachedFileError, match=message):
            read_json(path, "x.json", 30 if message.startswith("over") else 10**6)


def test_a_safetensors_header_is_read_alone_and_bounded(own: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = own / "x.safetensors"
    save_file({"a": torch.zeros(3, 4), "b": torch.ones(2, dtype=torch.int64)}, path)
    assert tensor_header(path, "x.safetensors") == {"a": ((3, 4), torch.float32), "b": ((2,), torch.int64)}
    assert torch.equal(read_tensors(path, "x.safetensors")["b"], torch.ones(2, dtype=torch.int64))
    monkeypatch.setenv("LAYA_MAX_PARAMS", "10")
    with pytest.raises(AttachedFileError, match="holds 14 elements, over the limit of 10"):
        tensor_header(path, "x.safetensors")
    path.write_bytes(path.read_bytes()[:-8])  # the body cut short
    with pytest.raises(AttachedFileError, match="x.safetensors is not a valid safetensors file"):
        tensor_header(path, "x.safetensors")
