"""Sandboxed workers: the same results as in-process, and a worker that runs out of memory, is killed
mid-request or times out gives a clear error while the pool goes on serving; a request that raises is a
refusal and the worker lives; a dead idle worker is replaced; idle workers are released."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from laya.analysis.depth.input_depth import input_depth
from laya.analysis.head.explain import explain_bytes
from laya.analysis.patching import patch_bytes
from laya.data.images import ImageError, load_image_tensor
from laya.model.checkpoint import (
    META_FILE,
    WEIGHTS_FILE,
    CheckpointError,
    CheckpointMeta,
    build_model,
    load_checkpoint,
    save_checkpoint,
)
from laya.sandbox import child
from laya.sandbox.client import Sandboxed, check_upload_in_worker
from laya.sandbox.pool import PoolConfig, Refused, WorkerError, WorkerPool, death
from tests.model.fuzz_checkpoints import vit_checkpoint
from tests.sandbox.test_protocol import same


def wait_until(condition, timeout: float = 60.0, what: str = "condition") -> None:
    """Poll ``condition`` until it holds (never a fixed sleep); fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(scope="module")
def good(tiny_models: Path) -> Path:
    return tiny_models / "colours-mlp" / "laya"


@pytest.fixture(scope="module")
def image(tiny_models: Path) -> bytes:
    return sorted((tiny_models / "colours-mlp" / "examples").iterdir())[0].read_bytes()


@pytest.fixture(scope="module")
def pool() -> WorkerPool:
    pool = WorkerPool(PoolConfig(size=1, timeout=60, idle_timeout=600))
    yield pool
    pool.close()


def test_worker_results_equal_the_in_process_ones(pool: WorkerPool, tiny_models: Path, image: bytes) -> None:
    for head in ("laya", "concat"):
        path = tiny_models / "colours-mlp" / head
        remote = Sandboxed(pool, str(path))
        checkpoint = load_checkpoint(path)
        assert remote.info().meta == checkpoint.meta and remote.info().layer_names == checkpoint.layer_names
        ours, theirs = explain_bytes(checkpoint, image, mode="zero"), remote.explain(image, "zero")
        assert same(ours.probs, theirs.probs) and same(ours.drops, theirs.drops)
        assert ours.prediction == theirs.prediction and list(ours.scores) == list(theirs.scores)
        assert all(same(ours.scores[m], theirs.scores[m]) for m in ours.scores)
        depth = input_depth(checkpoint, load_image_tensor(image, 3, 8), None)
        assert same(remote.depth(image).attribution.terms, depth.attribution.terms)
    report = Sandboxed(pool, str(tiny_models / "colours-mlp" / "laya")).evaluate(limit=6)
    assert report.data["dataset"]["n"] == 6 and 0 <= report.accuracy <= 1


def test_refusals_come_back_as_the_in_process_errors(pool: WorkerPool, good: Path, tmp_path: Path) -> None:
    remote = Sandboxed(pool, str(good))
    pid = pool.pids()[0]
    with pytest.raises(ImageError):
        remote.explain(b"not an image")
    with pytest.raises(CheckpointError, match="upload exactly two files"):
        check_upload_in_worker(pool, {META_FILE: b"{}"})
    files = {name: (good / name).read_bytes() for name in (META_FILE, WEIGHTS_FILE)}
    check_upload_in_worker(pool, files)
    record = json.loads(files[META_FILE])
    record["backbone"]["widths"] = [10**9]
    with pytest.raises(CheckpointError, match="backbone"):
        check_upload_in_worker(pool, {**files, META_FILE: json.dumps(record).encode()})
    missing = tmp_path / "nothing"
    with pytest.raises(CheckpointError):
        Sandboxed(pool, str(missing)).info()
    assert pool.pids() == [pid]  # a refusal does not cost the worker


def big_checkpoint(good: Path, dest: Path, width: int) -> Path:
    """A valid checkpoint of the tiny setting with two hidden layers of ``width`` units (4 * width² bytes)."""
    record = json.loads((good / META_FILE).read_text())
    record["backbone"]["widths"] = [width, width]
    record.pop("layer_names", None)
    record["backbone"].pop("layer_names", None)
    meta = CheckpointMeta.from_dict(record)
    return save_checkpoint(build_model(meta), meta, dest)


