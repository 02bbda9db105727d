"""The checkpoint fuzzer in CI: Hypothesis mutates a tiny MLP and a timm ``test_vit`` checkpoint
(tests/model/fuzz_checkpoints.py), and each one goes the dashboard's sandboxed way: the upload check, a
load and one explained image in a worker process (reused across examples: it starts once, printed with -s).

Each example must end in a clean refusal or a finite answer, never an Inf/NaN one (weights of 1e18 or more
load correctly and may overflow: refused saying so, which only they may be), within ``EXAMPLE_S`` seconds,
with the same worker alive afterwards (or a fresh one after a memory or CPU-time limit) and its peak RSS
under ``WORKER_MB`` + its imports; a refusal naming a server path reads the same whether that file exists.
A fresh seed each run (``LAYA_FUZZ_SEED`` repeats one), printed with the failing example;
``LAYA_FUZZ_SECONDS`` (default 40) bounds both properties together, once each has run its minimum examples
whatever the time (a loaded machine is slow, never exempt): examples past it then pass without running.

An attached setting's stored files (a timm ``test_vit``'s own head with its tuned lens and network report) get
their own quarter of the box each: a mutated ``tuned_lens.*`` must cost the worker's answer only its lens (the unit
profile and Grad-CAM still come back, in time, from the same worker under the same peak RSS); a mutated
``network.*`` must read, with every view the pages build of it, or be refused by an ``AttachedFileError``, in
``FILE_S`` seconds and under ``FILE_MB`` more peak RSS.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import resource
import secrets
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, note, seed, settings
from hypothesis import strategies as st
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from laya.analysis.network.lens import LENS_CONFIG, LENS_WEIGHTS
from laya.analysis.network.report import REPORT_JSON, REPORT_TENSORS, run_network
from laya.model.checkpoint import META_FILE, WEIGHTS_FILE, Confinement, load_checkpoint
from laya.sandbox.client import Sandboxed
from laya.sandbox.pool import PoolConfig, WorkerError, WorkerPool
from laya.training.attach import own_checkpoint
from tests.analysis.network.test_report import QUICK
from tests.model.fuzz_checkpoints import (
    HUGE,
    LENS_EDITS,
    PROBES,
    RECORD_EDITS,
    REPORT_EDITS,
    WEIGHT_EDITS,
    Outcome,
    attempt,
    attempt_lens,
    attempt_report,
    checkpoint_files,
    edit_record,
    edit_weights,
    stored_file,
    vit_checkpoint,
)
from tests.model.test_own_head import _save, networks
from tests.sandbox.test_pool import gone, wait_until
from tests.training.test_attach import _config, _retarget

BUDGET_S = float(os.environ.get("LAYA_FUZZ_SECONDS", "40"))
SEED = int(os.environ.get("LAYA_FUZZ_SEED") or secrets.randbelow(2**32))
EXAMPLE_S = 60.0  # one example: up to three requests on a loaded machine (each capped at 30 s by the pool)
WORKER_MB = 1024  # RLIMIT_AS a worker may add to its imports
IMPORTS_MB = 1024  # what a worker holds after its imports (torch, timm), generously
FILE_S = 10.0  # one stored network report read and its views built
FILE_MB = 256  # the most a stored network report may raise this process's peak RSS
SETTINGS = settings(
    max_examples=int(os.environ.get("LAYA_FUZZ_EXAMPLES", "1000")),
    deadline=timedelta(seconds=2 * EXAMPLE_S),  # a backstop: the example's own time is asserted below
    database=None,
    derandomize=False,
    phases=(Phase.explicit, Phase.generate),  # no shrinking: it would rerun workers well past the time box
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)


def fuzz(test):
    """The fuzzer's settings and this run's seed."""
    return seed(SEED)(SETTINGS(test))


@pytest.fixture(scope="module")
def pool() -> WorkerPool:
    env = {"LAYA_WORKER_MEMORY_MB": str(WORKER_MB), "LAYA_WORKER_CPU_S": "30", "LAYA_WORKER_THREADS": "1"}
    pool = WorkerPool(PoolConfig(size=1, timeout=30, idle_timeout=3600, env=env))
    started = time.monotonic()
    pool.warm()
    print(f"fuzz seed {SEED}; worker start-up {time.monotonic() - started:.1f} s")
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def bases(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, bytes]]:
    good = tiny_models / "colours-mlp" / "laya"
    vit = vit_checkpoint(good, tmp_path_factory.mktemp("fuzz") / "vit", indices=[0, 1])  # 2 of test_vit's 6 blocks
    return {p.name: (json.loads((p / META_FILE).read_text()), (p / WEIGHTS_FILE).read_bytes()) for p in (good, vit)}


@pytest.fixture(scope="module")
def image(tiny_models: Path) -> bytes:
    return sorted((tiny_models / "colours-mlp" / "examples").iterdir())[0].read_bytes()


@pytest.fixture
def folders(tmp_path: Path) -> Iterator[Path]:
    return (tmp_path / str(i) for i in itertools.count())


@pytest.fixture
def counts() -> Counter[str]:
    return Counter()


@pytest.fixture(scope="module")
def clock() -> dict[str, float]:
    return {"start": time.monotonic(), "failed": 0.0}


def live_worker(pool: WorkerPool) -> int:
    """The pid of the pool's one worker once it is up (a spare replaces one ended by a limit)."""
    wait_until(lambda: len(pool.pids()) == 1 and not gone(pool.pids()[0]), 180, "a live worker")
    return pool.pids()[0]


def peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        return 0.0
    return next(int(line.split()[1]) / 1024 for line in status.read_text().splitlines() if line.startswith("VmHWM"))


def judged(pool: WorkerPool, files: dict[str, bytes], folder: Path, image: bytes, huge: bool) -> Outcome:
    """One attempt, asserting what every example must hold (see the module docstring)."""
    before = live_worker(pool)
    try:
        outcome = attempt(pool, files, folder, image)
    except WorkerError as error:
        assert error.kind in ("memory", "cpu"), f"no answer ({error.kind}): {error}"
        outcome = Outcome("limit", str(error))
    assert outcome.seconds < EXAMPLE_S, f"took {outcome.seconds:.1f} s"
    assert outcome.finite, "a non-finite answer: an output that overflowed must be refused saying so"
    assert outcome.stage != "overflow" or huge, f"an overflow from weights under 1e18: {outcome.message}"
    after = live_worker(pool)
    assert outcome.stage == "limit" or after == before, f"worker {before} was replaced by {after}"
    assert peak_rss_mb(after) < WORKER_MB + IMPORTS_MB
    return outcome


def boxed(clock: dict[str, float], share: float, minimum: int):
    """Run a property's first ``minimum`` examples whatever the time, then an example only within the property's
    ``share`` of the time box (``BUDGET_S`` from ``clock["start"]``), naming the seed; a failure is marked so
    that its replay (and every example after it) runs past the box."""

    def wrap(example):
        ran = 0

        @functools.wraps(example)
        def run(**kwargs) -> None:
            nonlocal ran
            if ran >= minimum and not clock["failed"] and time.monotonic() - clock["start"] > share * BUDGET_S:
                return
            ran += 1
            note(f"LAYA_FUZZ_SEED={SEED}")
            try:
                example(**kwargs)
            except BaseException:
                clock["failed"] = 1.0
                raise

        return run

    return wrap


