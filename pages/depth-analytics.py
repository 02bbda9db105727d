"""Depth analytics: what each layer votes for, where the model could stop, which layers it can lose,
and whether depth signals flag errors and out-of-distribution inputs."""

import streamlit as st

from laya.analysis.depth.detection import SCORE_LABELS
from laya.analysis.depth.layer_lens import METRICS, class_view, trajectory_figure
from laya.analysis.head.logit_attribution import top_class_table
from laya.app import browser, depth_plots, depth_views, explanation_views, input_images, lesion_views, verdicts
from laya.app import network_views as nv
from laya.app.catalog import example_images
from laya.app.text import shown
from laya.model.own_head import is_own_head
from pages import common
from pages.common.network import load_network_report
from pages.common import switches
from pages.common.own_route import own_route

own_route()

checkpoint, selection = common.current()
classes, layers = checkpoint.meta.classes, list(checkpoint.layer_names)
own = is_own_head(checkpoint.meta.train)  # reads one layer: no per-layer logit terms, no pruning; the lens's depth
st.title("Depth analytics")
report = common.load_depth(selection.path)
if report is None:
    st.info(f"No depth report yet: run `python -m laya depth --checkpoint {shown(selection.path, 'code')}` for readout probes, "
            "the early-exit, pruning and detection results. Shown below: what the head alone gives.")  # fmt: skip

carried = st.session_state.get(common.CURRENT_INPUT)
if carried and st.toggle(f"Use the input from Inspect ({shown(carried[0])})", value=True, key="depth_use_inspect"):
    image = carried
else:
    image = common.image_input("depth", example_images(checkpoint.path))
if image is None:
    st.info("Upload an image to analyse (this checkpoint has no bundled examples).")
    st.stop()
name, data = image
result = common.depth_of_input(selection.path, name, data)
if warning := explanation_views.nonfinite_warning(result):
    st.warning(shown(warning))
default = report.exit_threshold if report and report.exit_threshold and report.exit_threshold <= 1 else 0.9
threshold = switches.number(st.slider, "Early-exit confidence threshold t", "threshold", "depth_threshold", float(default),
                           min_value=0.5, max_value=1.0, step=0.005)  # fmt: skip

label_col, depth_col, exit_col = st.columns(3)
label_col.metric("Prediction", shown(classes[result.prediction]))
if own:  # the one prediction depth of every own-classifier page: its tuned lens's, over the network's units
    units = common.network(str(selection.path), name, data)
    lensed = None if isinstance(units, str) else nv.network_depth(units)
    depth_label, depth_value = depth_views.depth_metric(lensed, 0 if isinstance(units, str) else len(units.units),
                                                        "tuned lens")  # fmt: skip
    depth_col.metric(shown(depth_label), shown(depth_value))
if result.readouts is not None:
    depth, stop = int(result.readouts.depth[0]), result.exit_layer(threshold)
    if not own:
        depth_col.metric("Prediction depth", f"{depth:d} of {len(layers)}" if depth <= len(layers) else "only the full head")
    exit_col.metric(f"Exit at t = {threshold:g}", shown(layers[stop]) if stop < len(layers) else "full model")
    st.markdown(verdicts.exit_verdict(result, threshold, classes, layers, verdicts.example_label(name, classes)))
sections = []
if own:
    st.caption(depth_views.ONE_LAYER_NOTE)
else:
    attribution = depth_plots.attribution_figure(top_class_table(result.attribution, 0, classes, layers))
    st.plotly_chart(shown(attribution, "plotly"), key="depth_attr")
    sections.append((f"{name}: per-layer logit attribution", attribution))
if result.readouts is not None:
    path = depth_plots.readout_path_figure(result.readouts.path(0, classes, layers), depth, stop,
                                           "probes' prediction depth" if own else "prediction depth")  # fmt: skip
    st.plotly_chart(shown(path, "plotly"), key="depth_path")
    sections.append(("Readout path", path))
if ablation := common.block_ablation_chart(checkpoint, name, data, "depth_block_ablation"):
    sections.append(("Block ablation (post hoc)", ablation))
st.subheader("Error and OOD scores of this input")
scores = depth_views.detection_view(result.scores, report.data if report else None)
if report is not None:
    st.caption("Max softmax is flagged when it falls *below* its threshold; every other score when it rises above.")
    widths = checkpoint.layer_dims
    st.markdown("\n".join(f"- {line}" for line in depth_views.ood_status(result.scores, report.data, widths)))
    if warning := depth_views.mahalanobis_warning(result.scores.get("mahalanobis"), report.data["n_train"], widths,
                                                  report.data.get("covariance")):  # fmt: skip
        st.warning(shown(warning))
