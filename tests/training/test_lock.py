"""The training output lock (an OS file lock): a second writer is refused, a dead holder's lock is free at
once, an empty lock file means nothing, and of many processes starting at once exactly one holds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from laya.training.lock import LOCK_FILE, OutputLockedError, output_lock

REPO = Path(__file__).resolve().parents[2]
HOLD = (
    "import sys, time\n"
    "from laya.training.lock import output_lock\n"
    "with output_lock(sys.argv[1]):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(60)\n"
)


def hold(out: Path) -> subprocess.Popen:
    """A process holding ``out``'s lock (returns once it holds it)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_second_writer_is_refused_and_a_killed_holder_frees_the_lock(tmp_path: Path) -> None:
    holder = hold(tmp_path)
    try:
        with (
            pytest.raises(OutputLockedError, match=f"another train process \\(pid {holder.pid}\\)"),
            output_lock(tmp_path),
        ):
            pass
    finally:
        holder.kill()  # kill -9: no clean-up runs; the kernel drops its lock
        holder.wait()
    with output_lock(tmp_path) as lock:
        assert lock.read_text() == str(os.getpid())
    assert (tmp_path / LOCK_FILE).read_text() == ""  # released (the file stays, empty)


def test_an_empty_or_garbled_lock_file_is_not_an_owner(tmp_path: Path) -> None:
    for content in ("", "not a pid", "0", "99999999"):
        (tmp_path / LOCK_FILE).write_text(content)
        with output_lock(tmp_path):
            pass
    holder = hold(tmp_path)
    try:
        (tmp_path / LOCK_FILE).write_text("")  # the holder's pid erased: it still holds the lock
        with pytest.raises(OutputLockedError, match="pid unknown"), output_lock(tmp_path):
            pass
    finally:
        holder.kill()
        holder.wait()


RACE = (  # stdlib only (the lock module loaded from its file): 16 start fast even on 2 busy cores
    "import importlib.util, os, sys, time\n"
    "spec = importlib.util.spec_from_file_location('lock', sys.argv[4])\n"
    "lock = importlib.util.module_from_spec(spec); spec.loader.exec_module(lock)\n"
    "OutputLockedError, output_lock = lock.OutputLockedError, lock.output_lock\n"
    "gate, n = sys.argv[2], int(sys.argv[3])\n"
    "open(os.path.join(gate, str(os.getpid())), 'w').close()\n"
    "deadline = time.time() + 90\n"
    "while len(os.listdir(gate)) < n and time.time() < deadline: time.sleep(0.005)\n"  # a barrier: all n started
    "try:\n"
    "    with output_lock(sys.argv[1]):\n"
    "        time.sleep(4)\n"  # held until every other process has tried
    "        print('held')\n"
    "except OutputLockedError:\n"
    "    print('refused')\n"
)


def test_many_processes_starting_at_once_find_exactly_one_holder(tmp_path: Path) -> None:
    """16 processes pass a barrier, then try a fresh folder's lock at once; 2 rounds: one holder each."""
    n = 16
    for round_ in range(2):
        out, gate = tmp_path / f"round{round_}", tmp_path / f"gate{round_}"  # fresh: no lock file yet
        gate.mkdir()
        procs = [
            subprocess.Popen(
                [sys.executable, "-S", "-c", RACE, str(out), str(gate), str(n), str(REPO / "laya/training/lock.py")],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(n)
        ]
        results = [p.communicate(timeout=120)[0].strip() for p in procs]
        assert sorted(results) == ["held"] + ["refused"] * (n - 1), json.dumps(results)


def test_cli_train_refuses_a_locked_out(tmp_path: Path, capsys) -> None:
    from laya.cli import main

    out = tmp_path / "run"
    holder = hold(out)
    try:
        assert main(["train", "--out", str(out), "--max-epochs", "1"]) == 2
        assert f"pid {holder.pid}" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
