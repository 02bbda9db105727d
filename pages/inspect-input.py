"""Inspect one input: prediction, layer scores, live leave-one-layer-out deletions, per-input faithfulness."""

import streamlit as st

from laya.analysis.head.attribution import POSTHOC_METHODS
from laya.app import depth_views, explanation_views, input_images, labels
from laya.app.catalog import example_images
from laya.app.map_plots import MapRow, map_classes, maps_caption, maps_figure
from laya.app.plots import layer_scores_figure, score_scale, topk_figure
from laya.app.text import shown
from laya.model.own_head import is_own_head
from pages import common
from pages.common.network import unit_profile
from pages.common.own_route import own_route

own_route()

checkpoint, selection = common.current()
head = checkpoint.meta.head.name
own = is_own_head(checkpoint.meta.train)  # the network as it is: explained by its units, not over one layer
st.title("Inspect an input")
st.caption(shown(f"{checkpoint.name} · {len(checkpoint.layer_names)} layers: {', '.join(checkpoint.layer_names)}"))

source_col, options_col = st.columns(2)
with source_col:
    image = common.image_input("inspect", example_images(checkpoint.path))
with options_col:
    link = common.opened_link()
    modes = checkpoint.modes[:1] if own else checkpoint.modes
    mode = st.radio(
        "Ablation mode (what removing a layer means)",
        modes,
        index=modes.index(link.mode) if link.mode in modes else 0,
        format_func=lambda m: shown(labels.mode_label(m)),
        horizontal=True,
        key=f"inspect_mode_{head}",
    ) if not own else modes[0]
    if not own:
        st.caption(f"`{shown(mode, 'code')}`: {labels.MODE_HELP[mode]}.")
    posthoc = st.multiselect(
        "Post-hoc methods to show beside",
        POSTHOC_METHODS,
        default=list(link.posthoc),
        format_func=labels.method_label,
        key="inspect_posthoc",
    ) if not own else []
    common.share(mode=mode, posthoc=tuple(posthoc))
    common.copy_link()
if image is None:
    st.info("Upload an image to inspect (this checkpoint has no bundled examples).")
    st.stop()

name, data = image
depth_report = common.load_depth(selection.path)  # its OOD scores come with the explanation's one backbone pass
ood = False if depth_report is None else depth_views.shown_ood_scores(depth_report.data, checkpoint.layer_dims)
explanation = common.explain(selection.path, name, data, mode, tuple(posthoc), approximate=False, ood=ood)
spec = checkpoint.meta.input
if warning := explanation_views.nonfinite_warning(explanation):
    st.warning(shown(warning))
st.session_state[common.CURRENT_INPUT] = (name, data)
st.page_link("pages/depth-analytics.py", label="Depth analytics of this input", icon=":material/stacked_bar_chart:")

image_col, prediction_col = st.columns([1, 2])
with image_col:
    st.image(input_images.model_view(explanation, spec), caption=f"{shown(name)}, as the model sees it")
    st.caption(shown(input_images.input_caption(spec)))
with prediction_col:
    label_col, confidence_col = st.columns(2)
    label_col.metric("Prediction", shown(explanation.label))
    confidence_col.metric("Confidence", f"{explanation.confidence:.1%}")
    st.plotly_chart(shown(topk_figure(explanation), "plotly"), key="inspect_topk")
    if depth_report is None:
        st.caption(
            f"Max softmax {explanation.confidence:.3f}. No OOD scores for this checkpoint yet: "
            f"`python -m laya depth --checkpoint {shown(checkpoint.path, 'code')}` fits them and their thresholds."
        )
    else:
        scores = explanation.ood_scores
        st.markdown("**Uncertainty and OOD status** (from the depth report)")
        widths = checkpoint.layer_dims
        st.markdown("\n".join(f"- {line}" for line in depth_views.ood_status(scores, depth_report.data, widths)))
        if warning := depth_views.mahalanobis_warning(scores.get("mahalanobis"), depth_report.data["n_train"], widths,
                                                      depth_report.data.get("covariance")):  # fmt: skip
            st.warning(shown(warning))

if own:
    st.subheader("The network by its units")
    sections = unit_profile(checkpoint, name, data, "inspect_network")
    st.caption(shown(labels.OWN_NOTE))
    common.report_button(f"Inspect: {name}", [("Prediction", f"{explanation.label} ({explanation.confidence:.1%})"),
                         ("", topk_figure(explanation)), *sections], f"own-{name.rsplit('.', 1)[0]}", checkpoint.name,
                         common.provenance(checkpoint, (name, input_images.model_view(explanation, spec))))  # fmt: skip
    st.stop()

