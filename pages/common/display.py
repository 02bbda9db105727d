"""How pages show things: display tables whole, and scrolling to an anchor after a click."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from laya.app.text import shown


def table(frame: pd.DataFrame) -> None:
    """A display-text table shown whole, wrapped to the page (never clipped or scrolled sideways), indexed by its
    first column; every header and text cell shown plain (``st.table`` renders them as Markdown)."""
    st.table(shown(frame.set_index(frame.columns[0])))


def scroll_to(anchor: str) -> None:
    """Scroll the page to the element with id ``anchor`` (a header's ``anchor=``), once, when this run renders."""
    import streamlit.components.v1 as components

    components.html(
        f"<script>window.parent.document.getElementById({anchor!r})?.scrollIntoView({{block: 'start'}});</script>",
        height=0,
    )
