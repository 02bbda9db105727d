"""End to end in Chromium: every page's URL, with and without query parameters, opens that page on a freshly
started server and on a warm one, with no "Page not found" dialog and its URL kept (app.py's docstring)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest

from scripts.screenshots import CHROMIUM, TIMEOUT_MS, browser_page, serve

pytestmark = pytest.mark.e2e
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
HEADINGS = {  # url path (app.py) -> the page's heading
    "inspect-input": "Inspect an input",
    "compare-heads": "Compare heads",
    "class-depth": "Class-wise depth patterns",
    "faithfulness-overview": "Faithfulness overview",
    "depth-analytics": "Depth analytics",
    "browse-test-set": "Browse the test set",
    "activation-patching": "Activation patching",
}


def opens(page, url: str, heading: str) -> None:
    """``url`` renders ``heading`` with no "Page not found" dialog, and the address bar keeps its path."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator('[data-testid="stMain"] h1', has_text=heading).first).to_be_visible()
    assert page.get_by_text("Page not found").count() == 0, f"{url}: Streamlit's page-not-found dialog"
    assert urlparse(page.url).path == urlparse(url).path, f"{url} was rewritten to {page.url}"


@pytest.mark.parametrize("path", list(HEADINGS))
def test_every_page_url_opens_its_page_cold_and_warm(tiny_models: Path, path: str) -> None:
    """A fresh server per page: its first request (cold) and a second one (warm); half the pages are opened
    cold with query parameters and warm without, the other half the other way round."""
    from playwright.sync_api import expect

    if not Path(CHROMIUM).is_file():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (make system-deps) to run the browser test")
    ARTIFACTS.mkdir(exist_ok=True)
    expect.set_options(timeout=TIMEOUT_MS)
    queried, plain = f"/{path}?model=colours-mlp%2Flaya&mode=zero", f"/{path}"
    first, second = (queried, plain) if list(HEADINGS).index(path) % 2 == 0 else (plain, queried)
    with serve(tiny_models, log=ARTIFACTS / f"e2e-deep-links-{path}.log") as url, browser_page() as page:
        opens(page, url + first, HEADINGS[path])
        opens(page, url + second, HEADINGS[path])
