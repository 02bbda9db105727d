"""LAYA dashboard: ``streamlit run app.py``; checkpoints are read from ``$LAYA_MODELS`` (default ``models/``).

This entry point only routes: the sidebar picks the model (``pages/common/sidebar.py``) and
``st.navigation`` (a top bar) runs one of the pages. Streamlit still treats a ``pages/`` folder
as legacy multipage pages until the first ``st.navigation`` call after a server start (and
AppTest on every run); ``.streamlit/config.toml`` therefore hides sidebar navigation (that
legacy list included), and the url paths differ from the page files' names so that no page can run
without this script, i.e. without the sidebar. On that first run a deep link finds the alias
``pages/<url path>.py``, which runs this script (``pages/common/routes.py``). Streamlit serves the
default page at ``/`` only, so Inspect's own path ``/inspect-input`` is a hidden page of the same
file (the default's unused ``url_path`` is no file's name either: a page's id is its url path, and
the legacy list names each file's). Every page runs inside ``pages.common.guard``.
"""

import os

import streamlit as st

from laya.app.palette import favicon
from pages.common import configure_torch, guard, keep_replies_across_reruns, pick_model

os.environ.setdefault("LAYA_DOWNLOAD", "0")  # the dashboard never downloads a dataset (issue 17)

st.set_page_config(page_title="LAYA dashboard", page_icon=favicon(), layout="wide")  # drawn here, no font server
configure_torch()
keep_replies_across_reruns()  # a Streamlit bug lost uploads dropped while a rerun started (pages/common/upstream.py)
page = st.navigation(
    [
        st.Page("pages/inspect.py", title="Inspect", icon=":material/search:", url_path="home", default=True),
        st.Page("pages/inspect.py", title="Inspect", url_path="inspect-input", visibility="hidden"),  # "/" is Inspect too
        st.Page("pages/compare.py", title="Compare heads", icon=":material/view_column:", url_path="compare-heads"),
        st.Page(
            "pages/classwise.py", title="Class-wise depth patterns", icon=":material/grid_on:", url_path="class-depth"
        ),
        st.Page(
            "pages/faithfulness.py",
            title="Faithfulness overview",
            icon=":material/fact_check:",
            url_path="faithfulness-overview",
        ),
        st.Page(
            "pages/depth.py", title="Depth analytics", icon=":material/stacked_bar_chart:", url_path="depth-analytics"
        ),
        st.Page("pages/browse.py", title="Browse test set", icon=":material/photo_library:", url_path="browse-test-set"),
        st.Page(
            "pages/patching.py", title="Activation patching", icon=":material/swap_horiz:", url_path="activation-patching"
        ),
    ],
    position="top",
)
with guard(page.title):  # no traceback ever reaches the page: a short st.error, the details in the server log
    pick_model()
    page.run()
