"""Deep links on a server's first run: the page aliases in ``pages/`` hand that run to ``app.py``.

Until a server process first reaches ``st.navigation``, Streamlit runs in its legacy multipage mode
whenever a ``pages/`` folder sits beside the main script: it lists ``pages/*.py`` by file name and
answers any other URL path (``/compare-heads``) with "Page not found", rewriting the URL to ``/``.
So ``pages/`` holds one alias per url path of ``app.py`` (``pages/compare-heads.py`` ...). The
legacy mode finds the alias for the requested path and runs it; the alias runs ``app.py``, whose
``st.navigation`` ends the legacy mode and opens the real page of that path, with the sidebar and
the guard. From then on ``st.navigation`` routes every request and the aliases are never run.
"""

from __future__ import annotations

import runpy
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app.py"


def run_app() -> None:
    """Run ``app.py`` in this script run (an alias's whole body)."""
    runpy.run_path(str(APP), run_name="__main__")


__all__ = ["APP", "run_app"]
