"""Page switches that live in the link and survive a page change: ``switches.pick(st.radio, ...)``.

A switch's first value comes from what this session last picked on that page (Streamlit forgets a
widget's state when its page is left, so coming back would otherwise reset it), else from the link the
session was opened with; its current value goes into the URL (:data:`laya.app.links.SWITCHES`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from laya.app.browser import Query, query_switches
from laya.app.text import shown
from pages.common.sharing import opened_link, share

MEMORY = "laya_switch_memory"  # param -> value last picked (plain session state: kept across pages)


def remembered(param: str) -> str | None:
    """The value this session last picked for switch ``param``, else the opened link's."""
    memory = st.session_state.setdefault(MEMORY, {})
    return memory.get(param, opened_link().switch(param))


def remember(param: str, value: object) -> None:
    """Record switch ``param`` (for coming back) and put it in this run's link."""
    st.session_state.setdefault(MEMORY, {})[param] = None if value is None else str(value)
    share(switches=share().with_switch(param, value).switches)


def _start(param: str, options: list[Any], default: int) -> int:
    """Index of the remembered/linked value of ``param`` among ``options`` (compared as text), else ``default``."""
    start, texts = remembered(param), [str(o) for o in options]
    return texts.index(start) if start in texts else default


def pick(widget: Callable[..., Any], label: str, options: Sequence[Any], param: str, key: str, **kwargs: Any) -> Any:
    """``widget(label, options, index=..., key=key, **kwargs)`` started at the remembered/linked value
    (compared as text; the first option otherwise), its value remembered and linked under ``param``."""
    options = list(options)
    if key in st.session_state and st.session_state[key] not in options:  # options changed (another model)
        del st.session_state[key]
    index = _start(param, options, kwargs.pop("index", 0))
    value = widget(label, options, index=index, key=key, **kwargs)
    remember(param, value)
    return value


def upcoming(options: Sequence[Any], param: str, key: str) -> Any:
    """The value ``pick(..., options, param, key)`` will show in this run, for content drawn *above* its widget:
    the widget's state, else the remembered/linked value, else the first option. A chart above the widget that
    read the state directly would see None on a page's first run and change on the next, and a chart whose
    figure changes gets a new element id, so Streamlit drops the click made on the one shown."""
    options = list(options)
    if key in st.session_state and st.session_state[key] in options:
        return st.session_state[key]
    return options[_start(param, options, 0)] if options else None


def number(widget: Callable[..., Any], label: str, param: str, key: str, default: float, **kwargs: Any) -> float:
    """A numeric widget (``st.slider``) started at the remembered/linked value, else ``default``."""
    start = remembered(param)
    try:
        value = float(start) if start is not None else default
    except ValueError:
        value = default
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if low is not None and high is not None and not low <= value <= high:
        value = default
    chosen = widget(label, value=value, key=key, **kwargs)
    remember(param, round(float(chosen), 4))
    return chosen


def open_browser(query: Query) -> None:
    """Switch to the test-set browser showing ``query`` (its filters and sort replace the remembered ones)."""
    memory = st.session_state.setdefault(MEMORY, {})
    memory.update(query_switches(query))
    st.session_state.pop("browse_page", None)
    st.switch_page("pages/browse-test-set.py")


def browse_button(label: str, query: Query, key: str) -> None:
    """A button that opens the test-set browser on ``query``; ``label`` may name classes and layers (shown plain)."""
    if st.button(shown(label), key=key, icon=":material/photo_library:"):
        open_browser(query)


__all__ = ["MEMORY", "browse_button", "number", "open_browser", "pick", "remember", "remembered", "upcoming"]
