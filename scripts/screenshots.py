"""Screenshot every dashboard page: ``python scripts/screenshots.py [--models models] [--out docs/screenshots]``.

Starts ``streamlit run app.py`` on a free port with ``LAYA_MODELS`` set to ``--models``, drives
headless Chromium (Playwright, the system ``/usr/bin/chromium`` by default) through the
navigation, uploads an image on Inspect and Compare (the first bundled example unless ``--image``
is given) and saves ``<out>/<page>.png``. The browser helpers are shared with the e2e test.

``--model SETTING/HEAD`` opens one checkpoint by its link (``?model=``) instead of the first one, uploads its own
first example, and names the files ``<prefix><page>.png``; ``--pages`` picks pages::

    python scripts/screenshots.py --model cifar10-resnet18-half/own --prefix own- --pages inspect depth
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-quic", "--no-first-run",
]  # fmt: skip
PAGES = {  # screenshot name -> (navigation link text, the page's heading)
    "inspect": ("Inspect", "Inspect an input"),
    "compare": ("Compare heads", "Compare heads"),
    "classwise": ("Class-wise depth patterns", "Class-wise depth patterns"),
    "faithfulness": ("Faithfulness overview", "Faithfulness overview"),
    "depth": ("Depth analytics", "Depth analytics"),
    "browse": ("Browse test set", "Browse the test set"),
    "patching": ("Activation patching", "Activation patching"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_healthy(process: subprocess.Popen, url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the dashboard did not answer on {url} within {timeout:.0f} s")
        time.sleep(0.5)
    raise RuntimeError(f"streamlit exited with status {process.returncode}")


@contextmanager
def serve(models: Path, port: int | None = None, timeout: float = 90.0, log: Path | None = None) -> Iterator[str]:
    """Run the dashboard on ``models`` in a subprocess (output to ``log``); yields its URL once it is healthy."""
    port = port or free_port()
    env = {**os.environ, "LAYA_MODELS": str(Path(models).resolve()), "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
        "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with ExitStack() as stack:
        output = stack.enter_context(open(log, "w")) if log else subprocess.DEVNULL
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
        stack.callback(_stop, process)
        _wait_healthy(process, url, timeout)
        yield url


@contextmanager
def browser_page(width: int = 1400, height: int = 1000) -> Iterator[Page]:
    """A headless Chromium page (Playwright sync API) using the system Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(TIMEOUT_MS)
            yield page
        finally:
            browser.close()


TIMEOUT_MS = 300_000  # a bound on each wait for a condition (it returns as soon as it holds): a loaded machine is slow
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
CHARTS_SETTLED = """() => [...document.querySelectorAll('.stPlotlyChart')].every(chart => {
    const svg = chart.querySelector('.main-svg');
    return svg && Math.abs(svg.getBoundingClientRect().width - chart.getBoundingClientRect().width) < 2;
})"""


def wait_idle(page: Page) -> None:
    """Wait until Streamlit reports no script run in progress (``stApp``'s ``data-test-script-state``) and no
    element is stale. A condition, not a delay: right after an action the previous run's state may still show,
    so callers first wait for the element the action produces (see :func:`upload_image`). Placeholders
    (``stSkeleton``) count as not rendered: a screenshot under load caught a table still loading."""
    page.wait_for_selector(IDLE, state="attached", timeout=TIMEOUT_MS)
    page.wait_for_function(
        "() => !document.querySelector('[data-stale=\"true\"], [data-testid^=\"stSkeleton\"], [data-testid=\"stAppSkeleton\"]')",
        timeout=TIMEOUT_MS,
    )  # no stale element, no placeholder still waiting for its element


def open_app(page: Page, url: str) -> None:
    """Load the dashboard and wait for its first page.

    Until the first script run reaches ``st.navigation``, Streamlit lists every file in ``pages/``
    (its legacy multipage mode): wait for the real navigation before clicking anything.
    """
    page.goto(url)
    page.locator('[data-testid="stTopNavLink"]', has_text=PAGES["compare"][0]).wait_for(state="visible")
    page.locator("h1", has_text=PAGES["inspect"][1]).first.wait_for(state="visible")
    wait_idle(page)


IN_BAR = """(text) => [...document.querySelectorAll('[data-testid="stTopNavLink"]')].some(
    link => link.textContent.includes(text) && !link.closest('[inert]'))"""  # overflowing links are kept inert


