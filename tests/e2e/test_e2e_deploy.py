"""End to end, as a team deployment is used: the real ``streamlit run app.py`` in deployment mode
(``LAYA_ALLOW_PATHS=0``), driven by headless Chromium.

Uploads, through the sidebar, every memory case of the hostile-checkpoint corpus (tests/hostile.py: those that
would allocate far past 2 GB if built) and one case of each other kind of refusal (``KINDS``): each gets a clear
error and no traceback, the server's RSS stays under 2 GB and it stays healthy; there is no path box; a click
on a class-wise heatmap cell opens that class and scrolls to it; a link copied from Inspect, opened in a fresh
browser, reopens the same view.

Every step waits for the element its action produces (the alert naming this upload's digest, the URL
with the new parameter, the file chip), never for a fixed delay; every wait is bounded at ``TIMEOUT_MS`` (300 s). Run beside two busy processes
(``python -c 'while 1: pass'`` x 2, load ~20 on the shared 2-core machine): see docs/decisions/browser-tests.md
for what that run showed.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from laya.app.catalog import example_images
from pages.common import upload_digest
from scripts.screenshots import (
    TIMEOUT_MS,
    browser_page,
    full_screenshot,
    open_app,
    open_page,
    serve,
    wait_for_charts,
    wait_idle,
)
from tests.hostile import CASES, Case, hostile_record

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("chromium")]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


VIEW = {"model": "colours-mlp/concat", "mode": "zero_input"}  # the view the link test picks (plus its example)

#: one case of each kind of refusal the corpus holds besides the memory cases, by name. Every case, these and the
#: rest, is uploaded through the same sidebar by AppTest (tests/pages/test_app.py), which checks each message; the
#: browser adds the real upload, the alert as drawn and the server's memory, the same for every case of a kind.
KINDS = {
    "format-version-string": "a field of the wrong type",
    "not-an-object": "a section that is not an object",
    "channels-mismatch": "two fields that disagree",
    "channels-2": "a value outside its choices",
    "tau-negative": "a number outside its range",
    "classes-one": "a list of the wrong length",
    "tau-nan": "a number that is not finite",
    "unknown-key": "an unknown key",
    "timm-unknown-kwarg": "a model argument not allowed",
    "timm-checkpoint-path": "a model argument naming a file",
    "timm-bad-depth-for-model": "a model argument the architecture refuses",
    "weights-server-file": "weights naming a file on the server",
    "weights-parent-file": "weights naming a path out of the checkpoint",
    "weights-timm-download": "weights naming a download",
    "weights-tilde-environ": "a path starting with '~'",
    "weights-nul": "a path holding NUL",
    "seed-4000-digits": "an integer of thousands of digits",
    "classes-lone-surrogate": "text that is not valid Unicode",
}


def browser_cases() -> list[Case]:
    """The memory cases and one case of each other kind of refusal (``KINDS``), in the corpus's order."""
    assert set(KINDS) <= {c.name for c in CASES if c.on_load and not c.huge}, set(KINDS) - {c.name for c in CASES}
    return [c for c in CASES if c.on_load and (c.huge or c.name in KINDS)]


def view(url: str) -> dict[str, str]:
    """The query parameters of ``url`` (the last value of each)."""
    return {k: v[-1] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(url).query).items()}


