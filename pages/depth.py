"""Depth analytics: what each layer votes for, where the model could stop, which layers it can lose,
and whether depth signals flag errors and out-of-distribution inputs."""

import streamlit as st

from laya.analysis.logit_attribution import top_class_table
from laya.app import depth_plots, views
from laya.app.catalog import example_images
from laya.app.text import public
from pages import common

checkpoint, selection = common.current()
classes, layers = checkpoint.meta.classes, list(checkpoint.layer_names)
st.title("Depth analytics")
report = common.load_depth(selection.path)
if report is None:
    st.info(f"No depth report yet: run `python -m laya depth --checkpoint {public(selection.path)}` for readout probes, "
            "the early-exit, pruning and detection results. Shown below: what the head alone gives.")  # fmt: skip

carried = st.session_state.get(common.CURRENT_INPUT)
if carried and st.toggle(f"Use the input from Inspect ({carried[0]})", value=True, key="depth_use_inspect"):
    image = carried
else:
    image = common.image_input("depth", example_images(checkpoint.path))
if image is None:
    st.info("Upload an image to analyse (this checkpoint has no bundled examples).")
    st.stop()
name, data = image
result = common.depth_of_input(selection.path, name, data)
if warning := views.nonfinite_warning(result):
    st.warning(warning)
default = report.exit_threshold if report and report.exit_threshold and report.exit_threshold <= 1 else 0.9
threshold = st.slider("Early-exit confidence threshold t", 0.5, 1.0, float(default), 0.005, key="depth_threshold")

label_col, depth_col, exit_col = st.columns(3)
label_col.metric("Prediction", classes[result.prediction])
if result.readouts is not None:
    depth, stop = int(result.readouts.depth[0]), result.exit_layer(threshold)
    depth_col.metric("Prediction depth", f"{depth} of {len(layers)}" if depth <= len(layers) else "only the full head")
    exit_col.metric(f"Exit at t = {threshold:g}", layers[stop] if stop < len(layers) else "full model")
attribution = depth_plots.attribution_figure(top_class_table(result.attribution, 0, classes, layers))
st.plotly_chart(attribution, key="depth_attr")
sections = [(f"{name}: per-layer logit attribution", attribution)]
if result.readouts is not None:
    path = depth_plots.readout_path_figure(result.readouts.path(0, classes, layers), depth, stop)
    st.plotly_chart(path, key="depth_path")
    sections.append(("Readout path", path))
st.subheader("Error and OOD scores of this input")
st.caption("Higher = more suspicious; flagged above the 95th percentile of the in-distribution test inputs.")
scores = result.score_table(report.data["detection"]["flag_thresholds"] if report else None)
st.dataframe(scores, hide_index=True)
sections.append(("Error and OOD scores of this input", scores))

if report is None:
    common.report_button("Depth analytics", sections, f"{checkpoint.meta.head.name}-depth", checkpoint.name)
    st.stop()
st.header("Whole test set")
st.caption(
    f"`{report.data['command']}` · {report.data['n_test']} test inputs · readouts: {report.data['readout_source']}"
)
saved = report.data["early_exit"]["at_1pt"]
exit_col, prune_col = st.columns(2)
exit_curve = depth_plots.exit_curve_figure(report.table("exit_curve"), report.data["accuracy"])
exit_col.plotly_chart(exit_curve, key="depth_exit")
exit_col.caption(f"Compute saved at ≤ 1 point accuracy loss: **{saved['saved']:.1%}** (t = {saved['threshold']}).")
pruning = depth_plots.pruning_figure(report.table("pruning"))
prune_col.plotly_chart(pruning, key="depth_pruning")
class_terms = depth_plots.class_terms_figure(report.table("logit_attribution"))
st.plotly_chart(class_terms, key="depth_class_terms")
st.subheader("Prediction depth and overthinking by class")
st.dataframe(report.table("prediction_depth"), hide_index=True)
st.subheader("Detection: AUROC [95 % CI]; (+)/(−): better/worse than max softmax (paired bootstrap)")
st.dataframe(report.auroc_table(), hide_index=True)
roc = report.table("roc")
task = st.selectbox("ROC curves for", list(dict.fromkeys(roc["task"])), key="depth_task")
roc_figure = depth_plots.roc_figure(roc, task)
st.plotly_chart(roc_figure, key="depth_roc")
sections += [("Whole test set: early exit", exit_curve), ("Pruning", pruning), ("Logit attribution by class", class_terms),
             ("Prediction depth and overthinking by class", report.table("prediction_depth")),
             ("Detection AUROC [95 % CI]", report.auroc_table()), (f"ROC: {task}", roc_figure)]  # fmt: skip
common.report_button("Depth analytics", sections, f"{checkpoint.meta.head.name}-depth", checkpoint.name)
