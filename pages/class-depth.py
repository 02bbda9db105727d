"""Class-wise depth patterns: which layers each class relies on, from the evaluation report or recomputed live."""

from pathlib import Path

import streamlit as st

from laya.analysis.head.profiles import SUBSETS
from laya.app import browser, classwise_views, labels, network_views, seed_views
from laya.app.map_plots import class_maps_figure, no_class_maps_note
from laya.app.plots import heatmap_figure, profile_bars_figure, seed_profiles_figure
from laya.app.text import shown
from laya.data.datasets import DatasetNotFoundError, dataset_label
from laya.data.images import ImageError
from laya.model.own_head import is_own_head
from pages import common
from pages.common import switches
from pages.common.network import class_unit_heatmap, load_network_report
from pages.common.own_route import own_route

own_route()

SUBSET_LABELS = {"all": "all inputs", "correct": "correctly classified", "incorrect": "misclassified"}

checkpoint, selection = common.current()
head = checkpoint.meta.head.name
live = st.session_state.setdefault("laya_live_reports", {})
st.title("Class-wise depth patterns")

with st.container(border=True):
    st.markdown(f"**Recompute on the local dataset** (test split of {shown(dataset_label(checkpoint.meta.dataset))})")
    limit_col, button_col = st.columns([2, 1], vertical_alignment="bottom")
    limit = limit_col.number_input(
        "Inputs (0 = the whole test split)", min_value=0, value=1000, step=500, key="classwise_limit"
    )
    if button_col.button("Recompute on the local dataset", key="classwise_recompute"):
        bar = st.progress(0.0, text="Loading the dataset…")
        try:
            progress = lambda f, m: bar.progress(f, text=shown(m))  # noqa: E731
            live[selection.path] = common.evaluate_locally(selection.path, int(limit), progress)
        except (DatasetNotFoundError, ImageError, ValueError) as error:  # CheckpointError is a ValueError
            st.error(shown(classwise_views.recompute_error(error)))
    if selection.path in live:
        st.success(f"Showing a live evaluation on {live[selection.path].data['dataset']['n']:,} test inputs.")
        if st.button("Back to the bundled report", key="classwise_discard"):
            del live[selection.path]
            st.rerun()

report = live.get(selection.path) or common.load_report(selection.path)
if report is None:
    st.stop()
if is_own_head(checkpoint.meta.train):  # one informative layer: the network's units per class instead, no seeds
    st.subheader("Each class by the network's units")
    units = load_network_report(selection.path)
    heatmap = None if units is None else class_unit_heatmap(units, list(checkpoint.meta.classes), "classwise_units")
    if units is not None and (lens_summary := network_views.lens_summary_view(units.lens)) is not None:
        st.subheader("The tuned lens per unit, against what needs no input")
        common.table(lens_summary)
        st.caption("Over the report's test inputs: the mean KL to the network's final distribution of the tuned "
                   "lens, of the logit lens (only where the units write into the space the classifier reads) and "
                   "of the best constant distribution (the mean final distribution over the lens's fit sample, the "
                   "same whatever the input: a lens that does not beat it reads nothing of the input there); the "
                   "share whose lens class is the network's prediction; the epochs each translator trained, stopped "
                   "once its KL on a held-out part of the fit sample had not improved for the patience in "
                   "tuned_lens.json, and the epoch whose weights it keeps.")  # fmt: skip
    st.caption(shown(labels.OWN_NOTE))
    st.subheader("Confusion matrix")
    confusion = browser.confusion_figure(report.confusion())
    st.plotly_chart(shown(confusion, "plotly"), key="classwise_confusion")
    common.report_button("Class-wise patterns", [*([("Class x unit", heatmap)] if heatmap else []),
                         ("Confusion matrix", confusion)], "own-classwise", checkpoint.name,
                         common.provenance(checkpoint))  # fmt: skip
    st.stop()

kind_col, subset_col = st.columns(2)
loo_mode = labels.mode_label(report.data["profiles"]["class_loo_mode"])
kinds = {
    "scores": f"layer scores: {labels.method_label(report.primary_method)}",
    "loo": f"leave-one-layer-out drops, {loo_mode}",
}
kind = switches.pick(kind_col.radio, "Values", list(kinds), "values", "classwise_kind", format_func=lambda k: shown(kinds[k]),
                    horizontal=True)  # fmt: skip
