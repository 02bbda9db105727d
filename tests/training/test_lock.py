"""The training output lock: a second writer is refused, a stale lock from a dead process is taken over."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from laya.training.lock import LOCK_FILE, OutputLockedError, output_lock


def test_second_writer_is_refused_and_lock_released(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / LOCK_FILE).write_text(str(holder.pid))
        with (
            pytest.raises(OutputLockedError, match=f"another train process \\(pid {holder.pid}\\)"),
            output_lock(tmp_path),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
    with output_lock(tmp_path) as lock:  # the holder is dead: its lock is stale and taken over
        assert lock.read_text() == str(os.getpid())
    assert not (tmp_path / LOCK_FILE).exists()


def test_cli_train_refuses_a_locked_out(tmp_path: Path, capsys) -> None:
    from laya.cli import main

    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        out = tmp_path / "run"
        out.mkdir()
        (out / LOCK_FILE).write_text(str(holder.pid))
        assert main(["train", "--out", str(out), "--max-epochs", "1"]) == 2
        assert f"pid {holder.pid}" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