st.subheader("Which layers the decision used")
if explanation.intrinsic is None:
    st.warning(
        f"{shown(labels.head_title(head))} has no intrinsic layer scores: the scores below are **post-hoc** attributions "
        "computed after the fact from gradients, not weights the model uses."
    )
scores_figure = layer_scores_figure(explanation)
st.plotly_chart(shown(scores_figure, "plotly"), key="inspect_scores")
normalised, _ = score_scale(list(explanation.scores))
st.caption(
    "Top: each method's layer scores (dark blue: intrinsic, light blue: post-hoc), "
    + ("each divided by its largest |score| because their units differ (raw values in the hover). "
       if normalised else "on one shared scale. ")
    + f"Bottom: the drop in p({shown(explanation.label)}) when the layer is removed "
    f"({shown(labels.mode_label(mode))}); "
    "hatched: removing the layer flips the label."
)  # fmt: skip
ablation = common.block_ablation_chart(checkpoint, name, data, "inspect_block_ablation")

st.subheader("Where each layer looked")
map_sections = []
section, deferred = common.maps_section([explanation], "inspect_approximate_maps")  # CLS-token layers: once opened
if section is not None:
    with section:
        mapped = common.explain(selection.path, name, data, mode, tuple(posthoc)) if deferred else explanation
        class_col, weight_col = st.columns([2, 1], vertical_alignment="bottom")
        map_class = class_col.selectbox("Class of the maps (predicted first)", map_classes(mapped),
                                        key="inspect_map_class")  # fmt: skip
        weighted = weight_col.checkbox("Weight each map by the layer's share", value=True, key="inspect_map_weighted")
        image_row = MapRow(checkpoint.name, mapped, input_images.model_view(mapped, spec, 1))
        maps = maps_figure([image_row], map_class, weighted)
        st.plotly_chart(shown(maps, "plotly"), key="inspect_maps")
        st.caption(maps_caption(weighted))
        if deferred and (cost := explanation_views.model_time_caption(mapped)):  # the opened view's own cost
            st.caption(shown(cost))
        map_sections = [(f"Where each layer looked: {map_class}", maps)]

st.subheader("Live leave-one-layer-out")
st.caption(
    f"Each row removes one layer (`{shown(mode, 'code')}` ablation) and reruns the head: the drop in p({shown(explanation.label)}), "
    "the prediction afterwards, and whether the label flips."
)
table = explanation_views.layer_table_text(explanation)
st.dataframe(table, hide_index=True)
flips = table.loc[table["label flips"], "layer"].tolist()
st.caption(
    f"Label flips after removing: {shown(', '.join(flips))}." if flips else "No single layer's removal flips the label."
)

st.subheader("Faithfulness on this input")
st.caption(
    "Spearman correlation between each method's layer scores and the LOO drops; Deletion@1 = drop after removing its top layer."
    + (" n/a: only one layer's drop exceeds ε on this input, so no ranking can be tested (one informative layer)."
       if explanation.status else "")
)  # fmt: skip
common.table(explanation_views.input_faithfulness(explanation))

csv_col, json_col, html_col = st.columns(3)
stem = f"{head}-{name.rsplit('.', 1)[0]}-{mode}"
csv_col.download_button("Download CSV", explanation_views.explanation_csv(explanation), f"{stem}.csv", "text/csv")
json_col.download_button("Download JSON", explanation_views.explanation_json(explanation), f"{stem}.json",
                         "application/json")
with html_col:
    common.report_button(
        f"Inspect: {name}",
        [
            ("Prediction", f"{explanation.label} ({explanation.confidence:.1%})"),
            ("", topk_figure(explanation)),
            ("Which layers the decision used", scores_figure),
            *([("Block ablation (post hoc)", ablation)] if ablation else []),
            *map_sections,
            ("Live leave-one-layer-out", table),
            ("Faithfulness on this input", explanation_views.input_faithfulness(explanation)),
        ],
        stem,
        f"{checkpoint.name} · {mode} ablation",
        common.provenance(checkpoint, (name, input_images.model_view(explanation, spec))),
    )
if cost := explanation_views.model_time_caption(explanation):  # last: its measured digits change from run to run
    st.caption(shown(cost))