st.dataframe(scores, hide_index=True)
sections.append(("Error and OOD scores of this input", scores))

st.subheader("Per-layer lens: each layer's own prediction against the final one")
lens_ = result.lens()
lens_summary = common.load_lens(selection.path)
if lens_ is None:
    st.info("No per-layer readouts for this head yet: `python -m laya depth` fits the linear probes the lens reads.")
else:
    metric = st.selectbox("Lens metric", list(METRICS), format_func=METRICS.__getitem__, key="depth_lens_metric")
    trajectory = depth_views.lens_rows(lens_.table(0, classes, layers), lens_.source, layers[-1])
    if lens_summary is not None:  # the row fixed by construction left out (an attached network's pre-logits)
        lens_summary = depth_views.lens_rows(lens_summary, str(lens_summary["readout"].iloc[0]), layers[-1])
    predicted = classes[result.prediction]
    means = None if lens_summary is None else class_view(lens_summary, metric, ["all", predicted])
    lens_figure = trajectory_figure(trajectory if means is None else means, metric, lens_.source,
                                    None if means is None else trajectory)  # fmt: skip
    st.plotly_chart(shown(lens_figure, "plotly"), key="depth_lens")
    st.caption(depth_plots.lens_caption(lens_.source, lens_summary, predicted))
    if len(trajectory) < len(layers):
        st.caption(depth_views.FIXED_LENS_NOTE)
    st.dataframe(trajectory, hide_index=True, column_config={m: st.column_config.NumberColumn(METRICS[m], format="%.3f")
                                                              for m in METRICS})  # fmt: skip
    sections += [(f"Per-layer lens ({lens_.source}): {METRICS[metric]}", lens_figure),
                 (f"Per-layer lens of {name} ({lens_.source})", trajectory)]  # fmt: skip
    if lens_summary is not None and st.toggle("Every true class (test set, 95 % bootstrap CIs)", key="depth_lens_all"):
        by_class = trajectory_figure(class_view(lens_summary, metric), metric, str(lens_summary["readout"].iloc[0]))
        st.plotly_chart(shown(by_class, "plotly"), key="depth_lens_classes")
        sections.append((f"Per-layer lens by true class: {METRICS[metric]}", by_class))

if is_own_head(checkpoint.meta.train) and (network := load_network_report(selection.path)) is not None:
    st.subheader("Which units can the network do without? The lesion study over the report's test inputs")
    if network.lesion is None:
        st.info("This network report predates the lesion study: `python -m laya network --checkpoint "
                f"{shown(selection.path, 'code')}` computes it again.")
    else:
        done = [k for k in nv.LESIONED if k in set(network.lesion.single["intervention"])]
        lesion_by = st.radio("Units removed by", done, format_func=lambda k: nv.LESIONED[k],
                             horizontal=True, key="depth_lesion_by")  # fmt: skip
        lesion = nv.lesion_figure(network.lesion, lesion_by, network.residual)
        st.plotly_chart(shown(lesion, "plotly"), key="depth_lesion")
        st.caption("Left: test accuracy with one unit removed, the rest of the network unchanged (skip keeps its "
                   "stream; a hatched bar could not be skipped and got resample, as its hover says), 95 % bootstrap "
                   "CIs over inputs; the hover gives the drop from intact with its paired CI. A unit without a "
                   "shortcut has its own panel: its whole output is replaced. Right: units that keep the input "
                   "skipped k at a time, seeded random sets (`laya network --lesion-draws`).")
        sections.append((f"Lesion study ({nv.LESIONED[lesion_by]})", lesion))
        lesioned_units = lesion_views.lesion_class_units(network.lesion, lesion_by)
        if not lesioned_units:
            st.caption("This network report predates the per-class lesion rows: `laya network` computes them again.")
        else:
            with st.expander("Per true class: the drop with one unit removed [95 % CIs]"):
                lesion_unit = st.selectbox("Unit removed", lesioned_units, format_func=lambda u: shown(u, "text"),
                                           key="depth_lesion_unit")  # fmt: skip
                by_class = lesion_views.lesion_class_figure(network.lesion, lesion_by, lesion_unit,
                                                            nv.LESIONED[lesion_by])  # fmt: skip
                st.plotly_chart(shown(by_class, "plotly"), key="depth_lesion_classes")
                st.dataframe(lesion_views.lesion_class_table(network.lesion, lesion_by, lesion_unit), hide_index=True)
                st.caption("Per true class, over that class's test inputs alone: accuracy intact and with the unit "
                           "removed (95 % bootstrap CIs), the drop with a paired bootstrap over the same inputs. A "
                           "class's few inputs give wide intervals; each row is its own test, not corrected for the "
                           "number of classes.")  # fmt: skip
            sections.append((f"Lesion study per class: {lesion_unit} ({nv.LESIONED[lesion_by]})", by_class))