subset = switches.pick(subset_col.radio, "Inputs", SUBSETS, "inputs", "classwise_subset",
                      format_func=lambda s: SUBSET_LABELS[s], horizontal=True)  # fmt: skip
profile = report.class_layer_profile(kind)
if profile.empty:
    st.info("This report has no leave-one-layer-out profile (it was evaluated without zero ablation).")
    st.stop()

colorbar = "mean α / score" if kind == "scores" else "mean LOO drop"
heatmap = heatmap_figure(profile, subset, classwise_views.profile_title(report, kind), kind, colorbar)
counts = classwise_views.class_counts(profile, subset)
cell = st.session_state.get("classwise_cell")
chosen = switches.upcoming(list(counts), "class", "classwise_class")  # the same figure on every run until a click
if chosen is not None and (cell is None or cell[0] != chosen):
    cell = (chosen, None)  # no clicked cell of this class: outline the row of the class opened below
event = st.plotly_chart(
    shown(classwise_views.clickable_heatmap(heatmap, selected=cell), "plotly"), key="classwise_heatmap", on_select="rerun", selection_mode="points"
)
st.caption(
    f"One trained seed ({report.data['checkpoint']['seed']:d}) of this head. How much of this pattern is the "
    "seed's and how much the method's is in **Across seeds** below."
)
clicked = classwise_views.clicked_cell(event, list(counts), report.layer_names)
if clicked is not None and clicked != st.session_state.get("classwise_cell"):  # a new click opens that class
    st.session_state["classwise_cell"] = clicked
    st.session_state["classwise_clicked"] = st.session_state["classwise_class"] = clicked[0]
    switches.remember("class", clicked[0])
    st.session_state["classwise_scroll"] = True
    st.rerun()  # redraw the heatmap with the clicked cell outlined, then scroll to the drill-down
cell = st.session_state.get("classwise_cell")
if cell is not None and cell[0] in counts and cell[1] in report.layer_names:
    switches.browse_button(f"Browse the test inputs of {cell[0]}, highest {cell[1]} score first",
                           browser.heatmap_query(*cell), "classwise_browse_cell")  # fmt: skip
st.caption(
    "Inputs per class: "
    + ", ".join(f"{shown(c)} {n:,}" for c, n in counts.items())
    + ". Hover a cell for mean ± std and n; click it to open that class below."
)
st.download_button("Download CSV", profile.to_csv(index=False), f"{head}-class-{kind}-profile.csv", "text/csv")

st.subheader("One class", anchor="one-class")
if st.session_state.pop("classwise_scroll", False):
    common.scroll_to("one-class")
name = switches.pick(st.selectbox, "Class", list(counts), "class", "classwise_class")
if counts[name] == 0:
    st.info(f"No {SUBSET_LABELS[subset]} inputs of class {shown(name)} in this report.")
score_col, loo_col = st.columns(2)
bounds = (0.0, 1.0) if labels.is_weight(report.primary_method) else (-float("inf"), float("inf"))
class_scores = profile_bars_figure(
    classwise_views.class_profile(report.class_layer_profile("scores"), name, subset), f"{name}: {kinds['scores']}",
    "scores", bounds,
)
class_loo = profile_bars_figure(
    classwise_views.class_profile(report.class_layer_profile("loo"), name, subset), f"{name}: LOO drop ({loo_mode})",
    "loo",
)
score_col.plotly_chart(shown(class_scores, "plotly"), key="classwise_class_scores")
loo_col.plotly_chart(shown(class_loo, "plotly"), key="classwise_class_loo")
layer_col, browse_col = st.columns([2, 1], vertical_alignment="bottom")
browse_layer = layer_col.selectbox("Browse this class's test inputs by the score of", report.layer_names,
                                   key="classwise_browse_layer")  # fmt: skip
with browse_col:
    switches.browse_button("Browse", browser.heatmap_query(name, browse_layer), "classwise_browse")

