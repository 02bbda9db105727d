"""End to end, the short form of ``benchmarks/upload_load.py``: 3 browser sessions at once upload a checkpoint
and an image against the real dashboard in deployment mode (every upload checked and run in sandboxed workers),
then one session whose worker is killed while its upload is checked chooses the same files again. No upload may
stay silent: each takes effect or shows a message, within a bounded time."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.upload_load import measure, parse

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("chromium")]
MODELS = Path(__file__).resolve().parents[2] / "models"
BOUND_S = 240  # each session's wait for one outcome; a loaded 2-core machine takes tens of seconds


def test_three_sessions_uploading_at_once_all_take_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYA_ALLOW_PATHS", "0")
    summary = measure(parse(["--sessions", "3", "--width", "256", "--timeout", str(BOUND_S)]))
    assert summary["outcomes"] == {"loaded": 3, "message": 0, "silent": 0, "timeout": 0}, summary["per_session"]
    assert summary["upload_to_charts_p95_s"] < BOUND_S
    print(f"upload to charts, 3 sessions: p50 {summary['upload_to_charts_p50_s']} s, "
          f"p95 {summary['upload_to_charts_p95_s']} s (load average {summary['load_average']})")  # fmt: skip


def test_the_same_files_chosen_again_after_a_killed_worker_take_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYA_ALLOW_PATHS", "0")
    summary = measure(parse(["--sessions", "1", "--width", "256", "--kill", "--timeout", str(BOUND_S)]))
    assert summary["killed_workers"] >= 1
    assert summary["outcomes"]["silent"] == 0 and summary["outcomes"]["timeout"] == 0, summary["per_session"]
