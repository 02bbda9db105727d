"""Checkpoint and image uploads from N browser sessions at once: none may stay silent; upload to charts p50 / p95.

    python benchmarks/upload_load.py [--sessions 12] [--width 2300] [--kill] [--models models]

Writes one valid checkpoint (the Fashion-MNIST MLP setting with two hidden layers of ``--width`` units,
:func:`benchmarks.upload_memory.distinct_checkpoints`; the default, 2300, is 29 MB of weights), starts the real
``streamlit run app.py`` in deployment mode (``LAYA_ALLOW_PATHS=0``: every upload is checked and run in
sandboxed workers) and opens ``--sessions`` headless Chromium sessions at once. Each one switches the
sidebar to "Upload a checkpoint", chooses both files, waits for the upload's outcome, then uploads an image
and waits for the Inspect charts. An outcome is

- ``loaded``: the upload took effect (the Inspect page runs on it);
- ``message``: an error or warning names why not (e.g. every worker busy), or
- ``silent``: the script is idle, with no spinner, no progress, no alert, the page still asking to choose a
  model, for ``--silent-after`` seconds. Nothing will change then until the visitor acts: the defect.

``--kill`` first kills the sandboxed workers while one session's upload loads (SIGKILL), then that session
removes the chips and chooses the same files again, as a visitor would; its outcome counts too. Prints one line per
session, then one JSON line with the outcomes, p50 / p95 of upload to charts and the load average; exits 1
if any upload was silent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.load_test import percentile
from benchmarks.upload_memory import distinct_checkpoints
from laya.app.catalog import example_images
from laya.model.checkpoint import META_FILE, WEIGHTS_FILE
from scripts.procfs import server_pid, workers
from scripts.screenshots import CHROMIUM, CHROMIUM_ARGS, IDLE, PAGES, serve

TWO_CHARTS = "() => document.querySelectorAll('[data-testid=\"stMain\"] .stPlotlyChart .main-svg').length >= 2"
NO_CHIPS = "() => !document.querySelector('[data-testid=\"stSidebar\"] [data-testid=\"stFileChip\"]')"
STATE = """() => {
  const CHOOSE = 'Choose a model in the sidebar.';
  const main = document.querySelector('[data-testid="stMain"]');
  const sidebar = document.querySelector('[data-testid="stSidebar"]');
  const texts = (root, selector) => root ? [...root.querySelectorAll(selector)].map(e => e.innerText) : [];
  return {
    idle: !!document.querySelector("[data-testid='stApp'][data-test-script-state='notRunning']"),
    feedback: !!document.querySelector('[data-testid="stSpinner"], [data-testid="stProgress"]'),
    alerts: texts(document, '[data-testid="stAlertContentError"], [data-testid="stAlertContentWarning"], '
                            + '[data-testid="stException"]'),
    headings: texts(main, 'h1'),
    choose: !!main && main.innerText.includes(CHOOSE),
    chips: texts(sidebar, '[data-testid="stFileChip"]'),
    uploading: sidebar ? sidebar.querySelectorAll('[data-testid="stFileChipIconSpinner"]').length : 0,
    chipErrors: texts(sidebar, '[data-testid="stFileChipIconError"]'),
    charts: document.querySelectorAll('[data-testid="stMain"] .stPlotlyChart .main-svg').length,
  };
}"""


@dataclass
class Outcome:
    """One session's checkpoint upload: what came of it and when (seconds from choosing the files)."""

    session: int
    outcome: str = "timeout"  # loaded | message | silent | timeout
    effect_s: float | None = None  # until the upload took effect or its message showed
    charts_s: float | None = None  # until the Inspect charts of an uploaded image showed
    message: str = ""
    feedback_seen: bool = False  # a spinner or progress bar showed while waiting


async def state(page) -> dict:
    return await page.evaluate(STATE)


async def outcome_of(page, result: Outcome, start: float, args, before: str = "") -> Outcome:
    """Poll the page until the upload chosen at ``start`` took effect, showed a message (not the one ``before``
    it, which may still show), or stayed silent for ``args.silent_after`` seconds; at most ``args.timeout``."""
    silent_after, timeout = args.silent_after, args.timeout
    quiet_since = None
    while time.perf_counter() - start < timeout:
        now = await state(page)
        result.feedback_seen |= now["feedback"]
        heading = PAGES["inspect"][1] in now["headings"] and not now["choose"]
        now["alerts"] = [a for a in now["alerts"] + now["chipErrors"] if a[:300] not in before]
        if heading or now["alerts"]:
            result.outcome = "loaded" if heading and not now["alerts"] else "message"
            result.effect_s, result.message = time.perf_counter() - start, " | ".join(now["alerts"])[:300]
            return result
        uploaded = len(now["chips"]) >= 2 and not now["uploading"]  # both chips done, no chip spinner
        quiet = now["idle"] and not now["feedback"] and now["choose"] and uploaded
        quiet_since = (quiet_since or time.perf_counter()) if quiet else None
        if quiet_since is not None and time.perf_counter() - quiet_since >= silent_after:
            result.outcome, result.effect_s = "silent", time.perf_counter() - start
            result.message = f"idle, no spinner and no alert for {silent_after:.0f} s; chips: {now['chips']}"
            return result
        await asyncio.sleep(0.25)
    return result


async def choose_checkpoint(page, files: list[str]) -> float:
    """Remove any checkpoint chips, then choose ``files`` in the uploader's file dialog, as a visitor does; the
    time they were chosen. (The dialog matters: its button clears the file input first, so choosing the same
    files again is a change; setting them on the input itself is not, and nothing leaves the browser.)"""
    sidebar = page.locator('[data-testid="stSidebar"]')
    for button in (await sidebar.locator('[data-testid="stFileChipDeleteBtn"] button').all())[::-1]:
        await button.click()
    await page.wait_for_function(NO_CHIPS)
    async with page.expect_file_chooser() as chooser:
        await sidebar.locator('[data-testid="stFileUploaderDropzone"] button').click()
    start = time.perf_counter()
    await (await chooser.value).set_files(files)
    return start


