"""Faithfulness overview: how well each method's layer scores predict the leave-one-layer-out effects."""

import streamlit as st

from laya.app import views
from laya.app.plots import deletion_curves_figure, faithfulness_figure, heads_overview_figure
from pages import common

checkpoint, selection = common.current()
head = checkpoint.meta.head.name
st.title("Faithfulness overview")
st.caption(
    "Spearman faithfulness: per test input, the rank correlation between a method's layer scores and the drops "
    "when each layer is removed, averaged. Deletion@1: the drop after removing the layer the method ranks first."
)

report = common.load_report(selection.path)
if report is not None:
    st.subheader(f"{views.head_title(head)}: methods")
    mode = st.radio("Ablation mode", report.data["modes"], horizontal=True, key=f"faithfulness_mode_{head}")
    st.caption(f"`{mode}`: {views.MODE_HELP[mode]}.")
    table = views.faithfulness_matrix(report, mode)
    st.dataframe(table, hide_index=True)
    st.download_button(
        "Download CSV", report.faithfulness_table().to_csv(index=False), f"{head}-faithfulness.csv", "text/csv"
    )
    chart_col, curve_col = st.columns(2)
    chart_col.plotly_chart(faithfulness_figure(report.faithfulness_table(), mode), key="faithfulness_methods")
    curve_col.plotly_chart(deletion_curves_figure(report.deletion_curves(), mode), key="faithfulness_curves")

st.subheader("Heads of this setting")
members = list(selection.group)
if not members:
    st.info("This checkpoint is not part of a catalogued setting; there are no other heads to compare.")
    st.stop()
heads = views.heads_table([e.head for e in members], [common.load_report(e.path, warn=False) for e in members])
st.dataframe(heads, hide_index=True)
overview = heads_overview_figure(heads)
st.plotly_chart(overview, key="faithfulness_heads")
sections = [("Heads of this setting", heads), ("", overview)]
if report is not None:
    sections = [
        (f"{views.head_title(head)}: methods ({mode} ablation)", table),
        ("", faithfulness_figure(report.faithfulness_table(), mode)),
        ("", deletion_curves_figure(report.deletion_curves(), mode)),
        *sections,
    ]
common.report_button("Faithfulness overview", sections, f"{head}-faithfulness", checkpoint.name)
