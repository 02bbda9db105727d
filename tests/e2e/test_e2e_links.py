"""End to end in Chromium: links name the checkpoint and restore the page's switches, an upload is said not to be
in the link, the test-set browser opens an input on Inspect and is reached from a detection row."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from laya.analysis.depth.report import DepthOptions, run_depth
from laya.analysis.sample import Sample
from laya.app.catalog import example_images
from laya.cli import main
from scripts.screenshots import TIMEOUT_MS, browser_page, open_app, open_page, upload_image

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("chromium")]


@pytest.fixture(scope="module")
def models(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny setting plus a second LAYA checkpoint of the same group; LAYA with depth analytics."""
    root = tmp_path_factory.mktemp("linked") / "models"
    shutil.copytree(tiny_models / "colours-mlp", root / "colours-mlp")
    laya = root / "colours-mlp" / "laya"
    run_depth(laya, DepthOptions(limit=12, train_limit=30, resamples=20, random_orders=2))
    assert main(["sample", str(laya)]) == 0
    shutil.copytree(laya, root / "colours-mlp" / "laya-seed1")
    return root


#: true once the address bar's query holds every expected parameter (the last value of each)
HOLDS = """(expected) => {
    const query = new URLSearchParams(window.location.search);
    return Object.entries(expected).every(([name, value]) => query.getAll(name).at(-1) === value);
}"""


def wait_for_query(page, **expected: str) -> None:
    """Wait until the URL's query holds ``expected``: Streamlit writes the query after the run that draws the
    page, so the heading can show before it; bounded at ``TIMEOUT_MS``, then fails naming the URL."""
    from playwright.sync_api import Error

    try:
        page.wait_for_function(HOLDS, arg=expected, timeout=TIMEOUT_MS)
    except Error as error:
        raise AssertionError(f"{page.url} does not hold {expected}") from error


def test_links_restore_the_checkpoint_and_every_switch(models: Path, server: str) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    with browser_page() as page:
        open_app(page, server)  # a fresh server knows its url paths after its first run (app.py's docstring)
        page.goto(f"{server}/class-depth?model=colours-mlp/laya-seed1&class=red&values=loo&inputs=correct")
        main_area = page.locator('[data-testid="stMain"]')
        expect(main_area.locator("h1").first).to_have_text("Class-wise depth patterns")
        sidebar = page.locator('[data-testid="stSidebar"]')
        expect(sidebar.get_by_text("laya-seed1")).to_be_visible()  # the twin, named apart from the other LAYA
        checked = sidebar.locator('[data-testid="stRadio"] label:has(input:checked)').nth(1)
        expect(checked).to_contain_text("laya-seed1")
        expect(main_area.get_by_role("combobox", name="Class", exact=True)).to_have_value("red")
        expect(main_area.locator('label:has(input:checked)', has_text="leave-one-layer-out")).to_have_count(1)
        expect(main_area.locator('label:has(input:checked)', has_text="correctly classified")).to_have_count(1)
        expect(page).to_have_url(re.compile(r"model=colours-mlp(%2F|/)laya-seed1"))
        open_page(page, "faithfulness")  # leave the page and come back: the class picked there stays
        open_page(page, "classwise")
        expect(main_area.get_by_role("combobox", name="Class", exact=True)).to_have_value("red")

        page.goto(f"{server}/depth-analytics?model=colours-mlp/laya&threshold=0.8")
        expect(main_area.locator("h1").first).to_have_text("Depth analytics")
        expect(main_area.locator('[data-testid="stSlider"]').first).to_contain_text("0.80")

        open_page(page, "inspect")
        image = example_images(models / "colours-mlp" / "laya")[1]
        upload_image(page, image)
        expect(main_area.get_by_text("is not part of this page's link")).to_be_visible()
        expect(page).not_to_have_url(re.compile("example="))


def test_browser_opens_inputs_on_inspect_and_is_reached_from_detection(models: Path, server: str) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    sample = Sample.load(models / "colours-mlp" / "laya")
    with browser_page() as page:
        open_app(page, server)
        main_area = page.locator('[data-testid="stMain"]')
        open_page(page, "browse")
        expect(main_area.locator('[data-testid="stImage"]')).to_have_count(len(sample.table))
        first = int(sample.table["index"].iloc[0])
        main_area.get_by_role("button", name="Inspect").first.click()
        expect(main_area.locator("h1").first).to_have_text("Inspect an input")
        expect(main_area.get_by_text(f"Test input #{first}")).to_be_visible()
        predicted = sample.classes[int(sample.table["prediction"].iloc[0])]
        expect(main_area.locator('[data-testid="stMetricValue"]').first).to_have_text(predicted)
        wait_for_query(page, input=str(first))

        open_page(page, "depth")
        table = main_area.locator('[data-testid="stDataFrame"]').last
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        page.mouse.click(box["x"] + 8, box["y"] + 55)  # the row-selection column of the first data row
        button = main_area.get_by_role("button", name="Browse the most suspicious test inputs")
        expect(button).to_be_visible()
        button.click()
        expect(main_area.locator("h1").first).to_have_text("Browse the test set")
        wait_for_query(page, sort="suspicion", order="desc")