async def session(browser, index: int, url: str, files: list[str], image: Path, args, kill: asyncio.Event | None
                  ) -> Outcome:  # fmt: skip
    """One visitor: open the app, upload the checkpoint, then an image; see the module docstring."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    page.set_default_timeout(args.timeout * 1000)
    result = Outcome(index)
    try:
        await page.goto(url)
        await page.locator("h1", has_text=PAGES["inspect"][1]).first.wait_for(state="visible")
        await page.wait_for_selector(IDLE, state="attached")
        sidebar = page.locator('[data-testid="stSidebar"]')
        await sidebar.get_by_text("Upload a checkpoint").click()
        await sidebar.locator('[data-testid="stFileUploaderDropzone"] button').wait_for(state="visible")
        start = await choose_checkpoint(page, files)  # as soon as the box shows: the switch's run may go on
        if kill is not None:  # kill the workers while this upload loads, then choose the same files again
            await kill.wait()
            first = await outcome_of(page, Outcome(index), start, args)
            print(f"session {index}: after the kill: {first.outcome} ({first.message})", flush=True)
            start = await choose_checkpoint(page, files)
        result = await outcome_of(page, result, start, args, first.message if kill is not None else "")
        if result.outcome != "loaded":
            return result
        await page.wait_for_selector(IDLE, state="attached")
        main = page.locator('[data-testid="stMain"]')
        await main.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(image))
        await main.locator('[data-testid="stFileChipName"]', has_text=image.name).first.wait_for(state="visible")
        await page.wait_for_function(TWO_CHARTS)
        await page.wait_for_selector(IDLE, state="attached")
        result.charts_s = time.perf_counter() - start
        return result
    finally:
        await context.close()


async def killer(server: int, kill: asyncio.Event, timeout: float) -> int:
    """Wait until a worker exists and has been busy a moment, SIGKILL every worker, set ``kill``; how many."""
    deadline = time.monotonic() + timeout
    while not workers(server) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # inside the check or the load
    pids = workers(server)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    kill.set()
    return len(pids)


async def run(url: str, files: list[str], image: Path, args) -> tuple[list[Outcome], int]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            kill = asyncio.Event() if args.kill else None
            tasks = [session(browser, i, url, files, image, args, kill if i == 0 else None)
                     for i in range(args.sessions)]  # fmt: skip
            killed = [killer(server_pid(), kill, args.timeout)] if kill is not None else []
            done = await asyncio.gather(*tasks, *killed)
        finally:
            await browser.close()
    return list(done[: args.sessions]), (done[-1] if killed else 0)


def measure(args: argparse.Namespace) -> dict:
    """Write the checkpoint, serve the dashboard, run the sessions (:func:`run`); the summary, per session too."""
    base = args.models / "fashion-mnist-mlp" / "laya"
    work = Path(tempfile.mkdtemp(prefix="laya-upload-load-"))
    checkpoint = distinct_checkpoints(base, work, 1, args.width)[0]
    files = [str(checkpoint / META_FILE), str(checkpoint / WEIGHTS_FILE)]
    os.environ.update({"LAYA_ALLOW_PATHS": "0", "LAYA_UPLOAD_DIR": str(work)})
    log = work / "streamlit.log"
    print(f"dashboard log: {log}; weights {Path(files[1]).stat().st_size / 2**20:.1f} MB", flush=True)
    began = time.perf_counter()
    with serve(args.models, log=log) as url:
        outcomes, killed = asyncio.run(run(url, files, example_images(base)[0], args))
    load = os.getloadavg()
    counts = {kind: sum(o.outcome == kind for o in outcomes) for kind in ("loaded", "message", "silent", "timeout")}
    charts = [o.charts_s for o in outcomes if o.charts_s is not None]
    return {
        "sessions": args.sessions, "outcomes": counts, "killed_workers": killed,
        "saw_feedback": sum(o.feedback_seen for o in outcomes),  # sessions shown a spinner before the effect
        "upload_to_charts_p50_s": round(percentile(charts, 0.5), 1) if charts else None,
        "upload_to_charts_p95_s": round(percentile(charts, 0.95), 1) if charts else None,
        "wall_s": round(time.perf_counter() - began, 1), "load_average": [round(x, 1) for x in load],
        "per_session": [asdict(o) for o in outcomes],
    }  # fmt: skip


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=12, help="concurrent browser sessions (default 12)")
    parser.add_argument("--models", type=Path, default=ROOT / "models", help="LAYA_MODELS (its fashion-mnist-mlp/laya)")
    parser.add_argument("--width", type=int, default=2300, help="hidden width of the uploaded MLP (2300: 29 MB)")
    parser.add_argument("--kill", action="store_true", help="kill the workers while the first session's upload loads")
    parser.add_argument("--silent-after", type=float, default=15.0, help="idle seconds with no feedback: silent")
    parser.add_argument("--timeout", type=float, default=600.0, help="bound on each session's wait for one outcome (s)")
    return parser.parse_args(argv)


def main() -> int:
    args = parse()
    if not Path(CHROMIUM).is_file():
        print(f"error: {CHROMIUM} is missing (apt-get install chromium)", file=sys.stderr)
        return 2
    summary = measure(args)
    for outcome in summary.pop("per_session"):
        print(json.dumps(outcome), flush=True)
    print(json.dumps(summary))
    return 1 if summary["outcomes"]["silent"] else 0


if __name__ == "__main__":
    sys.exit(main())