def server_rss_kb() -> int:
    """Resident memory of this test's streamlit child process (from /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"streamlit" in cmdline:
            status = (stat.parent / "status").read_text()
            return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    raise RuntimeError("streamlit server process not found")


def test_deployment_mode_hostile_uploads_and_links(
    tiny_models: Path, image_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)  # a loaded machine is slow, never wrong: wait for the content itself
    ARTIFACTS.mkdir(exist_ok=True)
    monkeypatch.setenv("LAYA_ALLOW_PATHS", "0")
    monkeypatch.setenv("LAYA_PATH_ROOTS", str(image_folder))
    good = tiny_models / "colours-mlp" / "laya"
    record = json.loads((good / "model.json").read_text())
    examples = example_images(good)
    cases = browser_cases()

    with serve(tiny_models, log=ARTIFACTS / "e2e-deploy-streamlit.log") as url:
        with browser_page() as page:
            open_app(page, url)
            sidebar = page.locator('[data-testid="stSidebar"]')
            expect(sidebar.get_by_text("Upload a checkpoint")).to_be_visible()
            assert sidebar.get_by_text("Path on this machine").count() == 0  # deployment mode: no path box

            # a view (a head, an example and a mode other than the defaults), then its link in a fresh browser
            sidebar.get_by_text("Concat").first.click()
            expect(page).to_have_url(re.compile(r"model=colours-mlp(%2F|/)concat"))  # links name the checkpoint
            wait_idle(page)
            main = page.locator('[data-testid="stMain"]')
            main.locator('[data-testid="stSelectbox"]').first.click()
            page.get_by_role("option", name=examples[2].name).click()
            expect(page).to_have_url(re.compile(re.escape(urllib.parse.quote_plus(examples[2].name))))
            wait_idle(page)
            main.get_by_text("zero_input (cross-head)", exact=True).first.click()
            expect(page).to_have_url(re.compile("mode=zero_input"))
            wait_idle(page)
            wait_for_charts(page, 2)
            link = page.url
            assert view(link) == VIEW | {"example": examples[2].name}, link
            shown = main.locator('[data-testid="stMetricValue"]').all_inner_texts()

            open_page(page, "classwise")  # a click on a heatmap cell opens that class below
            wait_for_charts(page)
            cells = main.locator(".stPlotlyChart").first.locator(".nsewdrag").first
            box = cells.bounding_box()
            classes = json.loads((good / "model.json").read_text())["classes"]
            row = len(classes) - 1  # the last class: the bottom row (the y axis runs top-down)
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] * (row + 0.5) / len(classes))
            expect(page).to_have_url(re.compile(f"class={classes[row]}"))  # not the default, the first class
            wait_idle(page)
            box = main.locator('[data-testid="stSelectbox"]').filter(has_text="Class").first
            expect(box).to_match_aria_snapshot(f'- combobox "Class": {classes[row]}')
            expect(main.locator("#one-class")).to_be_in_viewport()  # the drill-down scrolled into view
            outline = main.locator(".stPlotlyChart").first.locator(".shapelayer path")
            expect(outline.first).to_be_attached()  # the clicked cell is outlined
            full_screenshot(page, ARTIFACTS / "e2e-classwise-click.png")
            open_page(page, "inspect")

            sidebar.get_by_text("Upload a checkpoint").click()
            expect(sidebar.locator('[data-testid="stFileUploaderDropzoneInput"]')).to_be_attached()
            wait_idle(page)
            uploader = sidebar.locator('[data-testid="stFileUploaderDropzoneInput"]')
            weights = tmp_path / "model.safetensors"
            weights.write_bytes((good / "model.safetensors").read_bytes())
            for case in cases:
                meta = tmp_path / case.name / "model.json"
                meta.parent.mkdir()
                meta.write_text(json.dumps(hostile_record(record, case)))
                digest = upload_digest({"model.json": meta.read_bytes(), "model.safetensors": weights.read_bytes()})
                uploader.set_input_files([str(meta), str(weights)])
                alert = sidebar.locator('[data-testid="stAlert"]', has_text=f"upload {digest[:12]}")  # this upload's
                expect(alert).to_contain_text(case.message)
                wait_idle(page)
                assert page.locator('[data-testid="stException"]').count() == 0, case.name
                assert "Traceback" not in alert.inner_text()
                chips = sidebar.locator('[data-testid="stFileChip"]')
                for button in sidebar.locator('[data-testid="stFileChipDeleteBtn"] button').all()[::-1]:
                    button.click()
                expect(chips).to_have_count(0)
                wait_idle(page)
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as response:
                assert response.status == 200
            peak_kb = server_rss_kb()
            assert peak_kb < 2 * 1024 * 1024, f"server peak RSS {peak_kb / 1024:.0f} MB"
            (ARTIFACTS / "e2e-deploy-memory.txt").write_text(
                f"server peak RSS after the corpus: {peak_kb / 1024:.0f} MB\n"
            )

        with browser_page() as fresh:  # a new browser: nothing but the link
            fresh.goto(link)
            wait_for_charts(fresh, 2)
            wait_idle(fresh)
            main = fresh.locator('[data-testid="stMain"]')
            expect(main.locator('[data-testid="stMetricValue"]').first).to_have_text(shown[0])
            assert main.locator('[data-testid="stMetricValue"]').all_inner_texts() == shown
            assert view(fresh.url) == VIEW | {"example": examples[2].name}, fresh.url