def open_page(page: Page, name: str) -> None:
    """Follow the top-bar navigation link to page ``name`` (a key of ``PAGES``; through the bar's "N more" menu
    where it does not fit) and wait for it to render."""
    link, heading = PAGES[name]
    if page.evaluate(IN_BAR, link):
        page.locator('[data-testid="stTopNavLink"]', has_text=link).first.click()
    else:  # the links that do not fit the bar are behind its last entry, "N more"
        page.locator('[data-testid="stTopNavSection"]', has_text="more").first.click()
        page.locator('[data-testid="stTopNavDropdownLink"]', has_text=link).first.click()
    page.locator("h1", has_text=heading).first.wait_for(state="visible")
    wait_idle(page)


def upload_image(page: Page, image: Path) -> None:
    """Upload ``image`` through the page's (first main-area) image file input; wait for the uploader to name
    the file, then for the run it starts to finish."""
    main = page.locator('[data-testid="stMain"]')
    main.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(image))
    main.locator('[data-testid="stFileChipName"]', has_text=image.name).first.wait_for(state="visible")
    wait_idle(page)


def wait_for_charts(page: Page, count: int = 1) -> None:
    """Wait until at least ``count`` plotly charts are drawn, each at its container's width."""
    page.locator(".stPlotlyChart .main-svg").nth(count - 1).wait_for(state="visible")
    page.wait_for_function(CHARTS_SETTLED, timeout=TIMEOUT_MS)


IMAGES_LOADED = """() => [...document.querySelectorAll('[data-testid="stMain"] img')].every(
    img => img.complete && img.naturalWidth > 0)"""


def wait_for_images(page: Page, count: int = 1) -> None:
    """Wait until at least ``count`` images are shown in the main area and every one of them has loaded."""
    page.locator('[data-testid="stMain"] [data-testid="stImage"] img').nth(count - 1).wait_for(state="visible")
    page.wait_for_function(IMAGES_LOADED, timeout=TIMEOUT_MS)


def wait_for_content(page: Page, name: str) -> None:
    """Wait for what page ``name`` draws: the test-set browser's thumbnails, every other page's charts (and
    Activation patching's two input images)."""
    if name == "browse":
        wait_for_images(page)
        return
    if name == "patching":
        wait_for_images(page, 2)
    wait_for_charts(page)


def full_screenshot(page: Page, path: Path) -> None:
    """Screenshot the whole app: Streamlit scrolls inside its main section, so grow the viewport to fit it."""
    size = page.viewport_size
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": min(max(height, size["height"]), 8000)})
    page.wait_for_function(CHARTS_SETTLED, timeout=TIMEOUT_MS)  # plotly re-laid out to the new width
    page.screenshot(path=str(path))
    page.set_viewport_size(size)


def screenshot_pages(url: str, out: Path, image: Path | None, pages: list[str] | None = None,
                     prefix: str = "") -> list[Path]:  # fmt: skip
    """Visit ``pages`` (default every page), upload ``image`` on Inspect and Compare, save one full-page PNG per
    page as ``<out>/<prefix><page>.png``."""
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    with browser_page() as page:
        open_app(page, url)
        for name in pages or PAGES:
            open_page(page, name)
            if image and name in ("inspect", "compare"):
                upload_image(page, image)
            wait_for_content(page, name)
            saved.append(out / f"{prefix}{name}.png")
            full_screenshot(page, saved[-1])
    return saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=Path, default=REPO / "models", help="models folder (LAYA_MODELS)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument(
        "--image", type=Path, help="image to upload on Inspect and Compare (default: the bundled example)"
    )
    parser.add_argument("--model", help="SETTING/HEAD under --models, opened by its link (default: the first one)")
    parser.add_argument("--pages", nargs="+", choices=list(PAGES), help="pages to visit (default: every page)")
    parser.add_argument("--prefix", default="", help="file name prefix (own- gives own-inspect.png)")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    if not Path(CHROMIUM).is_file():
        print(f"error: {CHROMIUM} is missing (apt-get install chromium)", file=sys.stderr)
        return 2
    from laya.app.catalog import example_images, find_checkpoints

    entries = [e for e in find_checkpoints(args.models) if e.error is None]
    if not entries:
        print(f"error: no readable checkpoints under {args.models}", file=sys.stderr)
        return 2
    chosen = entries[0]
    if args.model:
        named = [e for e in entries if e.path.resolve() == (args.models / args.model).resolve()]
        if not named:
            print(f"error: no readable checkpoint {args.model} under {args.models}", file=sys.stderr)
            return 2
        chosen = named[0]
    image = args.image or next(iter(example_images(chosen.path)), None)
    log = Path(tempfile.gettempdir()) / "laya-screenshots-streamlit.log"
    print(f"dashboard log: {log}")
    with serve(args.models, args.port, log=log) as url:
        link = f"{url}/?model={args.model}" if args.model else url
        for path in screenshot_pages(link, args.out, image, args.pages, args.prefix):
            print(path)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