def test_the_time_box_runs_each_propertys_minimum_examples_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """At a load of 12-20, a property started past its share of the box and ran 0 examples against the 3 it
    asserts: the minimum runs whatever the time, and only then the box applies (no worker needed)."""
    monkeypatch.setattr(sys.modules[__name__], "BUDGET_S", 0.0)  # the whole box spent before the first example
    clock = {"start": time.monotonic(), "failed": 0.0}
    ran: Counter[str] = Counter()

    def prop(name: str, minimum: int):
        @settings(max_examples=10, database=None, derandomize=True, phases=[Phase.generate])
        @given(i=st.integers())
        @boxed(clock, 1.0, minimum=minimum)
        def example(i: int) -> None:
            ran[name] += 1

        return example

    prop("oracle", 3)()
    prop("checkpoints", 2)()
    assert ran == {"oracle": 3, "checkpoints": 2}  # each property counts its own examples, then stops


def test_fuzzed_checkpoints_are_refused_or_answer_in_a_live_worker(
    pool: WorkerPool, bases: dict, image: bytes, clock: dict, folders: Iterator[Path], counts: Counter[str]
) -> None:
    @fuzz
    @given(base=st.sampled_from(sorted(bases)), record_edits=RECORD_EDITS, weight_edits=WEIGHT_EDITS)
    @boxed(clock, 2 / 3, minimum=10)
    def checkpoints(base: str, record_edits: list, weight_edits: list) -> None:
        record, weights = bases[base]
        weights, huge = edit_weights(weights, weight_edits)
        files = checkpoint_files(edit_record(record, record_edits), weights)
        counts[judged(pool, files, next(folders), image, huge).stage] += 1

    checkpoints()
    print(f"checkpoints: {dict(counts)} in {time.monotonic() - clock['start']:.0f} s")
    assert sum(counts.values()) >= 10 and counts["answered"] and counts["check"]


def test_weights_scaled_to_1e18_are_refused_saying_the_output_overflowed(
    pool: WorkerPool, bases: dict, image: bytes, folders: Iterator[Path]
) -> None:
    """The oracle's known answer: the MLP's weights times 1e18 load, and the worker refuses the image saying the
    output overflowed; the same refusal from weights under 1e18 would be a failure."""
    record, weights = bases["laya"]
    scaled = save_tensors({k: v * HUGE if v.is_floating_point() else v for k, v in load_tensors(weights).items()})
    files = checkpoint_files(record, scaled)
    outcome = judged(pool, files, next(folders), image, huge=True)
    assert outcome.stage == "overflow" and outcome.message.startswith("The model's output overflowed")
    with pytest.raises(AssertionError, match="an overflow from weights under 1e18"):
        judged(pool, files, next(folders), image, huge=False)


def test_refusals_naming_a_server_path_read_the_same_whether_it_exists(
    pool: WorkerPool, bases: dict, image: bytes, clock: dict, folders: Iterator[Path], counts: Counter[str]
) -> None:
    @fuzz
    @given(
        base=st.sampled_from(sorted(bases)),
        field=st.sampled_from([("backbone", "weights"), ("dataset",)]),
        probe=st.sampled_from(PROBES),
        record_edits=RECORD_EDITS,
    )
    @boxed(clock, 1.0, minimum=3)
    def oracle(base: str, field: tuple, probe: tuple[str, str], record_edits: list) -> None:
        record, weights = bases[base]
        seen = []
        for path in probe:
            files = checkpoint_files(edit_record(record, [*record_edits, (field, path)]), weights)
            outcome = judged(pool, files, next(folders), image, huge=False)
            message = outcome.message
            for named in sorted(probe, key=len, reverse=True):  # both probes in both messages: a generated string
                message = message.replace(repr(named), "<path>")  # may hold one (e.g. '/etc/passwd' among the
                if len(named) > 3:  # classes, '~/../proc/self/environ'), in both runs alike; quoted as a value
                    message = message.replace(named, "<path>")
            seen.append((outcome.stage, message))
        assert seen[0] == seen[1], f"{probe[0]!r} exists, {probe[1]!r} does not: {seen}"
        counts[seen[0][0]] += 1

    oracle()
    print(f"oracle: {dict(counts)}")
    assert sum(counts.values()) >= 3


