"""How pages show an attached network explained by its own units (its own classifier's checkpoint): the unit
profile with its switches (intervention, units or stages, and for transformer blocks the branch), the lens per unit
and the Grad-CAM strip, and the stored network report (``laya network``) where the merge brings its reader."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st

from laya.app import gradcam_views, head_comparison, input_images
from laya.app import network_views as nv
from laya.app.text import shown
from laya.model.attached_files import AttachedFileError
from laya.sandbox.info import ModelInfo
from pages.common.loading import gradcam_choice, network

NO_REPORT = ("The per-class and agreement views come from the stored network report, computed by "
             "`laya network --checkpoint DIR` (over the test set: per input every unit's drop, lens and "
             "depth).")  # fmt: skip


def unit_profile(info: ModelInfo, name: str, data: bytes, key: str, lens: bool = True) -> list[tuple[str, Any]]:
    """The network's unit profile on one image, its switches above it (default resample of whole units; the branch
    only where the units have attention and MLP branches), then (``lens``) the lens strip and the Grad-CAM strip; the
    ``(heading, figure)`` sections for a report."""
    classes = list(info.meta.classes)
    method_col, granularity_col = st.columns(2)
    method = method_col.radio("Intervention", nv.METHODS, format_func=lambda m: nv.METHODS[m], horizontal=True,
                              key=f"{key}_method")  # fmt: skip
    granularity = granularity_col.radio("Bars", nv.GRANULARITIES, format_func=lambda g: nv.GRANULARITIES[g],
                                        horizontal=True, key=f"{key}_granularity")  # fmt: skip
    branch = st.session_state.get(f"{key}_branch", "block")  # the switch below, shown once the units are known
    result = network(str(info.path), name, data, method, granularity, branch=branch)
    if isinstance(result, str):
        st.info(shown(result))
        return []
    if result.branched:
        st.radio("Branch", nv.BRANCHES, format_func=lambda b: nv.BRANCHES[b], horizontal=True, key=f"{key}_branch")
    profile = nv.unit_profile_figure(result, classes)
    st.plotly_chart(shown(profile, "plotly"), key=f"{key}_profile")
    st.caption(nv.unit_profile_caption(result, classes))
    sections: list[tuple[str, Any]] = [(nv.UNIT_PROFILE_TITLE, profile)]
    if not lens:
        return sections
    st.subheader("What each unit predicts (lens)")
    figure = nv.lens_figure(result, classes)
    if figure is None:
        st.info(shown(f"No lens for this network: {result.lens_source}. `laya attach` fits a tuned lens beside the "
                      "network's own head (tuned_lens.json)."))  # fmt: skip
    else:
        st.plotly_chart(shown(figure, "plotly"), key=f"{key}_lens")
        st.caption(shown(nv.depth_text(result)) + " Bars: p(final prediction) at each unit, teal where the unit's "
                   "class agrees with it, red where not (its class on the bar); line: KL to the final distribution.")
        st.dataframe(nv.lens_table(result, classes), hide_index=True)  # fmt: skip
        sections.append((nv.LENS_TITLE, figure))
    st.subheader("Where each unit looked")
    order = sorted(range(len(classes)), key=lambda c: c != result.prediction)
    chosen = st.selectbox("Class of the maps (predicted first)", order, format_func=lambda c: shown(classes[c], "text"),
                          key=f"{key}_cam_class")  # fmt: skip
    if chosen != result.cam_class:
        result = network(str(info.path), name, data, method, granularity, chosen, branch)
    choice = gradcam_choice(str(info.path))
    chosen = None if choice is None else choice.chosen
    strip = nv.gradcam_figure(result, input_images.input_pixels(data, info.meta.input, 1), classes, chosen)
    st.plotly_chart(shown(strip, "plotly"), key=f"{key}_gradcam")
    st.caption("Grad-CAM of the class at every unit, from one forward and one backward of the network: the "
               "channels weighted by their mean gradient, rectified, each map scaled to [0, 1]."
               + ("" if chosen is None else " Framed: the unit whose map beats a random one on the most pixel "
                  "metrics over the network report's test images (predicted class), below."))  # fmt: skip
    sections += [(nv.GRADCAM_TITLE, strip)]
    if choice is not None:
        with st.expander("Which unit's Grad-CAM to trust on this network (the network report's test images)"):
            figure = gradcam_views.gradcam_choice_figure(choice)
            st.plotly_chart(shown(figure, "plotly"), key=f"{key}_gradcam_choice")
            st.dataframe(gradcam_views.gradcam_choice_table(choice), hide_index=True)
            st.caption(shown(gradcam_views.gradcam_choice_caption(choice)))
        sections.append((gradcam_views.CHOICE_TITLE, figure))
    return sections


def stage_summed(info: ModelInfo, name: str, data: bytes, key: str) -> go.Figure | None:
    """The unit profile that :func:`unit_profile` drew under ``key`` (its switches' values), summed by the heads'
    layer its units make (:func:`~laya.app.head_comparison.stage_sums`), drawn; None where it is not shown."""
    state = st.session_state
    result = network(str(info.path), name, data, state.get(f"{key}_method", next(iter(nv.METHODS))),
                     state.get(f"{key}_granularity", next(iter(nv.GRANULARITIES))),
                     branch=state.get(f"{key}_branch", "block"))  # fmt: skip
    if isinstance(result, str):
        return None
    table = head_comparison.stage_sums(result, list(info.layer_names))
    figure = head_comparison.stage_sum_figure(table, info.meta.classes[result.prediction])
    st.plotly_chart(shown(figure, "plotly"), key=f"{key}_stages")
    units = ", ".join(f"{row.layer}: {row.units or 'none that keeps the input'}" for row in table.itertuples())
    st.caption(shown(f"Each of the heads' layers is made of the network's units ({units}); the bar sums their drops "
                     "on this input, on the same axis as LAYA's α. A unit that replaces its whole output (no "
                     "shortcut) is left out: its drop does not depend on the input."))  # fmt: skip
    return figure


def load_network_report(path: str) -> Any | None:
    """The stored network report beside an own-classifier checkpoint (``network.json``), or None where there is
    none or where this install has no reader for it yet (then an ``st.info`` says how it is computed), or where its
    files do not read or fit (then an ``st.warning`` names the file and what is wrong; the rest of the page draws)."""
    try:
        from laya.analysis.network.report_files import load_network_report as load  # the report's reader (laya network)
    except ImportError:
        st.info(NO_REPORT)
        return None
    try:
        report = load(path)
    except AttachedFileError as error:  # only the views of the stored report are lost
        st.warning(shown(f"The stored network report cannot be shown: {error}"))
        return None
    if report is None:
        st.info(NO_REPORT)
    return report


def class_unit_heatmap(report: Any, classes: list[str], key: str) -> go.Figure | None:
    """The stored report's class x unit heatmap with its switches (value, classes by label or prediction)."""
    value_col, by_col = st.columns(2)
    value = value_col.radio("Values", nv.CLASS_UNIT_VALUES, format_func=lambda v: nv.CLASS_UNIT_VALUES[v],
                            horizontal=True, key=f"{key}_value")  # fmt: skip
    by = by_col.radio("Classes", nv.CLASS_GROUPS, format_func=lambda b: nv.CLASS_GROUPS[b], horizontal=True,
                      key=f"{key}_by")  # fmt: skip
    table = nv.stored_class_units(report, value, by)
    if table is None:
        st.info("The stored network report has no per-input values of this kind.")
        return None
    apart = nv.apart_units(report)
    figure = nv.class_unit_heatmap(table, value, f"Class x unit: {nv.CLASS_UNIT_VALUES[value]}", apart)
    st.plotly_chart(shown(figure, "plotly"), key=f"{key}_heatmap")
    if value == "drop" and apart:
        st.caption(shown(f"Drawn apart, on a colour scale of their own: {', '.join(apart)}. Each has "
                         f"{nv.APART_REASON}."))  # fmt: skip
    return figure


__all__ = ["NO_REPORT", "class_unit_heatmap", "load_network_report", "stage_summed", "unit_profile"]
