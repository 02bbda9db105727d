"""Each page file answers its own url path: ``pages/compare-heads.py`` is ``/compare-heads``, cold server included.

Until a server process first reaches ``st.navigation``, Streamlit runs in its legacy multipage mode whenever a
``pages/`` folder sits beside the main script (AppTest does on every run): it answers ``/compare-heads`` by
running the file ``pages/compare-heads.py`` alone, without ``app.py``, its sidebar and its guard. A page's first
statement, :func:`own_route`, notices that run and hands it to ``app.py``, whose ``st.navigation`` ends the legacy
mode and runs the page of that path (this same file) inside :func:`run_page`; then it stops the outer run.

Whether a page runs inside ``app.py`` is a per-run flag: each script run has a thread of its own, so a
thread-local set around ``page.run()`` tells one session's run from another's (a module-level flag would be
shared by every session of the server process).
"""

from __future__ import annotations

import runpy
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

if TYPE_CHECKING:
    from streamlit.navigation.page import StreamlitPage

APP = Path(__file__).resolve().parents[2] / "app.py"
_RUN = threading.local()  # .inside_app: True while app.py runs a page in this thread's script run


def run_page(page: StreamlitPage) -> None:
    """Run ``page`` (``st.navigation``'s choice) as ``app.py``'s: its :func:`own_route` call does nothing."""
    _RUN.inside_app = True
    try:
        page.run()
    finally:
        _RUN.inside_app = False


def own_route() -> None:
    """A page's first statement: run alone (legacy mode), run ``app.py``, which runs this page, and stop there."""
    if getattr(_RUN, "inside_app", False):
        return
    runpy.run_path(str(APP), run_name="__main__")
    st.stop()


__all__ = ["APP", "own_route", "run_page"]
