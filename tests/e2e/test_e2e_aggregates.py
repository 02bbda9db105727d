"""End to end in Chromium: the class-wise aggregates lead to the test-set browser (issue 16, section 4).

A click on a class × layer heatmap cell offers "Browse the test inputs of <class>, highest <layer> score first";
the Browse page it opens shows that class only, in :func:`laya.app.browser.browse_table`'s order for
:func:`laya.app.browser.heatmap_query`. A click on a confusion cell opens those errors, most confident first
(:func:`laya.app.browser.confusion_query`). Both on a bundled checkpoint; the heatmap path also on a checkpoint
trained and evaluated by the test (``laya train`` + ``laya evaluate``, as a user's own), beside it on one server.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from laya.analysis.sample import Sample
from laya.app.browser import browse_table, confusion_query, heatmap_query
from laya.cli import main
from laya.training.train import train
from scripts.screenshots import browser_page, open_app, wait_for_charts, wait_idle
from tests.e2e.test_e2e_links import wait_for_query
from tests.conftest import tiny_config

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("chromium")]
ROOT = Path(__file__).resolve().parents[2]
PER_PAGE = 40  # pages/browse-test-set.py's thumbnails per page
CAPTION = re.compile(r"^#(\d+) (.+) → (.+) [✓✗] \d+%$")


@pytest.fixture(scope="module")
def models(image_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder holding the bundled Fashion-MNIST MLP and one tiny LAYA checkpoint trained and then
    evaluated like a user's own."""
    root = tmp_path_factory.mktemp("own") / "models"
    shutil.copytree(ROOT / "models" / "fashion-mnist-mlp", root / "fashion-mnist-mlp")
    checkpoint = root / "mine" / "laya"
    train(tiny_config(image_folder, checkpoint))
    assert main(["evaluate", "--checkpoint", str(checkpoint), "--ig-steps", "4", "--resamples", "20"]) == 0
    assert (checkpoint / "sample.safetensors").is_file()
    return root


def click_cell(page, chart, rows: int, columns: int, row: int, column: int) -> None:
    """Click cell (``row``, ``column``) of the heatmap ``chart`` (rows top-down, as both figures lay them out)."""
    chart.scroll_into_view_if_needed()
    wait_for_charts(page)
    box = chart.locator(".nsewdrag").first.bounding_box()
    x, y = box["x"] + box["width"] * (column + 0.5) / columns, box["y"] + box["height"] * (row + 0.5) / rows
    page.mouse.move(x, y)
    chart.locator(".hoverlayer .hovertext").first.wait_for()  # plotly found the cell's marker under the mouse
    page.mouse.click(x, y)


def shown_inputs(page) -> list[tuple[int, str, str]]:
    """``(test index, label, prediction)`` of the thumbnails on the Browse page, in their order."""
    captions = page.locator('[data-testid="stMain"] [data-testid="stCaptionContainer"]').all_inner_texts()
    return [(int(m[1]), m[2], m[3]) for m in (CAPTION.match(c.strip()) for c in captions) if m]


def expect_browser(page, expected) -> None:
    """The Browse page is open and shows ``expected``'s first page of inputs, in its order."""
    from playwright.sync_api import expect

    main_area = page.locator('[data-testid="stMain"]')
    expect(main_area.locator("h1").first).to_have_text("Browse the test set")
    expect(main_area.locator('[data-testid="stImage"]')).to_have_count(min(PER_PAGE, len(expected)))
    wait_idle(page)
    first = expected.iloc[:PER_PAGE]
    assert shown_inputs(page) == list(zip(first["test index"].astype(int), first["label"], first["prediction"]))


def heatmap_to_browser(page, url: str, model: str, sample: Sample, row: int, column: int) -> None:
    """Class-wise page of ``model`` → click heatmap cell (``row``, ``column``) → its browse button → Browse."""
    from playwright.sync_api import expect

    page.goto(f"{url}/class-depth?model={model}")
    main_area = page.locator('[data-testid="stMain"]')
    expect(main_area.locator("h1").first).to_have_text("Class-wise depth patterns")
    wait_idle(page)
    label, layer = sample.classes[row], sample.layer_names[column]
    heatmap = main_area.locator(".stPlotlyChart").first
    click_cell(page, heatmap, len(sample.classes), len(sample.layer_names), row, column)
    button = main_area.get_by_role("button", name=f"Browse the test inputs of {label}, highest {layer} score first")
    expect(button).to_be_visible()
    wait_idle(page)
    button.click()
    expected = browse_table(sample, heatmap_query(label, layer))
    assert len(expected) and set(expected["label"]) == {label}
    assert np.all(np.diff(expected["score"].to_numpy()) <= 0)  # highest score of that layer first
    expect_browser(page, expected)
    wait_for_query(page, bclass=label, layer=layer, sort="score", order="desc")


def test_heatmap_and_confusion_cells_open_the_browser_on_a_bundled_checkpoint(models: Path, server: str) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=120_000)
    sample = Sample.load(models / "fashion-mnist-mlp" / "laya")
    classes = sample.classes
    with browser_page() as page:
        open_app(page, server)
        # (a) a heatmap cell: the second class (not the default, the first), the last layer
        heatmap_to_browser(page, server, "fashion-mnist-mlp/laya", sample, 1, len(sample.layer_names) - 1)

        # (b) a confusion cell: the sample's most frequent error
        t = sample.table
        pairs = np.zeros((len(classes), len(classes)), dtype=int)
        np.add.at(pairs, (t["label"].to_numpy(), t["prediction"].to_numpy()), 1)
        np.fill_diagonal(pairs, -1)
        true, predicted = np.unravel_index(pairs.argmax(), pairs.shape)
        label, prediction = classes[true], classes[predicted]
        page.goto(f"{server}/class-depth?model=fashion-mnist-mlp/laya")
        main_area = page.locator('[data-testid="stMain"]')
        expect(main_area.locator("h1").first).to_have_text("Class-wise depth patterns")
        wait_idle(page)
        confusion = main_area.locator(".stPlotlyChart").filter(has_text="Confusion matrix")
        expect(confusion).to_have_count(1)
        click_cell(page, confusion, len(classes), len(classes), int(true), int(predicted))
        button = main_area.get_by_role("button", name=f"Browse the inputs of {label} predicted as {prediction}")
        expect(button).to_be_visible()
        wait_idle(page)
        button.click()
        expected = browse_table(sample, confusion_query(label, prediction))
        assert len(expected) == pairs[true, predicted] > 0
        assert np.all(np.diff(expected["confidence"].to_numpy()) <= 0)  # most confident first
        expect_browser(page, expected)
        assert {(lab, pred) for _, lab, pred in shown_inputs(page)} == {(label, prediction)}
        wait_for_query(page, bclass=label, bpred=prediction, outcome="wrong", sort="confidence", order="desc")


def test_the_browser_works_on_a_freshly_evaluated_own_checkpoint(models: Path, server: str) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=120_000)
    sample = Sample.load(models / "mine" / "laya")
    with browser_page() as page:
        open_app(page, server)
        heatmap_to_browser(page, server, "mine/laya", sample, len(sample.classes) - 1, 0)
