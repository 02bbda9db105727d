"""End to end in Chromium: issue 20's views on a bundled CNN — the spatial map grids of Inspect and Compare, the
Activation patching page and the per-layer lens on Depth analytics — drawn by a real browser.

The numbers in these views are tested without a browser (``tests/app/test_map_plots.py``,
``tests/pages/test_app_maps.py``, ``tests/pages/test_patching_page.py``); here the browser must draw them: every wait is for the chart
itself (``scripts.screenshots.wait_for_charts``), bounded at ``TIMEOUT_MS``, never a fixed delay.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.screenshots import TIMEOUT_MS, browser_page, open_app, open_page, serve, wait_for_charts, wait_idle

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("chromium")]
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
LAYERS = [f"block {i}" for i in range(1, 6)]  # the bundled CIFAR-10 CNN's five blocks

HEATMAPS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .flatMap(gd => (gd.data || []).filter(t => t.type === 'heatmap' && t.meta && t.meta.layer)
    .map(t => ({layer: t.meta.layer, kind: t.meta.kind, row: t.meta.row, axis: t.coloraxis || null})))"""
TITLES = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .map(gd => (gd.layout && gd.layout.title && gd.layout.title.text) || '')"""


def wait_for_title(page, text: str) -> None:
    """Wait until a drawn plotly chart's title contains ``text`` (titles may be wrapped in <b>)."""
    page.wait_for_function(f"() => ({TITLES})().some(t => t.includes({text!r}))", timeout=TIMEOUT_MS)


def test_maps_patching_and_lens_are_drawn_for_a_bundled_cnn() -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(exist_ok=True)
    expect.set_options(timeout=TIMEOUT_MS)
    with serve(REPO / "models", log=ARTIFACTS / "e2e-where-streamlit.log") as url, browser_page() as page:
        open_app(page, url)
        page.goto(f"{url}/?model=cifar10-cnn/laya")
        main_area = page.locator('[data-testid="stMain"]')
        expect(main_area.get_by_text("Where each layer looked")).to_be_visible()
        wait_for_charts(page, 2)  # the layer scores and the map grid
        wait_idle(page)
        page.wait_for_function(f"() => ({HEATMAPS})().length >= {len(LAYERS)}", timeout=TIMEOUT_MS)
        maps = page.evaluate(HEATMAPS)
        assert [m["layer"] for m in maps] == LAYERS and {m["kind"] for m in maps} == {"exact"}
        assert len({m["axis"] for m in maps}) == 1  # one colour scale for every depth

        open_page(page, "compare")
        page.wait_for_function(f"() => ({HEATMAPS})().length >= {4 * len(LAYERS)}", timeout=TIMEOUT_MS)
        wait_idle(page)
        maps = page.evaluate(HEATMAPS)
        assert len(maps) == 4 * len(LAYERS) and len({m["row"] for m in maps}) == 4  # one row per head
        assert len({m["axis"] for m in maps}) == 1  # and one colour scale across heads

        open_page(page, "patching")
        wait_for_title(page, "Patching each layer at the head")
        expect(main_area.locator('[data-testid="stDataFrame"]').first).to_be_visible()

        open_page(page, "depth")
        expect(main_area.get_by_text("Per-layer lens: each layer's own prediction")).to_be_visible()
        wait_for_title(page, "Per-layer lens (")
        wait_idle(page)
        page.screenshot(path=str(ARTIFACTS / "e2e-where-depth.png"), full_page=True)
