"""Faithfulness overview: how well each method's layer scores predict the leave-one-layer-out effects."""

import streamlit as st

from laya.analysis.head.attribution import REDUCTION_LABELS, ig_description
from laya.analysis.head.faithfulness import EPSILON
from laya.app import faithfulness_views, labels, network_views
from laya.app.plots import deletion_curves_figure, faithfulness_figure, heads_overview_figure
from laya.app.text import shown
from laya.model.heads import CROSS_HEAD_MODES
from laya.model.own_head import OWN, is_own_head
from pages import common
from pages.common import switches
from pages.common.network import load_network_report
from pages.common.own_route import own_route

own_route()

checkpoint, selection = common.current()
own = is_own_head(checkpoint.meta.train)  # one informative layer: no layer ranking to test; its units instead
head = OWN if own else checkpoint.meta.head.name
st.title("Faithfulness overview")
METRICS_HELP = (
    f"Per test input: **Spearman (informative layers)** ranks the method's layer scores against the leave-one-layer-out "
    f"(LOO) drops over the layers whose drop exceeds ε = {EPSILON:g}; **top-1**: the method's top layer is the "
    "layer whose removal hurts most; **Deletion@1 / oracle**: the drop after removing the method's top layer over "
    "the largest drop; **Spearman (all layers)** is the paper's metric. Bars: means; error bars: 95% bootstrap CIs "
    "over test inputs. A head whose drops are non-zero on one layer only has no testable ranking: "
    "n/a (one informative layer)."
)

report = common.load_report(selection.path)
mode_col, reduction_col = st.columns(2)
if own:
    st.subheader("Own classifier: cheap per-unit scores against the intervention")
    st.caption(shown(labels.OWN_NOTE))
    if (network := load_network_report(selection.path)) is not None:
        agreement = network_views.agreement_view(network.agreement)
        common.table(agreement)
        st.caption("Per test input, each cheap score ranked against the drops of the intervention over the units "
                   "that keep the input: the mean Spearman ρ with its 95 % bootstrap CI over inputs. Two baselines "
                   "know nothing of the input (the per-unit mean drop over the references, a random score); a score "
                   "is trusted only where it beats the better of them on the same inputs (paired bootstrap).")
        st.markdown(shown(network_views.agreement_summary(network.agreement, network.method,
                                                          network_views.apart_units(network))))
        if (apart := network_views.apart_view(network)) is not None:
            st.markdown(network_views.apart_text(network))
            common.table(apart)
    report, mode, reduction = None, "mean", "signed"
if report is not None:
    st.subheader(f"{shown(labels.head_title(head))}: methods")
    link = common.opened_link()
    mode = mode_col.radio("Intervention (what removing a layer means)", report.modes,
                          format_func=lambda m: shown(labels.mode_label(m)),
                          index=report.modes.index(link.mode) if link.mode in report.modes else 0,
                          horizontal=True, key=f"faithfulness_mode_{head}")  # fmt: skip
    common.share(mode=mode)
    reduction = switches.pick(reduction_col.radio, "Post-hoc reduction", report.data["reductions"], "reduction",
                              "faithfulness_reduction", horizontal=True, format_func=lambda r: REDUCTION_LABELS[r])  # fmt: skip
    st.markdown(common.faithfulness_verdict(selection.path, mode, reduction),
                help=METRICS_HELP)
    with st.expander("How the methods and metrics are computed"):
        st.markdown(METRICS_HELP)
        st.markdown(f"`{shown(mode, 'code')}`: {labels.MODE_HELP[mode]}. `{shown(reduction, 'code')}`: "
                    f"{labels.REDUCTION_HELP[reduction]}. "
                    f"{shown(report.data['options'].get('ig') or ig_description(report.data['options']['ig_steps']))}. "
                    "With the training mean as baseline, IG is built partly to agree with LOO under `mean` (it "
                    "integrates along the path that intervention jumps); the zero baseline shares nothing with it.")  # fmt: skip
    table = faithfulness_views.faithfulness_matrix(report, mode, reduction)
    common.table(table)
    st.download_button(
        "Download CSV", report.faithfulness_table().to_csv(index=False), f"{head}-faithfulness.csv", "text/csv"
    )
    methods_figure = faithfulness_figure(report.faithfulness_table(), mode, reduction)
    curves = report.deletion_curves()
    held, curves_note = faithfulness_views.curves_reduction(curves, mode, reduction)
    curves_figure = deletion_curves_figure(curves, mode, held)
    st.plotly_chart(shown(methods_figure, "plotly"), key="faithfulness_methods")
    st.plotly_chart(shown(curves_figure, "plotly"), key="faithfulness_curves")
    if curves_note:
        st.caption(shown(curves_note))
    comparisons = faithfulness_views.comparisons_view(report, mode, reduction)
    if not comparisons.empty:
        st.markdown("**Paired comparisons** (paired bootstrap over the same test inputs; a CI covering 0 is a tie)")
        common.table(comparisons)
else:
    mode, reduction = "mean", "signed"

st.subheader("Heads of this setting")
members = [e for e in selection.group if e.head != OWN]  # the own classifier's row: n/a (one informative layer)
if not members:
    st.info("This checkpoint is not part of a catalogued setting; there are no other heads to compare.")
    st.stop()
if mode not in CROSS_HEAD_MODES:
    st.warning(f"Intervention `{shown(mode, 'code')}` differs between heads; the table below uses `mean`, the same for every head.")
    mode = "mean"
st.caption(f"Intervention `{shown(mode, 'code')}`, {shown(reduction)} post-hoc scores; 95% bootstrap CIs over test inputs (one seed).")
heads = faithfulness_views.heads_table([e.head for e in members],
                                       [common.load_report(e.path, warn=False) for e in members], mode, reduction)
heads_shown = faithfulness_views.heads_display(heads)
common.table(heads_shown)
overview = heads_overview_figure(heads, mode)
st.plotly_chart(shown(overview, "plotly"), key="faithfulness_heads")
sections = [(f"Heads of this setting ({mode}, {reduction})", heads_shown), ("", overview)]
if report is not None:
    sections = [(f"{labels.head_title(head)}: methods ({mode}, {reduction})", table), ("", methods_figure),
                ("", curves_figure), ("Paired comparisons (paired bootstrap over the same test inputs)", comparisons),
                *sections]  # fmt: skip
common.report_button(
    "Faithfulness overview", sections, f"{head}-faithfulness", checkpoint.name,
    common.provenance(checkpoint, reproduce=f"{common.view_link()} · python -m laya evaluate --checkpoint {checkpoint.path}"),
)  # fmt: skip