@pytest.fixture(scope="module")
def attached(tmp_path_factory: pytest.TempPathFactory, image_folder: Path) -> Path:
    """A timm ``test_vit``'s own head (3 classes, random weights), its tuned lens and network report beside it, and
    its backbone weights in the same setting folder: the own head's folder."""
    tmp = tmp_path_factory.mktemp("fuzz-attached")
    _, network, config = next(n for n in networks(tmp) if n[0] == "timm test_vit")
    setting = tmp / "setting"
    setting.mkdir()
    config.weights = _save(_retarget(network, 3).eval(), setting / "v.pth")
    checkpoint = load_checkpoint(own_checkpoint(_config(config, image_folder, tmp), setting / "own"))
    run_network(checkpoint, QUICK)
    return checkpoint.path


def peak_rss_here_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextlib.contextmanager
def restored(folder: Path, *names: str) -> Iterator[dict[str, bytes]]:
    """The files' bytes, written back afterwards whatever the examples wrote over them."""
    stored = {name: (folder / name).read_bytes() for name in names}
    try:
        yield stored
    finally:
        for name, data in stored.items():
            (folder / name).write_bytes(data)


def test_fuzzed_lens_files_cost_only_the_lens_in_a_live_worker(
    pool: WorkerPool, attached: Path, image: bytes, counts: Counter[str]
) -> None:
    remote = Sandboxed(pool, str(attached), confine=Confinement(attached.parent))
    clock = {"start": time.monotonic(), "failed": 0.0}

    @fuzz
    @given(json_edits=LENS_EDITS, weight_edits=WEIGHT_EDITS)
    @boxed(clock, 1 / 4, minimum=8)
    def lens(json_edits: list | bytes, weight_edits: list) -> None:
        before = live_worker(pool)
        (attached / LENS_CONFIG).write_bytes(stored_file(stored[LENS_CONFIG], json_edits))
        (attached / LENS_WEIGHTS).write_bytes(edit_weights(stored[LENS_WEIGHTS], weight_edits)[0])
        outcome = attempt_lens(remote, image)
        assert outcome.seconds < EXAMPLE_S, f"took {outcome.seconds:.1f} s"
        assert live_worker(pool) == before and peak_rss_mb(before) < WORKER_MB + IMPORTS_MB
        assert outcome.stage == "read" or "tuned lens" in outcome.message, outcome.message
        counts[outcome.stage] += 1

    with restored(attached, LENS_CONFIG, LENS_WEIGHTS) as stored:
        lens()
    print(f"lens files: {dict(counts)} in {time.monotonic() - clock['start']:.0f} s")
    assert sum(counts.values()) >= 8 and counts["refused"]


def test_fuzzed_report_files_are_refused_or_read_with_every_view(attached: Path, counts: Counter[str]) -> None:
    assert attempt_report(attached).stage == "read"  # the good files, once, before the peak is taken
    clock = {"start": time.monotonic(), "failed": 0.0}
    peak = peak_rss_here_mb()

    @fuzz
    @given(json_edits=REPORT_EDITS, weight_edits=WEIGHT_EDITS)
    @boxed(clock, 1 / 4, minimum=20)
    def report(json_edits: list | bytes, weight_edits: list) -> None:
        (attached / REPORT_JSON).write_bytes(stored_file(stored[REPORT_JSON], json_edits))
        (attached / REPORT_TENSORS).write_bytes(edit_weights(stored[REPORT_TENSORS], weight_edits)[0])
        outcome = attempt_report(attached)  # anything but an AttachedFileError fails here
        assert outcome.seconds < FILE_S, f"took {outcome.seconds:.1f} s"
        assert peak_rss_here_mb() < peak + FILE_MB
        counts[outcome.stage] += 1

    with restored(attached, REPORT_JSON, REPORT_TENSORS) as stored:
        report()
    print(f"report files: {dict(counts)} in {time.monotonic() - clock['start']:.0f} s")
    assert sum(counts.values()) >= 20 and counts["refused"]
