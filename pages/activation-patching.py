"""Activation patching: the current input (target) with one layer at a time taken from another input (source),
at the head (direct effect) or inside the backbone (total effect); per layer, the change in the predicted class's
probability, in the logit difference of two chosen classes, and in α. For an attached network's own classifier, one
unit's branch at a time inside the network, rows fixed by construction left out."""

import streamlit as st

from laya.analysis.network.unit_patching import unit_patch_table
from laya.analysis.patching import WHERE, pair_table
from laya.app import input_images, patching_plots
from laya.app import network_views as nv
from laya.app.catalog import example_images
from laya.app.text import shown
from laya.model.own_head import is_own_head
from pages import common
from pages.common.own_route import own_route

own_route()

checkpoint, selection = common.current()
own = is_own_head(checkpoint.meta.train)
classes, layers = list(checkpoint.meta.classes), list(checkpoint.layer_names)
head = "own classifier" if own else checkpoint.meta.head.name
st.title("Activation patching")
if own:
    st.caption("Patch one unit of the target with the source's (its branch; the stream stays the target's) and see "
               "what changes, each unit of the network in turn (TransformerLens-style patching, by the network's "
               "own units).")  # fmt: skip
else:
    st.caption("Patch layer i of the target with the source's layer i and see what changes (TransformerLens-style "
               "patching, for the layers of an image classifier). The library and `python -m laya patch` do the "
               "same over pairs of test inputs, with CIs.")  # fmt: skip
examples = example_images(checkpoint.path)
target_col, source_col = st.columns(2)
with target_col:
    st.subheader("Target (the current input)")
    carried = st.session_state.get(common.CURRENT_INPUT)
    if carried and st.toggle(f"Use the input from Inspect ({shown(carried[0])})", value=True, key="patch_use_inspect"):
        target = carried
    else:
        target = common.image_input("patch", examples)
with source_col:
    st.subheader("Source (its units' branches patched in)" if own else "Source (the layers patched in)")
    source = common.source_input("patch_source", examples)
if target is None or source is None:
    st.info("Pick or upload both a target and a source image.")
    st.stop()
if own:  # whole layers of a network read at its last layer: every row but one fixed; its units instead
    units = common.patch_units(selection.path, target, source, st.session_state.get("patch_branch", "block"))
    if isinstance(units, str):
        st.info(shown(units))
        st.stop()
    if units.branched:
        st.radio("Branch", nv.BRANCHES, format_func=lambda b: nv.BRANCHES[b], horizontal=True, key="patch_branch")
    effects = units.effects
else:
    where = st.radio("Patch", list(WHERE), format_func=lambda w: WHERE[w], horizontal=True, key="patch_where")
    effects = common.patch(selection.path, target, source, where)  # a bad image stops the page here, with its error
target_pixels, source_pixels = (input_images.input_pixels(data, checkpoint.meta.input) for _, data in (target, source))
target_col.image(target_pixels, caption=shown(target[0]), width=160)
source_col.image(source_pixels, caption=shown(source[0]), width=160)
predicted = int(effects.prediction[0])
source_pred = int(effects.source_logits[0].argmax())
runner_up = int(effects.base_logits[0].topk(2).indices[1])
pick_a, pick_b = st.columns(2)
a = pick_a.selectbox("Logit difference: class a", range(len(classes)), index=predicted,
                     format_func=classes.__getitem__, key="patch_class_a")  # fmt: skip
b = pick_b.selectbox("… minus class b", range(len(classes)), index=source_pred if source_pred != a else runner_up,
                     format_func=classes.__getitem__, key="patch_class_b")  # fmt: skip
probs = effects.base_logits[0].softmax(-1)
target_metric, source_metric = st.columns(2)
target_metric.metric(f"Target's prediction (p = {float(probs[predicted]):.3f})", shown(classes[predicted]))
source_probs = effects.source_logits[0].softmax(-1)
source_metric.metric(f"Source's prediction (p = {float(source_probs[source_pred]):.3f})", shown(classes[source_pred]))

titles = patching_plots.axis_titles(classes[predicted], classes[a], classes[b])
if own:
    table = unit_patch_table(units, classes, a, b)
    figure = patching_plots.unit_effects_figure(table, classes[predicted], classes[a], classes[b])
    st.plotly_chart(shown(figure, "plotly"), key="patch_effects")
    st.caption(patching_plots.unit_patching_caption(table, head))
    shown_table = patching_plots.unit_display_table(table, titles)
else:
    table = pair_table(effects, layers, classes, a, b)
    note = patching_plots.alpha_note(head, effects.alpha is not None)
    figure = patching_plots.effects_figure(table, where, classes[predicted], classes[a], classes[b], note)
    st.plotly_chart(shown(figure, "plotly"), key="patch_effects")
    patched = int(table["patched"].sum()) - (where == "head")  # the head sweep's "all layers" row is not a layer
    st.caption(shown(patching_plots.patching_caption(where, head, len(layers), patched)
                     + (f" α: {note}." if note else "")))  # fmt: skip
    shown_table = patching_plots.display_table(table, titles)
st.dataframe(shown_table, hide_index=True)
common.report_button(
    "Activation patching",
    [(f"Target: {target[0]} → {classes[predicted]}; source: {source[0]} → {classes[source_pred]}", figure),
     ("Per unit" if own else "Per layer", shown_table),
     ("Source image", patching_plots.image_figure(source_pixels, source[0]))],
    f"{head.replace(' ', '-')}-patching", checkpoint.name, common.provenance(checkpoint, (target[0], target_pixels)),
)  # fmt: skip
