"""The page guard: an unexpected exception becomes a short ``st.error``; the traceback goes to the server log."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from laya.app.text import shown

LOG = logging.getLogger("laya.app")


@contextmanager
def guard(where: str = "this page") -> Iterator[None]:
    """Turn an unexpected exception into a short ``st.error`` and log its traceback server-side.

    Streamlit's own stop/rerun signals are ``BaseException`` and pass through. The message carries an
    id that is also in the log line, so an operator can find the traceback without showing it.
    """
    try:
        yield
    except Exception as error:  # the last line of defence for every page
        incident = secrets.token_hex(4)
        LOG.exception("unexpected error on %s (incident %s)", where, incident)
        st.error(
            f"Something went wrong on {shown(where)} ({shown(type(error).__name__)}); the app keeps running. "
            f"The details are in the server log (incident {shown(incident)})."
        )
