"""End to end: an uploaded checkpoint runs in a sandboxed worker, and a closed browser's upload folder
and model are gone within a bounded time, by the server's own timer (no other session does anything).

The real ``streamlit run app.py`` (deployment mode), headless Chromium: upload a valid checkpoint and
an image, see the charts, check that the model lives in a worker process (not the server), close the
browser, then poll until the upload folder and the worker are gone.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from laya.app.catalog import example_images
from scripts.procfs import server_pid, workers
from scripts.screenshots import (
    TIMEOUT_MS,
    browser_page,
    open_app,
    serve,
    upload_image,
    wait_for_charts,
    wait_idle,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("chromium")]
GRACE_S, SWEEP_S, BOUND_S = 5, 1, 60


def wait_until(condition, timeout: float, what: str) -> float:
    """Poll ``condition`` (never a fixed sleep); seconds it took; fails after ``timeout``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.2)
    return time.monotonic() - start


def test_a_closed_browsers_upload_and_model_are_gone(
    tiny_models: Path, image_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)  # a loaded machine is slow, never wrong: wait for the content itself
    temp = tmp_path / "server-tmp"
    temp.mkdir()
    settings = {"LAYA_ALLOW_PATHS": "0", "LAYA_PATH_ROOTS": str(image_folder), "LAYA_UPLOAD_DIR": str(temp),
                "LAYA_UPLOAD_GRACE": str(GRACE_S), "LAYA_UPLOAD_SWEEP": str(SWEEP_S),
                "LAYA_WORKER_IDLE": "600"}  # fmt: skip  # idle release must not be what ends the worker
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    good = tiny_models / "colours-mlp" / "laya"
    with serve(tiny_models, log=tmp_path / "streamlit.log") as url:
        server = server_pid()
        with browser_page() as page:
            open_app(page, url)
            sidebar = page.locator('[data-testid="stSidebar"]')
            main = page.locator('[data-testid="stMain"]')
            sidebar.get_by_text("Upload a checkpoint").click()
            expect(main.get_by_text("Choose a model in the sidebar.")).to_be_visible()  # the source switch ran
            wait_idle(page)
            files = [str(good / "model.json"), str(good / "model.safetensors")]
            sidebar.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(files)
            expect(main.locator("h1").first).to_have_text("Inspect an input")  # the upload loaded: its page runs
            wait_idle(page)
            upload_image(page, example_images(good)[0])
            wait_for_charts(page, 2)
            expect(main.locator('[data-testid="stMetricValue"]').first).to_have_text("blue")
            folders = list(temp.glob("laya-uploads-*/upload-*"))
            assert len(folders) == 1 and (folders[0] / "model.safetensors").is_file()
            held = workers(server)
            assert len(held) == 1, "the uploaded model runs in one sandboxed worker"
        # the browser is closed: its websocket is gone, and no other session will ever act
        took = wait_until(lambda: not folders[0].exists() and not workers(server), BOUND_S,
                          "upload folder and worker gone after the browser closed")  # fmt: skip
        assert took <= BOUND_S
        (tmp_path / "cleanup-seconds.txt").write_text(f"{took:.1f}\n")
        print(f"upload folder and worker gone {took:.1f} s after the browser closed (grace {GRACE_S} s)")
