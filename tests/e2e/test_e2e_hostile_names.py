"""End to end in Chromium: class, layer and dataset names that are Markdown, HTML, LaTeX and emoji shortcodes show
as text on every page; no element comes from them and the browser asks nothing of the host they name.

The checkpoint folder is the tiny setting with its names replaced in every file (``model.json``, the reports, the
test-set sample). A local HTTP server on the port the names point at counts the requests that reach it; the page's
own requests are recorded too (``page.on("request")``).
"""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from laya.app.catalog import example_images
from scripts.screenshots import PAGES, TIMEOUT_MS, browser_page, open_app, open_page, serve, upload_image
from scripts.screenshots import wait_for_content

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("chromium")]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
FOUND = """(port) => {
    const attributes = ['src', 'href', 'xlink:href', 'srcset', 'poster', 'data', 'action', 'style'];
    const bad = [...document.querySelectorAll('*')].flatMap(element => attributes
        .map(name => element.getAttribute(name) || '')
        .filter(value => value.includes('127.0.0.1:' + port) || value.trim().toLowerCase().startsWith('javascript:'))
        .map(value => `${element.tagName} ${value} in ${element.closest('[data-testid]')?.dataset.testid}: `
            + element.parentElement.outerHTML.slice(0, 300)));  // where it is, to fix it
    const katex = document.querySelectorAll('.katex, .katex-display, math').length;
    const text = document.body.innerText;
    return {bad, katex, emoji: text.includes(String.fromCodePoint(0x1F604)), text};
}"""


def hostile_names(port: int) -> tuple[dict[str, str], str]:
    """The tiny setting's class and layer names -> hostile ones (each a Markdown image, a javascript: link, raw
    HTML, LaTeX or an emoji shortcode, told apart by a number), and a hostile dataset name."""
    image, html = f"![px](http://127.0.0.1:{port}/pixel.png)", f"<img src=http://127.0.0.1:{port}/h.png>"
    names = {
        "blue": f"{image} [c](javascript:alert(3))",
        "green": f"{html} $x^2$",
        "red": f":smile: [r](http://127.0.0.1:{port}/r)",
        "block 1": f"{html} 1",
        "block 2": f"$y_2$ {image}",
        "block 3": ":smile: 3",
    }
    return names, f"{image} {html} $z$ :smile:"


def rename(folder: Path, names: dict[str, str], dataset: str) -> None:
    """Replace every class and layer name in the checkpoint folder's JSON, CSV and sample metadata."""
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    for path in [*folder.rglob("*.json"), *folder.rglob("*.csv")]:
        path.write_text(pattern.sub(lambda m: names[m.group()], path.read_text()))
    for meta_file in folder.rglob("model.json"):
        meta = json.loads(meta_file.read_text())
        meta["dataset"] = dataset
        meta_file.write_text(json.dumps(meta))
    for tensors in folder.rglob("*.safetensors"):  # the sample's and per-input results' metadata, not the weights
        with safe_open(str(tensors), "np") as handle:
            metadata = handle.metadata() or {}
        if any(pattern.search(v) for v in metadata.values()):
            renamed = {k: pattern.sub(lambda m: names[m.group()], v) for k, v in metadata.items()}
            save_file(load_file(tensors), tensors, renamed)


class Counter(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        Counter.hits.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def bait() -> Iterator[ThreadingHTTPServer]:
    """A local server on the port the hostile names point at, counting the requests that reach it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Counter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


@pytest.fixture(scope="module")
def models(tiny_models: Path, bait: ThreadingHTTPServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "models"
    shutil.copytree(tiny_models / "colours-mlp", root / "colours-mlp")
    rename(root / "colours-mlp", *hostile_names(bait.server_address[1]))
    return root


def test_hostile_names_show_as_text_on_every_page(models: Path, bait: ThreadingHTTPServer) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(exist_ok=True)
    expect.set_options(timeout=TIMEOUT_MS)
    port = bait.server_address[1]
    requests: list[str] = []
    visited: dict[str, str] = {}
    with serve(models, log=ARTIFACTS / "e2e-hostile-streamlit.log") as url, browser_page() as page:
        page.on("request", lambda request: requests.append(request.url))
        open_app(page, url)

        def check(view: str) -> None:
            wait_for_content(page, view.split(":")[0])
            found = page.evaluate(FOUND, port)
            assert not found["bad"], f"{view}: elements from the names: {found['bad']}"
            assert found["katex"] == 0 and not found["emoji"], f"{view}: LaTeX or an emoji rendered from the names"
            assert "Something went wrong" not in found["text"]
            assert not page.locator('[data-testid="stException"]').count()
            visited[view] = found["text"]

        for name in PAGES:
            if name != "inspect":
                open_page(page, name)
            check(name)
        open_page(page, "inspect")  # the image-driven views: an uploaded image through Inspect, Depth and Patching
        upload_image(page, example_images(models / "colours-mlp" / "laya")[0])
        for name in ("inspect", "depth", "patching", "compare"):
            if name != "inspect":
                open_page(page, name)
            check(f"{name}:upload")
        (ARTIFACTS / "e2e-hostile-requests.txt").write_text("\n".join(requests))
    own = (url, "data:", "blob:", "about:")
    outside = [r for r in requests if f":{port}" in r or not r.startswith(own)]
    assert not outside and not Counter.hits, (outside, Counter.hits)
    assert len(visited) == len(PAGES) + 4 and requests
    assert "pixel.png" in visited["inspect"] and ":smile:" in visited["inspect"], "the names are shown, as text"
    assert "$x^2$" in visited["classwise"] and "<img src=" in visited["depth"]