def test_out_of_memory_killed_and_timed_out_workers_leave_the_pool_serving(
    good: Path, image: bytes, tmp_path: Path
) -> None:
    pool = WorkerPool(PoolConfig(size=1, timeout=30, env={"LAYA_WORKER_MEMORY_MB": "320"}))
    try:
        ok = Sandboxed(pool, str(good))
        first = pool.pids()
        assert ok.explain(image).label
        big = big_checkpoint(good, tmp_path / "big", 5000)  # 100 MB of weights: file + model + what runs > 320 MB
        with pytest.raises(WorkerError, match="memory") as failure:
            Sandboxed(pool, str(big)).info()
        assert failure.value.kind == "memory"
        assert ok.explain(image).label  # a fresh worker answers the next request
        assert pool.pids() and pool.pids() != first

        victim = pool.pids()[0]
        with pytest.raises(WorkerError, match="ended by signal SIGKILL") as failure:  # at the first progress frame
            ok.evaluate(limit=24, progress=lambda f, m: os.kill(victim, signal.SIGKILL))
        assert failure.value.kind == "signal" and failure.value.transient and victim not in pool.pids()
        assert ok.explain(image).label

        slow = pool.pids()[0]
        pool.config = PoolConfig(size=1, timeout=0.5, env=pool.config.env)
        with pytest.raises(WorkerError, match="longer than") as failure:  # the visitor waits 1 s at the first frame
            ok.evaluate(limit=24, progress=lambda f, m: time.sleep(1.0))
        assert failure.value.kind == "timeout"
        wait_until(lambda: gone(slow), 10, "the timed-out worker to end")
        pool.config = PoolConfig(size=1, timeout=30, env=pool.config.env)
        assert ok.explain(image).label
    finally:
        pool.close()


def test_busy_pool_refuses_after_the_queue_timeout(good: Path, image: bytes) -> None:
    pool = WorkerPool(PoolConfig(size=1, timeout=30, queue_timeout=0.2))
    try:
        remote = Sandboxed(pool, str(good))
        remote.info()
        started = threading.Event()
        release = threading.Event()
        worker = threading.Thread(target=remote.evaluate, args=(24, lambda f, m: (started.set(), release.wait(10))))
        worker.start()
        started.wait(30)
        with pytest.raises(WorkerError, match="busy"):
            remote.explain(image)
        release.set()
        worker.join()
        assert remote.explain(image).label
    finally:
        pool.close()


def test_idle_and_forgotten_workers_are_released(good: Path, image: bytes) -> None:
    pool = WorkerPool(PoolConfig(size=2, idle_timeout=0.5))
    try:
        Sandboxed(pool, str(good)).info()
        pid = pool.pids()[0]
        wait_until(lambda: not pool.pids() and gone(pid), 30, "the idle worker to end")
        pool.config = PoolConfig(size=2, idle_timeout=600)
        remote = Sandboxed(pool, str(good))
        remote.info()
        pid = pool.pids()[0]
        remote.forget()  # its only model: the worker ends, its memory goes back to the OS
        wait_until(lambda: gone(pid), 10, "the emptied worker to end")
        assert not pool.pids()
    finally:
        pool.close()


