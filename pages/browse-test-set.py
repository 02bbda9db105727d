"""Test-set browser: the sample's test inputs with label, prediction, confidence, top layer, a layer's score and
LOO drop, prediction depth and an error/OOD score; filter, sort, and open any of them on Inspect or use it as the
source of Activation patching."""

import math

import streamlit as st

from laya.analysis.depth.detection import SCORE_LABELS
from laya.app import browser, labels
from laya.app.text import shown
from pages import common
from pages.common import switches
from pages.common.own_route import own_route

own_route()

PER_PAGE = 40
COLUMNS = 8
ALL = "(all)"
ORDERS = {"asc": "ascending", "desc": "descending"}

checkpoint, selection = common.current()
st.title("Browse the test set")
sample = common.load_sample(selection.path)
if sample is None:
    st.info(
        "This checkpoint has no test-set sample yet. `python -m laya evaluate --checkpoint DIR` writes one "
        "(`sample.safetensors`, 1,000 class-balanced test inputs with thumbnails); for a checkpoint already "
        "evaluated, `python -m laya sample DIR` writes it alone."
    )
    st.stop()
method = labels.method_label(sample.meta["method"])
mode = labels.mode_label(sample.meta["mode"])
st.caption(
    f"{len(sample.table)} of {sample.meta['n_test']:,} test inputs (class-balanced, seed {sample.meta['seed']:d}). "
    f"Score: {shown(method)} of the chosen layer; LOO drop: p(ŷ) lost when that layer is removed ({shown(mode)}); "
    f"{shown(browser.depth_words(checkpoint.meta.train))}: the first layer from which every readout agrees with the "
    "prediction (L + 1: never); "
    "suspicion: the chosen error/OOD score (higher = more suspicious)."
    + ("" if sample.meta.get("depth_fit") else " Run `python -m laya depth` for the depth-based columns.")
)
if sample.sprite is None:
    st.info("The sample's thumbnails (sample_images.png) are missing, unreadable or not the ones it recorded: the "
            "inputs are listed without them.")  # fmt: skip

only = browser.one_layer(checkpoint.meta.train, sample)  # the own classifier: every other layer 0 by construction
filters = st.columns(3 if only else 4)
label = switches.pick(filters[0].selectbox, "Class", [ALL, *sample.classes], "bclass", "browse_class")
predicted = switches.pick(filters[1].selectbox, "Predicted", [ALL, *sample.classes], "bpred", "browse_pred")
outcome = switches.pick(filters[2].radio, "Outcome", browser.OUTCOMES, "outcome", "browse_outcome", horizontal=True)
top = ALL if only else switches.pick(filters[3].selectbox, "Top layer", [ALL, *sample.layer_names], "top",
                                     "browse_top")  # fmt: skip
pickers = st.columns(4)
layer = only or switches.pick(pickers[0].selectbox, "Layer of the score and LOO drop", sample.layer_names, "layer",
                              "browse_layer", index=sample.layer_names.index(browser.default_layer(sample)))  # fmt: skip
if only:
    pickers[0].caption(browser.ONE_LAYER_NOTE)
scores = browser.detection_scores(sample)
default = browser.default_score(sample, checkpoint.layer_dims)  # Mahalanobis only where its fit is trusted
score = switches.pick(pickers[1].selectbox, "Suspicion score", scores, "score", "browse_score",
                      format_func=SCORE_LABELS.__getitem__, index=scores.index(default) if scores else 0)  # fmt: skip
sorts = [k for k, c in browser.SORTS.items() if (c != "prediction depth" or "depth" in sample.table)
         and (c != "top layer" or not only)]  # fmt: skip
sort = switches.pick(pickers[2].selectbox, "Sort by", sorts, "sort", "browse_sort", format_func=browser.SORTS.__getitem__)
order = switches.pick(pickers[3].radio, "Order", ["asc", "desc"], "order", "browse_order", horizontal=True,
                     format_func=lambda o: ORDERS[o])  # fmt: skip
query = browser.Query(
    label=None if label == ALL else label,
    prediction=None if predicted == ALL else predicted,
    outcome=outcome,
    top_layer=None if top == ALL else top,
    layer=layer,
    score=score,
    sort=sort,
    descending=order == "desc",
)
table = browser.browse_table(sample, query)
stats = browser.summary(table)
common.copy_link()
if not len(table):
    st.info("No input of the sample matches these filters.")
    st.stop()
st.markdown(f"**{stats['n']:,} inputs** · accuracy {stats['accuracy']:.1%} · mean confidence {stats['confidence']:.1%}")

pages = math.ceil(len(table) / PER_PAGE)
page = st.number_input(f"Page (of {pages:d})", 1, pages, 1, key="browse_page") if pages > 1 else 1
chunk = table.iloc[(page - 1) * PER_PAGE : page * PER_PAGE]
for start in range(0, len(chunk), COLUMNS):
    for column, item in zip(st.columns(COLUMNS), chunk.iloc[start : start + COLUMNS].to_dict("records")):
        index = int(item["test index"])
        with column:
            if sample.sprite is not None:
                st.image(sample.thumbnail(item["row"]), width=64)
            st.caption(f"#{index:d} {shown(item['label'])} → {shown(item['prediction'])} {'✓' if item['correct'] else '✗'} {item['confidence']:.0%}")
            if st.button("Inspect", key=f"browse_open_{index}", icon=":material/search:"):
                st.session_state[common.BROWSED] = (selection.path, index)
                st.session_state.pop(f"{common.BROWSED}_dropped", None)
                st.switch_page("pages/inspect-input.py", query_params={"input": str(index)})
            if st.button("Patch source", key=f"browse_source_{index}", icon=":material/swap_horiz:",
                         help="Open Activation patching with this test input as the source"):  # fmt: skip
                st.session_state[common.PATCH_SOURCE] = (selection.path, index)
                st.switch_page("pages/activation-patching.py")

st.dataframe(
    table.drop(columns=["row", "top layer"] if only else "row"),
    hide_index=True,
    column_config={
        "score": st.column_config.NumberColumn(f"{method}: {layer}", format="%.3f"),
        "LOO drop": st.column_config.NumberColumn(f"LOO drop: {layer}", format="%.3f"),
        "confidence": st.column_config.NumberColumn(format="percent"),
        "suspicion": st.column_config.NumberColumn(SCORE_LABELS[score], format="%.3f"),
    },
)
st.download_button("Download CSV", table.to_csv(index=False), f"{checkpoint.meta.head.name}-test-inputs.csv", "text/csv")
