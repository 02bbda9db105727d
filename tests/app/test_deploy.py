"""Deployment rules (laya.app.deploy): typed paths cannot probe the server; the roots and switches come
from the environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from laya.app import deploy
from laya.model.checkpoint import META_FILE, CheckpointError


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
