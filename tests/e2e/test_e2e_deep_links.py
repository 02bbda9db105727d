"""End to end in Chromium: every page's URL, with and without query parameters, opens that page on a freshly
started server and on a warm one, with no "Page not found" dialog and its URL kept (app.py's docstring).

One server for the module: its first request is the server's first script run (cold: Streamlit's legacy pages
mode until ``st.navigation`` runs), every later one is warm. The cold run goes through the page file named for the
path, whose ``own_route()`` runs ``app.py`` (``pages/common/own_route.py``); ``tests/pages/test_routes.py`` checks
that every page of ``app.py`` is such a file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from scripts.screenshots import TIMEOUT_MS, browser_page

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("chromium")]
HEADINGS = {  # url path (app.py) -> the page's heading
    "inspect-input": "Inspect an input",
    "compare-heads": "Compare heads",
    "class-depth": "Class-wise depth patterns",
    "faithfulness-overview": "Faithfulness overview",
    "depth-analytics": "Depth analytics",
    "browse-test-set": "Browse the test set",
    "activation-patching": "Activation patching",
}
QUERY = "?model=colours-mlp%2Flaya&mode=zero"
COLD = "compare-heads"  # the url path of the server's first request


@pytest.fixture(scope="module")
def models(tiny_models: Path) -> Path:
    return tiny_models


@pytest.fixture(scope="module")
def page() -> Iterator:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    with browser_page() as page:
        yield page


def opens(page, url: str, heading: str) -> None:
    """``url`` renders ``heading`` with no "Page not found" dialog, and the address bar keeps its path."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator('[data-testid="stMain"] h1', has_text=heading).first).to_be_visible()
    assert page.get_by_text("Page not found").count() == 0, f"{url}: Streamlit's page-not-found dialog"
    assert urlparse(page.url).path == urlparse(url).path, f"{url} was rewritten to {page.url}"


def test_a_page_url_with_its_query_opens_its_page_on_a_cold_server(server: str, page) -> None:
    """The module's first test: the server's first request, then the same URL warm."""
    opens(page, f"{server}/{COLD}{QUERY}", HEADINGS[COLD])
    opens(page, f"{server}/{COLD}{QUERY}", HEADINGS[COLD])


@pytest.mark.parametrize("path", list(HEADINGS))
def test_every_page_url_opens_its_page_with_and_without_its_query(server: str, page, path: str) -> None:
    """Half the pages are opened with query parameters first, the other half the other way round."""
    queried, plain = f"{server}/{path}{QUERY}", f"{server}/{path}"
    first, second = (queried, plain) if list(HEADINGS).index(path) % 2 == 0 else (plain, queried)
    opens(page, first, HEADINGS[path])
    opens(page, second, HEADINGS[path])