if report is None:
    common.report_button("Depth analytics", sections, f"{checkpoint.meta.head.name}-depth", checkpoint.name,
                         common.provenance(checkpoint, (name, input_images.input_pixels(data, checkpoint.meta.input))))  # fmt: skip
    st.stop()
st.header("Whole test set")
st.caption(
    f"`{shown(report.data['command'], 'code')}` · {report.data['n_test']:,} test inputs · readouts: "
    f"{shown(report.data['readout_source'])}"
)
figures = common.depth_figures(selection.path)  # the same for every input: built once per checkpoint
exit_col, prune_col = st.columns(2) if not own else (st.container(), None)
exit_curve = figures.exit_curve
exit_col.plotly_chart(shown(exit_curve, "plotly"), key="depth_exit")
exit_col.caption(depth_views.exit_estimate_caption(report.data["early_exit"]["at_1pt"]))
measured = common.load_exits(selection.path)
if measured is not None and (measured_fig := figures.measured) is not None:
    st.markdown(verdicts.measured_exit_verdict(measured))
    st.plotly_chart(shown(measured_fig, "plotly"), key="depth_measured_exit")
    st.caption(f"Measured runs (`{shown(measured['command'], 'code')}`), {measured['n_test']:,} test inputs; readouts and trained exits. "
               "Hover for wall-clock savings (negative: slower than plain inference).")  # fmt: skip
    sections.append(("Early exit, measured runs", measured_fig))
if prune_col is not None:
    prune_col.plotly_chart(shown(figures.pruning, "plotly"), key="depth_pruning")
    st.plotly_chart(shown(figures.class_terms, "plotly"), key="depth_class_terms")
    per_layer = [("Pruning", figures.pruning), ("Logit attribution by class", figures.class_terms)]
else:  # the note above says why
    per_layer = []
kind = report.data.get("readout_kind", report.data["readout_source"])
depth_title = (f"{'The probes’ prediction' if own else 'Prediction'} depth and overthinking by class "
               f"(readouts: {kind})")  # an attached network's: probes, its own classifier at pre-logits
st.subheader(shown(depth_title))
depth_table = depth_views.prediction_depth_view(report.table("prediction_depth"))
st.dataframe(depth_table, hide_index=True)
if kind != "fitted probe" and "prediction_depth_probes" in report.data:  # a classifier of its own in the readouts
    st.caption("The same through linear probes fitted on the training split, the readout every head gets: compare "
               "heads on these (the Depth analytics docs explain why).")  # fmt: skip
    st.dataframe(depth_views.prediction_depth_view(report.table("prediction_depth_probes")), hide_index=True)
detections = report.data["detection"].get("ood_descriptions") or {}
st.subheader("Detection: AUROC [95 % CI]; (+)/(−): better/worse than max softmax (paired bootstrap)")
auroc = report.auroc_table()
picked = st.dataframe(auroc, hide_index=True, on_select="rerun", selection_mode="single-row", key="depth_auroc")
st.caption("Select a row to browse the test inputs that score flags most.")
rows = picked.selection.rows if picked else []
if rows:
    score = {v: k for k, v in SCORE_LABELS.items()}.get(auroc.iloc[rows[0]]["score"])
    if score is not None:
        switches.browse_button(f"Browse the most suspicious test inputs by {SCORE_LABELS[score]}",
                              browser.detection_query(score), "depth_browse")  # fmt: skip
if detections:
    st.caption(" · ".join(f"{shown(task)}: {shown(text)}" for task, text in detections.items()))
roc = report.table("roc")
task = switches.pick(st.selectbox, "ROC curves for", list(dict.fromkeys(roc["task"])), "task", "depth_task")
roc_figure = depth_plots.roc_figure(roc, task)
st.plotly_chart(shown(roc_figure, "plotly"), key="depth_roc")
sections += [("Whole test set: early exit", exit_curve), *per_layer, (depth_title, depth_table),
             ("Detection AUROC [95 % CI]", report.auroc_table()), (f"ROC: {task}", roc_figure)]  # fmt: skip
common.report_button("Depth analytics", sections, f"{checkpoint.meta.head.name}-depth", checkpoint.name,
                     common.provenance(checkpoint, (name, input_images.input_pixels(data, checkpoint.meta.input)),
                                       f"{common.view_link()} · {report.data['command']}"))  # fmt: skip