def test_the_worker_has_no_network() -> None:
    """In a fresh process confined like a worker, connecting to a listening local port fails."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    probe = (
        "import runpy, socket, sys\n"
        f"isolate = runpy.run_path({str(Path(child.__file__))!r}, run_name='probe')['isolate_network']\n"
        "print(isolate())\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('connected')\n"
        "except OSError as error:\n    print('refused', type(error).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60).stdout
    assert "refused" in out and "connected" not in out, out
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()
    assert "audit hook" in out.splitlines()[0]


def test_worker_limits_are_set() -> None:
    probe = (
        "import resource, runpy\n"
        f"mod = runpy.run_path({str(Path(child.__file__))!r}, run_name='probe')\n"
        "used = mod['address_space']()\n"
        "limits = mod['limit_resources'](100, 16)\n"
        "print(limits['address_space'] - used, resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60).stdout.split()
    assert 100 * 2**20 <= int(out[0]) < 110 * 2**20 and out[1] == "16"
    assert torch.get_num_threads() >= 1  # the test process itself is untouched


def test_patching_in_a_worker_equals_the_in_process_sweep(pool: WorkerPool, tiny_models: Path, image: bytes) -> None:
    source = sorted((tiny_models / "colours-mlp" / "examples").iterdir())[2].read_bytes()
    for head, where in (("laya", "head"), ("concat", "backbone")):
        path = tiny_models / "colours-mlp" / head
        ours = patch_bytes(load_checkpoint(path), image, source, where)
        theirs = Sandboxed(pool, str(path)).patch(image, source, where)
        for field in ("base_logits", "logits", "masks", "source_logits", "alpha"):
            a, b = getattr(ours, field), getattr(theirs, field)
            assert (a is None and b is None) or same(a, b), field
    with pytest.raises(ImageError):
        Sandboxed(pool, str(tiny_models / "colours-mlp" / "laya")).patch(image, b"not an image")


def test_a_checkpoint_whose_layers_repeat_is_refused_at_load_and_the_worker_lives(
    pool: WorkerPool, good: Path, image: bytes, tmp_path: Path
) -> None:
    """Issue 28: a timm ``test_vit`` with ``backbone.indices: [0, 0, 0]`` loaded, then every image raised
    ``IndexError`` in laya/analysis/head/spatial.py and ended the worker."""
    path = vit_checkpoint(good, tmp_path / "vit000", indices=[0], recorded=[0, 0, 0])
    Sandboxed(pool, str(good)).info()
    pid = pool.pids()
    with pytest.raises(CheckpointError, match=r"backbone.indices = \[0, 0, 0\]: must name different layers"):
        Sandboxed(pool, str(path)).info()
    files = {name: (path / name).read_bytes() for name in (META_FILE, WEIGHTS_FILE)}
    with pytest.raises(CheckpointError, match="backbone.indices"):
        check_upload_in_worker(pool, files)
    assert pool.pids() == pid and Sandboxed(pool, str(good)).explain(image).label
    fine = vit_checkpoint(good, tmp_path / "vit01", indices=[0, 1])  # distinct layers still load and explain
    assert Sandboxed(pool, str(fine)).info().layer_names == ("block 1", "block 2")
    assert Sandboxed(pool, str(fine)).explain(image).probs.isfinite().all()


def test_an_exception_in_the_worker_is_a_refusal_naming_it_and_the_worker_lives(
    pool: WorkerPool, good: Path, image: bytes
) -> None:
    """``int(inf)`` raises ``OverflowError``, which the worker's loop did not catch: it exited."""
    Sandboxed(pool, str(good)).info()
    pid = pool.pids()
    with pytest.raises(Refused) as refusal:
        pool.call({"op": "evaluate", "path": str(good), "allow_nonfinite": False, "confine": None,
                   "limit": float("inf")})  # fmt: skip
    assert refusal.value.kind == "error"
    expected = "the model failed while evaluating on the test set (OverflowError in laya/sandbox/serve.py)"
    assert str(refusal.value) == expected
    assert pool.pids() == pid and Sandboxed(pool, str(good)).explain(image).label


def test_a_dead_idle_worker_is_replaced_before_the_next_request(good: Path, image: bytes) -> None:
    pool = WorkerPool(PoolConfig(size=1, timeout=60, idle_timeout=2))  # the timer looks every 0.5 s
    try:
        remote = Sandboxed(pool, str(good))
        remote.info()
        (victim,) = pool.pids()
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: pool.pids() and pool.pids() != [victim], 60, "a replacement worker")
        (spare,) = pool.pids()
        assert not gone(spare)
        assert remote.explain(image).label and pool.pids() == [spare]  # no failure, and served by the spare
    finally:
        pool.close()


def test_each_way_a_worker_ends_has_its_own_accurate_message() -> None:
    cases = {
        "memory": death(3, 320, 120),
        "cpu": death(-signal.SIGXCPU, 320, 120),
        "signal": death(-signal.SIGKILL, 320, 120),
        "segv": death(-signal.SIGSEGV, 320, 120),
        "exit": death(1, 320, 120),
        "none": death(None, 320, 120),
    }
    assert cases["memory"].kind == "memory" and "320 MB" in str(cases["memory"])
    assert cases["cpu"].kind == "cpu" and "120 CPU-seconds" in str(cases["cpu"])
    assert cases["signal"].kind == "signal" and "signal SIGKILL" in str(cases["signal"])
    assert "signal SIGSEGV" in str(cases["segv"]) and "status 1" in str(cases["exit"])
    assert len({str(e) for e in cases.values()}) == len(cases)
    assert not any("None" in str(e) or "memory" in str(e) for k, e in cases.items() if k != "memory")
    assert [k for k, e in cases.items() if not e.transient] == ["memory", "cpu"]
