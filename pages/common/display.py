"""How pages show things: display tables whole, the post-hoc block ablation of a LastLayer head, the section of the
spatial maps, and scrolling to an anchor after a click."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from laya.analysis.block_ablation import SKIP
from laya.analysis.head.explain import Explanation
from laya.app.depth_plots import block_ablation_figure
from laya.app.map_plots import deferred_label, no_maps_note
from laya.app.text import shown
from laya.model.own_head import is_own_head
from laya.sandbox.info import ModelInfo
from pages.common.loading import block_ablation
from pages.common.network import unit_profile


def table(frame: pd.DataFrame) -> None:
    """A display-text table shown whole, wrapped to the page (never clipped or scrolled sideways), indexed by its
    first column; every header and text cell shown plain (``st.table`` renders them as Markdown)."""
    st.table(shown(frame.set_index(frame.columns[0])))


def maps_section(explanations: Sequence[Explanation], key: str) -> tuple[Any | None, bool]:
    """Where a page draws the spatial maps of ``explanations`` (made with ``approximate=False``): ``(container,
    deferred)``. Where they deferred CLS-token layers' approximate maps, a closed expander whose heading says what
    opening it costs (``deferred``: the page explains again with the maps, inside it); else the page itself. The
    container is None where there is nothing to draw: no layer has a map (a note says so) or the section is closed."""
    label = next(filter(None, map(deferred_label, explanations)), None)
    section = st.expander(shown(label), key=key, on_change="rerun") if label else st.container()
    if note := no_maps_note(explanations):
        st.info(shown(note))
        return None, False
    return (section if label is None or section.open else None), label is not None


def block_ablation_chart(info: ModelInfo, name: str, data: bytes, key: str) -> go.Figure | None:
    """For an attached network's own classifier: its unit profile (:func:`pages.common.network.unit_profile`).
    For another LastLayer head: the bar chart of the drop in p(ŷ) when each block's output is mean-ablated inside
    the backbone (or, on request, each residual block skipped), labelled post hoc, and its caption; the figure, for
    a report. An attached network's own classifier shows it at once; another LastLayer head on request, since it
    costs L + 1 more passes of the backbone (the page's default view stays at its measured cost). Other heads:
    nothing (None)."""
    if info.meta.head.name != "lastlayer":
        return None
    if is_own_head(info.meta.train):  # the network itself: its units, by an intervention that keeps the input
        sections = unit_profile(info, name, data, key, lens=False)
        return sections[0][1] if sections else None
    if not st.toggle(
        f"Post-hoc block ablation (+{len(info.layer_names) + 1} backbone passes)", key=f"{key}_on"
    ):
        return None
    result = block_ablation(str(info.path), name, data)
    residual = 0 if isinstance(result, str) else sum(result.residual)
    if residual and st.toggle(f"Skip the {residual:d} residual block(s) instead (output := input)", key=f"{key}_skip"):
        result = block_ablation(str(info.path), name, data, skip=True)
    if isinstance(result, str):
        st.info(shown(result))
        return None
    figure = block_ablation_figure(result, info.layer_names, info.meta.classes)
    st.plotly_chart(shown(figure, "plotly"), key=key)
    skipped = SKIP in result.methods
    st.caption(
        f"**Post hoc**: the unchanged model, explained after the fact. Each bar replaces one block's output inside "
        f"the backbone by its mean over the {result.references:d} bundled example images"
        + (" (or, for a bar marked skipped, by the block's own input: a residual block without its branch)"
           if skipped else "")
        + " and runs the rest of the network: the drop in p(ŷ) is that block's total effect on this decision "
        "(hatched: the label flips). A LastLayer head has no layer scores of its own."
    )  # fmt: skip
    return figure


def scroll_to(anchor: str) -> None:
    """Scroll the page to the element with id ``anchor`` (a header's ``anchor=``), once, when this run renders."""
    import streamlit.components.v1 as components

    components.html(
        f"<script>window.parent.document.getElementById({anchor!r})?.scrollIntoView({{block: 'start'}});</script>",
        height=0,
    )
