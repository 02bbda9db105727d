"""Server-side cost of the dashboard: cold start, a new session's first chart, CPU per interaction, 12 sessions.

    python benchmarks/load_test.py [--sessions 12] [--rounds 3] [--models models] [--out FILE]

Drives ``app.py`` through Streamlit's AppTest, which runs the script exactly as the server does
(a ``ScriptRunner`` thread per run, the process-wide ``st.cache_resource`` / ``st.cache_data``
shared by every session), without browsers or websockets; every number is the server's own work.
``LAYA_THREADS=1``: torch runs in the script's thread, so that thread's CPU time is the
interaction's CPU time.

0. Import costs: CPU seconds of each heavy import in a fresh interpreter, those the dashboard defers
   (Captum, scipy.stats, torch._dynamo) included.
1. Cold start: a fresh interpreter (``--cold``) imports Streamlit, runs the Inspect page on the
   bundled default (Fashion-MNIST, LAYA head, first example) until its charts exist; wall and CPU
   seconds from process start, and the split into imports and first run. Twice, on an empty
   ``$LAYA_CACHE`` (the first start on a machine: the size check's meta forward runs) and again
   (every later start: its estimate is read from the cache, :mod:`laya.model.budget`); first, as a
   reference in the same run, a start that imports Captum and scipy.stats eagerly on an empty cache
   (what the dashboard did before they were deferred).
2. Warm-up: one session walks the sequence below (loads the models it touches).
3. Sequential: ``--rounds`` new sessions, one after another, each walking the sequence:
   ``first chart`` (a new session opens Inspect), ``upload`` (an image no session has sent: one
   pixel differs per session, so no cached explanation answers it), ``mode`` (another ablation
   mode), ``head`` (another head of the setting), ``page:<name>`` (each other page, then Inspect).
4. Concurrent: ``--sessions`` sessions walk the same sequence in threads of this one process,
   all at once: p50 / p95 of the wall time (what a user waits, server side) and of the CPU time
   of each interaction.

Prints one table per phase and, last, one JSON line with everything.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
PAGES = ("compare-heads", "class-depth", "faithfulness-overview", "depth-analytics")  # page files: their url paths
HEAVY = ("captum", "scipy.stats", "matplotlib", "torch._dynamo", "timm", "transformers", "torchvision", "sklearn")


def _environment(models: Path) -> None:
    os.environ["LAYA_MODELS"] = str(models)
    os.environ["LAYA_THREADS"] = "1"
    os.environ.setdefault("LAYA_ALLOW_PATHS", "0")
    sys.path.insert(0, str(ROOT))


def cold(models: Path, launched: float, eager: bool = False) -> dict:
    """In a fresh interpreter: seconds from process start until the first page shows its charts.

    ``eager``: import what the dashboard now defers (Captum, scipy.stats) first, as it did before.
    """
    _environment(models)
    start_cpu = time.process_time()  # CPU before this line: interpreter start-up
    started = time.time()
    if eager:
        import captum.attr  # noqa: F401
        import scipy.stats  # noqa: F401
    from streamlit.testing.v1 import AppTest

    imported = time.time()
    at = AppTest.from_file(str(APP), default_timeout=600).run()
    ready = time.time()
    if at.exception or not at.get("plotly_chart"):
        raise RuntimeError(f"the first page did not render its charts: {at.exception}")
    return {
        "ready_wall_s": ready - launched,
        "ready_cpu_s": time.process_time(),
        "interpreter_wall_s": started - launched,
        "interpreter_cpu_s": start_cpu,
        "import_streamlit_wall_s": imported - started,
        "first_run_wall_s": ready - imported,
        "heavy_modules_loaded": [m for m in HEAVY if m in sys.modules],
    }


IMPORTS = ("streamlit", "torch", "pandas", "pages.common",
           "captum.attr", "scipy.stats", "torch._dynamo")  # the last three: deferred until needed


def imports() -> dict[str, float]:
    """In a fresh interpreter: CPU seconds of each import, in this order (each after the ones before)."""
    sys.path.insert(0, str(ROOT))
    costs = {}
    for name in IMPORTS:
        begin = time.process_time()
        __import__(name)
        costs[name] = time.process_time() - begin
    return costs


def one_server() -> None:
    """Make the process-wide state that ``AppTest.run`` sets and undoes around each run that of one server.

    AppTest assumes one run at a time; with sessions in threads, one run's undo lands in another's run:

    - ``global.appTest``: each run patches ``config.get_option`` to say True and restores it after, so a
      run that ends first switches it off in the runs still going; a widget made then does not record its
      ``format_func`` for AppTest, and that session's next ``run()`` raises ``KeyError('$$ID-…-<key>')``
      (6 of 12 sessions once, on the Inspect page's ``inspect_example``). It is now True for the process.
    - ``Runtime._instance``: each run sets a new one and clears it after, so a run still going sees no
      runtime (``runtime.exists()`` False: its images are not stored, its tables are sent whole). The
      first one set now stays, shared by every session, as on a server.
    - The compiled scripts: each run makes a new ``ScriptCache`` where a server compiles each page once;
      sessions share one (compiling in many threads at once also trips a CPython 3.11 ``ast.parse`` bug,
      "AST constructor recursion depth mismatch").
    """
    from streamlit import config
    from streamlit.runtime import Runtime
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner, util

    config.get_option = util.build_mock_config_get_option({"global.appTest": True})
    app_test.patch_config_options = lambda overrides: contextlib.nullcontext()

    class FirstRuntime(type(Runtime)):
        def __setattr__(cls, name: str, value: object) -> None:  # AppTest's ``Runtime._instance = ...``
            if name == "_instance" and Runtime._instance is None:
                Runtime._instance = value

    app_test.Runtime = FirstRuntime("Runtime", (Runtime,), {})  # the mock runtime's spec is still Runtime's
    shared = ScriptCache()
    app_test.ScriptCache = local_script_runner.ScriptCache = lambda: shared


class Session:
    """One user: an AppTest of ``app.py``; each step returns (wall s, CPU s of the script thread)."""

    cpu: dict[int, float] = {}  # id(session state) -> CPU seconds of its last script run
    _lock = threading.Lock()

    @classmethod
    def instrument(cls) -> None:
        """Let sessions run concurrently as on one server (:func:`one_server`), and record the CPU time of
        every script thread (the server's work for one run)."""
        from streamlit.testing.v1.local_script_runner import LocalScriptRunner

        one_server()
        run = LocalScriptRunner._run_script_thread

        def timed(runner) -> None:
            begin = time.thread_time()
            try:
                run(runner)
            finally:
                with cls._lock:
                    cls.cpu[id(runner.session_state)] = time.thread_time() - begin

        LocalScriptRunner._run_script_thread = timed

    def __init__(self, image: bytes) -> None:
        from streamlit.testing.v1 import AppTest

        self.at = AppTest.from_file(str(APP), default_timeout=600)
        self.image = image

    def _run(self, element=None) -> tuple[float, float]:
        begin = time.perf_counter()
        (element or self.at).run()
        wall = time.perf_counter() - begin
        if self.at.exception:
            raise RuntimeError(f"the app raised: {self.at.exception[0].value}")
        with self._lock:
            return wall, self.cpu.pop(id(self.at._session_state))

    def walk(self) -> dict[str, tuple[float, float]]:
        """The interaction sequence of one session: name -> (wall s, CPU s)."""
        at, steps = self.at, {}
        steps["first chart"] = self._run()
        if not at.get("plotly_chart"):
            raise RuntimeError("a new session showed no chart")
        steps["upload"] = self._run(at.file_uploader(key="inspect_upload").set_value(("s.png", self.image, "image/png")))
        mode = at.radio(key="inspect_mode_laya")
        from laya.app.labels import MODE_HELP

        second = next(m for m in MODE_HELP if mode.format_func(m) == mode.options[1])  # AppTest formats the value
        steps["mode"] = self._run(mode.set_value(second))
        head = next(r for r in at.sidebar.radio if str(r.key).startswith("model_head_"))
        other = str(Path(head.value).with_name("scalarmix"))  # options are labels; values are paths
        steps["head"] = self._run(head.set_value(other))
        for page in (*PAGES, "inspect-input"):
            at.switch_page(f"pages/{page}.py")
            steps[f"page:{page}"] = self._run()
        return steps


def unique_images(models: Path, n: int) -> list[bytes]:
    """``n`` PNGs of the default setting's first example, each with one pixel changed (distinct cache keys)."""
    from PIL import Image

    from laya.app.catalog import example_images, find_checkpoints, group_entries

    group = next(iter(group_entries(find_checkpoints(models)).values()))
    base = Image.open(example_images(group[0].path)[0]).convert("L")
    images = []
    for i in range(n):
        image = base.copy()
        image.putpixel((i % image.width, i // image.width % image.height), (base.getpixel((0, 0)) + 1 + i) % 256)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        images.append(buffer.getvalue())
    return images


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), without importing numpy here."""
    values = sorted(values)
    k = (len(values) - 1) * q
    low = int(k)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (k - low)


def summarise(walks: list[dict[str, tuple[float, float]]]) -> dict[str, dict[str, float]]:
    out = {}
    for step in walks[0]:
        wall = [w[step][0] for w in walks]
        cpu = [w[step][1] for w in walks]
        out[step] = {"n": len(walks), "wall_p50": percentile(wall, 0.5), "wall_p95": percentile(wall, 0.95),
                     "cpu_p50": percentile(cpu, 0.5), "cpu_p95": percentile(cpu, 0.95)}  # fmt: skip
    return out


def table(title: str, rows: dict[str, dict[str, float]]) -> None:
    print(f"\n{title}")
    print(f"{'interaction':<20} {'n':>3} {'wall p50 s':>11} {'wall p95 s':>11} {'CPU p50 s':>10} {'CPU p95 s':>10}")
    for step, r in rows.items():
        print(f"{step:<20} {r['n']:>3} {r['wall_p50']:>11.3f} {r['wall_p95']:>11.3f} {r['cpu_p50']:>10.3f} {r['cpu_p95']:>10.3f}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=Path, default=ROOT / "models")
    parser.add_argument("--sessions", type=int, default=12, help="concurrent sessions (default 12)")
    parser.add_argument("--rounds", type=int, default=3, help="sequential sessions after warm-up (default 3)")
    parser.add_argument("--out", type=Path, default=None, help="also write the last JSON line to this file")
    parser.add_argument("--cold", type=float, default=None, help=argparse.SUPPRESS)  # child: launch time
    parser.add_argument("--imports", action="store_true", help=argparse.SUPPRESS)  # child: import costs
    parser.add_argument("--eager", action="store_true", help=argparse.SUPPRESS)  # child: the former imports
    args = parser.parse_args()
    if args.cold is not None:
        print(json.dumps(cold(args.models, args.cold, args.eager)))
        return 0
    if args.imports:
        print(json.dumps(imports()))
        return 0

    load_start = os.getloadavg()
    child = subprocess.run([sys.executable, __file__, "--imports"], capture_output=True, text=True, check=True)
    costs = json.loads(child.stdout.strip().splitlines()[-1])
    print("import costs, CPU-s in a fresh interpreter (each after the ones before; the last three are deferred):")
    print("  " + ", ".join(f"{name} {cost:.2f}" for name, cost in costs.items()))

    print("cold start (fresh interpreter -> first page's charts, bundled default model)")
    starts = {}
    with tempfile.TemporaryDirectory() as before, tempfile.TemporaryDirectory() as cache:
        for name, eager, directory in (("as before (eager imports, no cache)", True, before),
                                       ("first start, empty cache", False, cache), ("restart", False, cache)):  # fmt: skip
            launched = time.time()
            command = [sys.executable, __file__, "--models", str(args.models), "--cold", repr(launched)]
            child = subprocess.run(command + ["--eager"] * eager, capture_output=True, text=True, check=False,
                                   env={**os.environ, "LAYA_CACHE": directory})  # fmt: skip
            if child.returncode:
                raise SystemExit(f"cold start failed:\n{child.stderr[-4000:]}")
            start = starts[name] = json.loads(child.stdout.strip().splitlines()[-1])
            print(f"  {name}: ready after {start['ready_wall_s']:.2f} s wall, {start['ready_cpu_s']:.2f} CPU-s "
                  f"(import streamlit {start['import_streamlit_wall_s']:.2f} s, first run {start['first_run_wall_s']:.2f} s wall); "
                  f"heavy modules loaded: {', '.join(start['heavy_modules_loaded']) or 'none'}")  # fmt: skip
    cpu = [s["ready_cpu_s"] for s in starts.values()]
    print(f"  CPU of a first start / restart vs as before: {cpu[1] / cpu[0]:.2f}x / {cpu[2] / cpu[0]:.2f}x")

    _environment(args.models)
    Session.instrument()
    images = unique_images(args.models, 1 + args.rounds + args.sessions)
    warm = Session(images[0]).walk()
    table("warm-up session (loads the models it touches)", {k: {"n": 1, "wall_p50": w, "wall_p95": w, "cpu_p50": c,
          "cpu_p95": c} for k, (w, c) in warm.items()})  # fmt: skip
    sequential = summarise([Session(images[1 + i]).walk() for i in range(args.rounds)])
    table(f"sequential: {args.rounds} new sessions, one at a time", sequential)

    results: list[dict | None] = [None] * args.sessions
    errors: list[BaseException] = []

    def user(i: int) -> None:
        try:
            results[i] = Session(images[1 + args.rounds + i]).walk()
        except BaseException as error:  # reported below
            errors.append(error)

    cpu_before, begin = time.process_time(), time.perf_counter()
    threads = [threading.Thread(target=user, args=(i,)) for i in range(args.sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed, process_cpu = time.perf_counter() - begin, time.process_time() - cpu_before
    if errors:
        raise SystemExit(f"{len(errors)} of {args.sessions} sessions failed: {errors[0]!r}")
    concurrent = summarise(results)
    table(f"concurrent: {args.sessions} sessions at once, threads of one process", concurrent)
    print(f"  all {args.sessions} sessions done in {elapsed:.1f} s wall, {process_cpu:.1f} CPU-s for the process "
          f"({process_cpu / args.sessions:.2f} CPU-s per session of {len(concurrent)} interactions, "
          f"AppTest's own bookkeeping included)")  # fmt: skip
    result = {"imports": costs, "cold": starts, "sequential": sequential, "concurrent": concurrent,
              "concurrent_wall_s": elapsed, "concurrent_process_cpu_s": process_cpu, "sessions": args.sessions,
              "load_average": {"start": load_start, "end": os.getloadavg()}, "cpus": os.cpu_count(),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    print(json.dumps(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
