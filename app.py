"""LAYA dashboard: ``streamlit run app.py``; checkpoints are read from ``$LAYA_MODELS`` (default ``models/``).

This entry point only routes: the sidebar picks the model (``pages/common/sidebar.py``) and
``st.navigation`` (a top bar) runs one of the pages. Each page file is named for its url path
(``pages/compare-heads.py`` is ``/compare-heads``) and starts with ``own_route()``: Streamlit treats a
``pages/`` folder as legacy multipage pages until the first ``st.navigation`` call after a server start
(and AppTest on every run), and runs a page file alone there; ``own_route()`` then runs this script
instead (``pages/common/own_route.py``). ``.streamlit/config.toml`` hides sidebar navigation (that legacy
list included). Streamlit serves the default page at ``/`` only, so Inspect's own path ``/inspect-input``
is a hidden page of the same file. Every page runs inside ``pages.common.guard``.
"""

import os

import streamlit as st

from laya.app.palette import favicon
from pages.common import configure_torch, guard, keep_replies_across_reruns, pick_model
from pages.common.own_route import run_page

os.environ.setdefault("LAYA_DOWNLOAD", "0")  # the dashboard never downloads a dataset (issue 17)

st.set_page_config(page_title="LAYA dashboard", page_icon=favicon(), layout="wide")  # drawn here, no font server
configure_torch()
keep_replies_across_reruns()  # a Streamlit bug lost uploads dropped while a rerun started (pages/common/upstream.py)
page = st.navigation(
    [
        st.Page("pages/inspect-input.py", title="Inspect", icon=":material/search:", url_path="", default=True),
        st.Page("pages/inspect-input.py", title="Inspect", visibility="hidden"),  # /inspect-input: "/" is Inspect too
        st.Page("pages/compare-heads.py", title="Compare heads", icon=":material/view_column:"),
        st.Page("pages/class-depth.py", title="Class-wise depth patterns", icon=":material/grid_on:"),
        st.Page("pages/faithfulness-overview.py", title="Faithfulness overview", icon=":material/fact_check:"),
        st.Page("pages/depth-analytics.py", title="Depth analytics", icon=":material/stacked_bar_chart:"),
        st.Page("pages/browse-test-set.py", title="Browse test set", icon=":material/photo_library:"),
        st.Page("pages/activation-patching.py", title="Activation patching", icon=":material/swap_horiz:"),
    ],
    position="top",
)
with guard(page.title):  # no traceback ever reaches the page: a short st.error, the details in the server log
    pick_model()
    run_page(page)
