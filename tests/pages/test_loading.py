"""The dashboard's failure memory (pages/common/loading.py), without a browser: only deterministic failures are
remembered by the process, and a checkpoint that fails on a session's first image is broken for that session."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from laya.model.checkpoint import CheckpointError
from laya.sandbox.client import ModelFailed
from laya.sandbox.pool import WorkerError
from pages.common import loading


class Stopped(Exception):
    """What ``st.stop()`` does here: end the page."""


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    loading._failures.clear()
    for key in (loading.BROKEN, loading.ANSWERED):
        loading.st.session_state.pop(key, None)
    monkeypatch.setenv("LAYA_SANDBOX", "all")  # bundled models go to workers too

    def stop() -> None:
        raise Stopped

    monkeypatch.setattr(loading.st, "stop", stop)


def loader(monkeypatch: pytest.MonkeyPatch, *failures: Exception) -> list[str]:
    """Make loads fail with ``failures`` in turn, then succeed (``"info"``); returns the loads tried."""
    calls: list[str] = []

    def load_info(path: str, stamp: int, allow_nonfinite: bool) -> str:
        calls.append(path)
        if len(calls) <= len(failures):
            raise failures[len(calls) - 1]
        return "info"

    monkeypatch.setattr(loading, "_load_info", load_info)
    return calls


@pytest.mark.parametrize("kind", ["timeout", "signal", "busy", "died"])
def test_a_transient_worker_failure_is_tried_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str) -> None:
    calls = loader(monkeypatch, WorkerError(kind, f"a {kind} message"))
    with pytest.raises(CheckpointError, match=f"a {kind} message"):
        loading.load_model(str(tmp_path))
    assert loading.load_model(str(tmp_path)) == "info" and len(calls) == 2  # the next visitor is not refused


@pytest.mark.parametrize("error", [WorkerError("memory", "needs more memory"), CheckpointError("head.tau = -1")])
def test_a_deterministic_failure_is_remembered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, error) -> None:
    calls = loader(monkeypatch, error)
    for _ in range(3):
        with pytest.raises(CheckpointError, match=str(error)):
            loading.load_model(str(tmp_path))
    assert len(calls) == 1 and len(loading._failures()) == 1


def test_a_checkpoint_failing_on_its_first_image_is_broken_for_the_session(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    message = "the model failed while explaining the image (IndexError in laya/analysis/head/spatial.py)"
    calls = loader(monkeypatch)
    explanation = SimpleNamespace(fit_note=None)  # all the page reads of an Explanation here
    answers = iter([explanation, ModelFailed(message)])

    def explain(path: str, *args) -> SimpleNamespace:
        answer = next(answers) if path.endswith("works") else ModelFailed(message)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(loading, "_explain", explain)
    broken, works = str(tmp_path / "broken"), str(tmp_path / "works")
    with pytest.raises(Stopped):
        loading.explain(broken, "a.png", b"image")
    with pytest.raises(CheckpointError, match=r"IndexError in laya/analysis/head/spatial.py"):
        loading.load_model(broken)  # not tried again in this session
    assert calls == []
    assert loading.explain(works, "a.png", b"image") is explanation
    with pytest.raises(Stopped):  # a later image fails: that image only
        loading.explain(works, "b.png", b"image")
    assert loading.load_model(works) == "info"
    loading.st.session_state.pop(loading.BROKEN)  # another session
    assert loading.load_model(broken) == "info"


def test_the_network_explanation_is_keyed_on_both_lens_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A changed ``tuned_lens.safetensors`` beside an unchanged ``tuned_lens.json`` (same modification time) is not
    served from the cache: the explanation's key holds both files' versions (issue 43: it held the JSON's alone)."""
    keys: list[tuple] = []

    def explained(path: str, stamps: tuple, *args: object) -> str:
        keys.append(stamps)
        return "explanation"

    monkeypatch.setattr(loading, "_network", explained)
    (tmp_path / "tuned_lens.json").write_text("{}")
    weights = tmp_path / "tuned_lens.safetensors"
    weights.write_bytes(b"1" * 8)
    loading.network(str(tmp_path), "x.png", b"")
    when = weights.stat().st_mtime_ns
    weights.write_bytes(b"2" * 16)
    os.utime(weights, ns=(when, when))  # the same time: only its size tells the new file
    loading.network(str(tmp_path), "x.png", b"")
    assert len(keys) == 2 and keys[0] != keys[1]
