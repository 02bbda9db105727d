"""End to end: the real ``streamlit run app.py`` on the tiny models, driven by headless Chromium.

Uploads an image through the real file input, waits for the charts and the LOO table, checks the
prediction against laya, refuses a broken upload, walks every page through the top-bar navigation
and saves screenshots to ``test-artifacts/``. ``test_every_page_looks_as_reviewed`` compares each page
on the bundled models with its reference screenshot (tests/visual.py; regenerate with
``LAYA_UPDATE_SCREENSHOTS=1 .venv/bin/python -m pytest tests/e2e/test_e2e_browser.py -k looks``).

Every step waits for the element its action produces (the uploader's chip naming the file, the
metric with the new value, charts drawn at their container's width), never for a fixed delay; every wait is bounded at ``TIMEOUT_MS`` (300 s). Run beside two busy processes
(``python -c 'while 1: pass'`` x 2, load ~20 on the shared 2-core machine): see docs/decisions/browser-tests.md,
for what that run showed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from laya.analysis.depth.report import DepthOptions, run_depth
from laya.analysis.head.explain import explain
from laya.app.catalog import example_images
from laya.data.images import load_image_tensor
from laya.model.checkpoint import load_checkpoint
from scripts.screenshots import (
    PAGES,
    REPO,
    TIMEOUT_MS,
    browser_page,
    full_screenshot,
    open_app,
    open_page,
    serve,
    upload_image,
    wait_for_charts,
    wait_for_content,
    wait_idle,
)
from tests import visual

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("chromium")]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def test_dashboard_in_a_browser(tiny_models: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)  # a loaded machine is slow, never wrong: wait for the content itself
    ARTIFACTS.mkdir(exist_ok=True)
    image = example_images(tiny_models / "colours-mlp" / "laya")[2]
    checkpoint = load_checkpoint(tiny_models / "colours-mlp" / "laya")
    spec = checkpoint.meta.input
    laya = explain(checkpoint, load_image_tensor(image, spec.channels, spec.source_size))
    broken = tmp_path / "broken.png"
    broken.write_bytes(image.read_bytes()[:40])

    with serve(tiny_models, log=ARTIFACTS / "e2e-streamlit.log") as url, browser_page() as page:
        open_app(page, url)
        main = page.locator('[data-testid="stMain"]')

        upload_image(page, image)
        expect(main.get_by_text(image.name).first).to_be_visible()
        wait_for_charts(page, 2)  # top-k and the layer-score chart
        expect(main.locator('[data-testid="stDataFrame"]').first).to_be_visible()  # the live LOO table
        values = main.locator('[data-testid="stMetricValue"]')
        expect(values.nth(0)).to_have_text(laya.label)
        expect(values.nth(1)).to_have_text(f"{laya.confidence:.1%}")
        full_screenshot(page, ARTIFACTS / "e2e-inspect.png")

        upload_image(page, broken)
        expect(main.locator('[data-testid="stAlert"]', has_text="Cannot use 'broken.png' as an image")).to_be_visible()
        full_screenshot(page, ARTIFACTS / "e2e-inspect-bad-upload.png")
        upload_image(page, image)  # the app keeps working
        expect(values.nth(0)).to_have_text(laya.label)

        for name in ("compare", "classwise", "faithfulness", "depth"):
            open_page(page, name)
            wait_for_charts(page)
            expect(main.locator("h1").first).to_have_text(PAGES[name][1])
            assert main.locator('[data-testid="stException"]').count() == 0
            full_screenshot(page, ARTIFACTS / f"e2e-{name}.png")
        open_page(page, "inspect")
        wait_for_charts(page, 2)


def test_depth_page_in_a_browser(tiny_models: Path, tmp_path: Path) -> None:
    """Depth analytics with a depth report: an upload gives laya's prediction, the global charts render."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    ARTIFACTS.mkdir(exist_ok=True)
    models = tmp_path / "models"
    shutil.copytree(tiny_models / "colours-mlp", models / "colours-mlp")
    run_depth(models / "colours-mlp" / "laya", DepthOptions(limit=12, train_limit=30, resamples=20, random_orders=2))
    image = example_images(models / "colours-mlp" / "laya")[1]
    checkpoint = load_checkpoint(models / "colours-mlp" / "laya")
    spec = checkpoint.meta.input
    laya = explain(checkpoint, load_image_tensor(image, spec.channels, spec.source_size))

    with serve(models, log=ARTIFACTS / "e2e-depth-streamlit.log") as url, browser_page() as page:
        open_app(page, url)
        open_page(page, "depth")
        main = page.locator('[data-testid="stMain"]')
        main.get_by_text("Use the input from Inspect").first.click()  # switch to this page's own input
        upload_image(page, image)
        values = main.locator('[data-testid="stMetricValue"]')
        expect(values.nth(0)).to_have_text(laya.label)
        wait_for_charts(page, 6)  # attribution, readout path, early exit, pruning, class-wise attribution, ROC
        expect(main.get_by_text("Compute saved at").first).to_be_visible()
        assert main.locator('[data-testid="stException"]').count() == 0
        full_screenshot(page, ARTIFACTS / "e2e-depth.png")


# the charts' numbers are fixed by the bundled reports; the pages' top-to-bottom layout is what is reviewed
VISUAL_PAGES = ("inspect", "compare", "classwise", "faithfulness", "depth", "browse", "patching")


#: the screenshots' reference names -> the checkpoint opened first (None: the dashboard's default, the Fashion-MNIST
#: MLP's LAYA head); the attached network's own classifier is a page layout of its own (unit profile, lens, Grad-CAM)
VISUAL_CHECKPOINTS = {"fashion-mnist-mlp": None, "own-network": "cifar10-resnet18-half/own"}


@pytest.fixture(scope="module")
def models() -> Path:
    """The bundled models/: the module's server, for every visual reference."""
    return REPO / "models"


@pytest.mark.parametrize("reference", list(VISUAL_CHECKPOINTS))
def test_every_page_looks_as_reviewed(server: str, reference: str) -> None:
    """Visual regression: every page on the bundled models, on the default checkpoint (Fashion-MNIST MLP, LAYA head)
    and on the bundled attached network's own classifier, opened by its link (``?model=``), at its first example:
    a full-page screenshot each, compared with tests/e2e/screenshots/ within the tolerance of
    :func:`tests.visual.assert_matches` (mismatches leave actual, reference and diff in test-artifacts/)."""
    model = VISUAL_CHECKPOINTS[reference]
    if model is not None and not (REPO / "models" / model / "model.json").is_file():
        pytest.skip(f"models/{model} is not here (python scripts/own_networks.py --ship)")
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    ARTIFACTS.mkdir(exist_ok=True)
    failures = []
    with browser_page(1280, 900) as page:
        page.emulate_media(reduced_motion="reduce")
        open_app(page, server if model is None else f"{server}/?model={model}")
        for name in VISUAL_PAGES:
            if name != "inspect":
                open_page(page, name)
            wait_for_content(page, name)
            wait_idle(page)
            page.evaluate("() => document.fonts.ready")
            shot = ARTIFACTS / f"visual-{reference}-{name}.png"
            full_screenshot(page, shot)
            try:
                visual.assert_matches(shot.read_bytes(), f"{reference}-{name}")
            except AssertionError as error:
                failures.append(str(error))
    assert not failures, "\n".join(failures)