st.subheader("Confusion matrix")
confusion = report.confusion()
confusion_event = st.plotly_chart(
    shown(classwise_views.clickable_heatmap(browser.confusion_figure(confusion)), "plotly"), key="classwise_confusion", on_select="rerun",
    selection_mode="points",
)  # fmt: skip
pair = browser.clicked_cell(confusion_event, list(confusion.index), list(confusion.columns))
if pair is not None:
    switches.browse_button(f"Browse the inputs of {pair[0]} predicted as {pair[1]}", browser.confusion_query(*pair),
                          "classwise_browse_confusion")  # fmt: skip

st.subheader("Where each class was looked at")
map_sections = []
sample = common.load_sample(selection.path)
if sample is None:
    st.info("No test-set sample for mean spatial maps (`python -m laya sample DIR` writes it).")
elif st.toggle(f"Mean spatial maps per class and layer over the test-set sample ({len(sample.table)} inputs, one "
               "forward pass)", key="classwise_maps"):  # fmt: skip
    try:
        class_maps = common.class_maps(selection.path)
    except ValueError as error:
        class_maps, note = None, f"No mean spatial maps: {error}"
    else:
        note = no_class_maps_note(class_maps)
    if note:
        st.info(shown(note))
    else:
        maps_figure = class_maps_figure(class_maps, checkpoint.meta.classes, checkpoint.layer_names, subset,
                                        f"Mean map of each class's logit term, {SUBSET_LABELS[subset]} inputs")  # fmt: skip
        st.plotly_chart(shown(maps_figure, "plotly"), key="classwise_maps_figure")
        st.caption(
            f"Per class (row, n = inputs of that class in the sample, {SUBSET_LABELS[subset]}) and layer (column): "
            f"the mean over those inputs of the layer's exact map of the class's own logit term, all "
            f"{class_maps.size:d}×{class_maps.size:d} frames, on one colour scale (mean logit per input pixel). "
            "n/a: the layer has no exact map (MLP, CLS token)."
        )
        map_sections = [("Where each class was looked at", maps_figure)]

st.subheader("Across seeds")
seed_sections = []
seeds = common.seed_summary_of(Path(selection.path).parent, head, kind)  # the same for every class chosen
if seeds is None:
    st.info("No per-seed profiles for this setting (written by `python -m laya reproduce`).")
elif seeds.per_seed.empty:
    st.info("No per-seed profiles of this head.")
else:
    if seeds.per_seed["seed"].nunique() < 2:
        st.warning("Only one seed of this head was trained: its depth pattern may be the seed's, not the method's.")
    seeds_figure = seed_profiles_figure(seeds.per_seed, name, f"{name}: {kinds[kind]} per seed (all inputs)", kind)
    st.plotly_chart(shown(seeds_figure, "plotly"), key="classwise_seeds")
    st.dataframe(seeds.stability, hide_index=True)
    seed_sections = [("Across seeds", seeds_figure), ("", seeds.stability)]

st.subheader("All classes")
method = switches.pick(st.selectbox, "Method", classwise_views.profile_methods(report), "method", "classwise_method",
                      format_func=labels.method_label)  # fmt: skip
global_bars = profile_bars_figure(
    classwise_views.global_profile(report, method), f"{labels.method_label(method)}: mean over the test set (95% CI)",
    "scores", (0.0, 1.0) if labels.is_weight(method) else (-float("inf"), float("inf")),
)
st.plotly_chart(shown(global_bars, "plotly"), key="classwise_global")
if seeds is not None and not seeds.per_seed.empty:
    whole_figure = seed_profiles_figure(seeds.whole, seed_views.ALL_CLASSES, f"All classes: {kinds[kind]} per seed",
                                        kind)  # fmt: skip
    st.plotly_chart(shown(whole_figure, "plotly"), key="classwise_seeds_global")
    st.dataframe(seeds.whole_stability, hide_index=True)
    seed_sections += [("All classes, across seeds", whole_figure)]
st.caption("Mean leave-one-layer-out drop and label-flip rate per layer, per ablation mode:")
global_loo = classwise_views.global_loo(report)
common.table(global_loo)
common.report_button(
    "Class-wise depth patterns",
    [("", heatmap), (f"Class {name}", class_scores), ("", class_loo), ("All classes", global_bars),
     *map_sections, *seed_sections, ("Leave-one-layer-out per layer", global_loo)],
    f"{head}-classwise-{kind}-{subset}",
    checkpoint.name,
    common.provenance(checkpoint),
)  # fmt: skip
