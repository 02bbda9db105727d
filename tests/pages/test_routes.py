"""Every page of app.py is the file pages/<url path>.py and starts with own_route() (pages/common/own_route.py),
which hands a run of the file alone (a cold server's legacy mode) to app.py, and only a run outside app.py."""

from __future__ import annotations

import ast
import runpy
import threading
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pages.common import own_route as route

ROOT = Path(__file__).resolve().parents[2]


def app_pages() -> list[tuple[str, dict[str, object]]]:
    """``(file, keywords)`` of each ``st.Page`` call in app.py."""
    tree = ast.parse((ROOT / "app.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Page"]
    return [(c.args[0].value, {k.arg: ast.literal_eval(k.value) for k in c.keywords}) for c in calls]


def first_statement(path: Path) -> ast.stmt:
    """The first statement after the docstring and the imports."""
    body = ast.parse(path.read_text()).body
    return next(s for s in body[1:] if not isinstance(s, (ast.Import, ast.ImportFrom)))


def test_every_page_is_the_file_of_its_url_path_and_starts_with_own_route():
    pages = app_pages()
    routed = [(file, keys) for file, keys in pages if not keys.get("default")]
    assert {Path(file).stem for file, _ in routed} >= {"compare-heads", "inspect-input", "activation-patching"}
    assert [keys.get("url_path") for _, keys in routed] == [None] * len(routed)  # the path is the file's name
    default = [(file, keys) for file, keys in pages if keys.get("default")]
    assert default == [("pages/inspect-input.py", default[0][1])] and default[0][1]["url_path"] == ""
    files = {ROOT / file for file, _ in pages}
    assert files == set((ROOT / "pages").glob("*.py"))  # no page file outside app.py's navigation
    for path in files:
        call = first_statement(path)
        assert isinstance(call, ast.Expr) and ast.unparse(call) == "own_route()", path.name


def test_own_route_hands_only_a_run_outside_app_py_to_it(monkeypatch: pytest.MonkeyPatch):
    """One thread runs a page inside app.py (``run_page``) while another runs a page alone: only the lone one
    runs app.py and stops. A module-level flag would let the lone run through, without the sidebar."""
    ran = []
    monkeypatch.setattr(runpy, "run_path", lambda path, run_name: ran.append((Path(path).name, run_name)))
    monkeypatch.setattr(route.st, "stop", lambda: ran.append("stop"))
    inside, alone_done = threading.Event(), threading.Event()

    class Page:
        def run(self) -> None:
            inside.set()
            assert alone_done.wait(10)
            route.own_route()  # inside app.py: does nothing

    worker = threading.Thread(target=route.run_page, args=(Page(),))
    worker.start()
    assert inside.wait(10)
    route.own_route()  # this thread's run is a page alone
    alone_done.set()
    worker.join(10)
    assert ran == [("app.py", "__main__"), "stop"]
    route.own_route()  # run_page's flag ended with its page
    assert ran[2:] == [("app.py", "__main__"), "stop"]


def test_a_page_run_alone_opens_inside_app_py(tiny_models: Path, monkeypatch: pytest.MonkeyPatch):
    """AppTest runs Streamlit's legacy mode on every run: a switch to a page runs its file alone first."""
    monkeypatch.setenv("LAYA_MODELS", str(tiny_models))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception and at.title[0].value == "Inspect an input"
    at.switch_page("pages/compare-heads.py").run()
    assert not at.exception and [t.value for t in at.title] == ["Compare heads"]  # the page once, not twice
    assert at.sidebar.radio, "the page ran without app.py's sidebar"
