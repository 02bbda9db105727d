"""Compare heads: one input through several checkpoints, side by side on shared axes."""

import streamlit as st

from laya.app import explanation_views, faithfulness_views, head_comparison, input_images
from laya.app.catalog import example_images
from laya.app.labels import MODE_HELP, OWN_NOTE, head_title, method_label, mode_label
from laya.app.map_plots import MapRow, map_classes, maps_caption, maps_figure
from laya.app.plots import compare_figure, layer_scores_figure
from laya.app.text import shown
from laya.model.checkpoint import CheckpointError
from laya.model.own_head import OWN, is_own_head
from pages import common
from pages.common.network import stage_summed, unit_profile
from pages.common.own_route import own_route

own_route()

selection = common.selected()
st.title("Compare heads")
st.caption(
    "The same input through each head: the scores are the head's own (intrinsic) where it has them, "
    "post-hoc Integrated Gradients otherwise (light blue); orange bars are each layer's leave-one-layer-out drop "
    "(hatched: the label flips)."
)

paths, labels = common.group_members(selection, common.catalog(str(common.models_root())))
default = [str(e.path) for e in selection.group] or [selection.path]
chosen = st.multiselect("Checkpoints", paths, default=default, format_func=labels.__getitem__, key="compare_paths")
if not chosen:
    st.info("Choose at least one checkpoint.")
    st.stop()

loaded = {}
for path in chosen:
    try:
        loaded[path] = common.load_model(path)
        common.show_load_warnings(loaded[path])
    except CheckpointError as error:
        st.error(shown(f"Cannot load {labels[path]}: {error}"))
if any(model.warnings for model in loaded.values()):
    common.anyway_box()
if not loaded:
    st.stop()

source_col, mode_col = st.columns(2)
with source_col:
    image = common.image_input("compare", example_images(selection.path))
with mode_col:
    modes = head_comparison.common_modes([c.modes for c in loaded.values()])
    link = common.opened_link()
    mode = st.radio(
        "Ablation mode (supported by every chosen head)",
        modes,
        format_func=lambda m: shown(mode_label(m)),
        index=modes.index(link.mode) if link.mode in modes else 0,
        horizontal=True,
        key="compare_mode",
    )
    st.caption(f"`{shown(mode, 'code')}`: {MODE_HELP[mode]}.")
    common.share(mode=mode)
    common.copy_link()
if image is None:
    st.info("Upload an image to compare the heads on.")
    st.stop()

name, data = image
heads = [OWN if is_own_head(c.meta.train) else c.meta.head.name for c in loaded.values()]
explanations = [common.explain(path, name, data, mode, approximate=False) for path in loaded]  # maps of CLS layers: below
reports = [common.load_report(path, warn=False) for path in loaded]
layered = [i for i, h in enumerate(heads) if h != OWN]  # the own classifier reads one layer: no layer charts of it

for column, head, explanation, report in zip(st.columns(len(loaded)), heads, explanations, reports):
    with column:
        st.markdown(f"**{shown(head_title(head))}**")
        st.metric("Prediction", shown(explanation.label))
        st.metric("Confidence", f"{explanation.confidence:.1%}")
        if head == OWN:  # no layer scores to show: the network by its units, below
            st.caption("Explained by the network's units (below)")
        else:
            st.caption(f"Scores: {shown(method_label(explanation.primary))}")
            st.caption(shown(faithfulness_views.report_caption(report)))
        if warning := explanation_views.nonfinite_warning(explanation):
            st.warning(shown(warning))

table = head_comparison.compare_table(heads, explanations, reports)
figure = None
if layered:
    picked = [explanations[i] for i in layered]
    figure = compare_figure(picked, head_comparison.compare_titles([heads[i] for i in layered], picked))
    st.plotly_chart(shown(figure, "plotly"), key="compare_figure")
if OWN in heads:
    st.caption(shown(OWN_NOTE))
common.table(table.set_index("head").T.reset_index(names="on this input / on the test set"))
checkpoint = loaded.get(selection.path) or next(iter(loaded.values()))

posthoc_sections = []
if any(c.meta.head.name == "lastlayer" for c in loaded.values()):
    st.subheader("The unchanged network explained by its units, beside LAYA's intrinsic α" if OWN in heads
                 else "The unchanged model explained post hoc, beside LAYA's intrinsic α")  # fmt: skip
    intrinsic = [(h, e) for h, e in zip(heads, explanations) if h == "laya"]
    ablation_col, alpha_col = st.columns(2)
    with ablation_col:
        for i, (h, c) in enumerate(zip(heads, loaded.values())):
            if h == OWN:
                posthoc_sections += unit_profile(c, name, data, f"compare_network_{i}", lens=False)
            elif ablation := common.block_ablation_chart(c, name, data, f"compare_block_ablation_{i}"):
                posthoc_sections.append((f"{head_title(h)}: block ablation (post hoc)", ablation))
    with alpha_col:
        for i, (h, c) in enumerate(zip(heads, loaded.values())):
            if h == OWN and (summed := stage_summed(c, name, data, f"compare_network_{i}")) is not None:
                posthoc_sections.append((head_comparison.STAGE_SUM_TITLE, summed))
        if intrinsic:
            alpha = layer_scores_figure(intrinsic[0][1])
            st.plotly_chart(shown(alpha, "plotly"), key="compare_laya_alpha")
            st.caption("LAYA's α on the same input: weights a different head puts on the same frozen layers (intrinsic).")
            posthoc_sections.append(("LAYA's α on this input", alpha))
        else:
            st.info("Add a LAYA checkpoint of this setting to see its intrinsic α beside the post-hoc picture.")

st.subheader("Where each layer looked, per head")
map_sections = []
loaded_layered = {p: c for i, (p, c) in enumerate(loaded.items()) if i in layered}
section, deferred = (common.maps_section([explanations[i] for i in layered], "compare_approximate_maps") if layered
                     else (None, False))  # CLS-token layers: once opened; the own classifier's one layer: never
if section is not None:
    with section:
        mapped = ([common.explain(path, name, data, mode) for path in loaded_layered] if deferred
                  else [explanations[i] for i in layered])  # fmt: skip
        class_col, weight_col = st.columns([2, 1], vertical_alignment="bottom")
        first = map_classes(mapped[0]) or [mapped[0].label]
        map_class = class_col.selectbox(
            f"Class of the maps ({shown(head_title(heads[layered[0]]))}'s ranking)", first, key="compare_map_class"
        )
        weighted = weight_col.checkbox("Weight each map by the layer's share", value=True, key="compare_map_weighted")
        rows = [
            MapRow(head_title(h), e, input_images.model_view(e, c.meta.input, 1))
            for h, e, c in zip([heads[i] for i in layered], mapped, loaded_layered.values())
        ]
        maps = maps_figure(rows, map_class, weighted)
        st.plotly_chart(shown(maps, "plotly"), key="compare_maps")
        st.caption(maps_caption(weighted) + " One colour scale across heads.")
        map_sections = [(f"Where each layer looked: {map_class}", maps)]
source = common.provenance(checkpoint, (name, input_images.model_view(explanations[0], checkpoint.meta.input)))
common.report_button(
    f"Compare heads: {name}", [*([("", figure)] if figure else []), ("Heads on this input", table), *posthoc_sections,
                               *map_sections],
    f"compare-{mode}",
    f"{source.setting} · {mode_label(mode)} ablation", source,
)  # fmt: skip
