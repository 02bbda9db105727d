"""Links and reports: the page's state in the URL, a "copy link" box, the HTML report button."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import streamlit as st

from laya.app import links
from laya.app.export import Provenance, Section, html_report

VIEW = "laya_view"  # the links.View of this run (sidebar + page), written to the URL
OPENED = "laya_opened_link"  # the links.View the session was opened with (decoded once)


def opened_link() -> links.View:
    """The view in the URL this session was opened with (widgets start from it; decoded once per session)."""
    if OPENED not in st.session_state:
        st.session_state[OPENED] = links.decode_view(st.query_params.to_dict())
    return st.session_state[OPENED]


def option_index(options: Sequence[object], value: object, default: int = 0) -> int:
    return list(options).index(value) if value in options else default


def share(**changes: object) -> links.View:
    """Add the page's own state (``example``, ``mode``, ``posthoc``, ``switches``) to this run's view and the URL."""
    view = replace(st.session_state.get(VIEW) or links.View(), **changes)
    st.session_state[VIEW] = view
    st.query_params.from_dict(links.encode_view(view))
    return view


def view_link() -> str:
    """The URL that reopens this view."""
    return links.view_url(st.context.url, st.session_state.get(VIEW) or links.View())


def copy_link() -> None:
    """A "copy link" box: the URL that reopens this view (the code block has a copy button)."""
    with st.popover("Copy link to this view", icon=":material/link:"):
        st.code(view_link(), language=None)
        st.caption("Anyone with access to this server opens the same model, page, example and options.")


def report_button(
    title: str, sections: Sequence[Section], stem: str, subtitle: str = "", source: Provenance | None = None
) -> None:
    """Download a static HTML report of ``sections`` (built only when clicked), headed by its ``source``
    (:func:`pages.common.sidebar.provenance`)."""
    st.download_button(
        "Download HTML report",
        lambda: html_report(title, sections, subtitle, source),
        f"{stem}.html",
        "text/html",
        icon=":material/description:",
        on_click="ignore",
    )
