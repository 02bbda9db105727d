"""Every other file a setting stores beside a head, for the fuzzer (tests/model/test_fuzz.py): strategies that mutate
one of :data:`FILES` (the sample, the depth report and fit, the evaluation report and its per-input arrays, the lens
and per-seed CSV tables, the measured early-exit runs) at random places of its structure, in its bytes, or whole,
and :func:`attempt_stored`, which reads it as the pages read it and builds every view they build of it.

A JSON document (a sample's metadata too) is mutated by walks (:data:`WALKS`): each goes down the document, at each
level to the child its next number picks, and there sets a value, drops the field or repeats a list's entry, so that
mutations reach the cells deep inside a report as often as its top fields. A safetensors file gets the checkpoint
fuzzer's weight edits (:data:`~tests.model.fuzz_checkpoints.WEIGHT_EDITS`), a CSV table cells set, columns dropped,
rows repeated, bytes overwritten.
"""

from __future__ import annotations

import io
import json
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from hypothesis import strategies as st
from safetensors.torch import save_file

from laya.analysis.depth.detection import SCORE_LABELS
from laya.analysis.depth.exits_record import load_exits
from laya.analysis.depth.fit import DepthFit
from laya.analysis.depth.input_depth import input_depth
from laya.analysis.depth.layer_lens import METRICS, class_view, load_lens, trajectory_figure
from laya.analysis.depth.report import DepthReport
from laya.analysis.head.attribution import REDUCTION_LABELS, ig_description
from laya.analysis.report import Report
from laya.analysis.sample import Sample
from laya.app import browser, classwise_views, depth_plots, depth_views, faithfulness_views, labels, verdicts
from laya.app.catalog import describe
from laya.app.plots import (
    deletion_curves_figure,
    faithfulness_figure,
    heads_overview_figure,
    heatmap_figure,
    profile_bars_figure,
    seed_profiles_figure,
)
from laya.app.seed_views import ALL_CLASSES, read_class_profiles, seed_summary
from laya.model.attached_files import AttachedFileError
from laya.model.checkpoint import Checkpoint
from tests.hostile import BUNDLED_SETTING, stored_setting
from tests.model.fuzz_checkpoints import NUMBERS, TEXTS, VALUES, WEIGHT_EDITS, WHOLE, edit_weights

FILES = ("sample.safetensors", "depth.json", "depth_fit.json", "depth_fit.safetensors", "report.json",
         "per_input.safetensors", "lens.csv", "class_profiles.csv", "exits.json")  # fmt: skip
BUNDLED_REPORT = BUNDLED_SETTING.parent / "fashion-mnist-mlp" / "laya" / "report.json"  # every method measured
SAMPLES = 64  # per-input values of the generated per_input.safetensors


# ---------------------------------------------------------------- mutations

DROP, REPEAT = "<drop>", "<repeat>"  # a walk's end: the field removed, or the list entry doubled
WALKS = st.lists(
    st.tuples(st.lists(st.integers(0, 2**16), min_size=1, max_size=7),
              st.one_of(VALUES, st.sampled_from([DROP, REPEAT, math.nan, math.inf, 2**63, -1]))),
    min_size=1, max_size=3,
)  # fmt: skip
JSON_EDITS = st.one_of(WALKS, WHOLE)
TENSOR_EDITS = st.tuples(WEIGHT_EDITS, st.lists(st.tuples(st.lists(st.integers(0, 2**16), min_size=1, max_size=3),
                                                          VALUES), max_size=2))  # fmt: skip
CSV_EDITS = st.one_of(
    st.lists(st.one_of(
        st.tuples(st.just("cell"), st.integers(0, 2**16), st.integers(0, 99), st.one_of(NUMBERS, TEXTS, st.none())),
        st.tuples(st.just("drop"), st.integers(0, 99), st.none(), st.none()),
        st.tuples(st.just("repeat"), st.integers(0, 2**16), st.none(), st.none()),
        st.tuples(st.just("bytes"), st.integers(0, 99), st.none(), st.binary(min_size=1, max_size=16)),
    ), min_size=1, max_size=3),
    WHOLE,
)  # fmt: skip
EDITS = {name: TENSOR_EDITS if name.endswith(".safetensors") else CSV_EDITS if name.endswith(".csv") else JSON_EDITS
         for name in FILES}  # fmt: skip
MUTATIONS = st.one_of([st.tuples(st.just(name), EDITS[name]) for name in FILES])


def walked(record: Any, walks: list[tuple[list[int], Any]]) -> Any:
    """``record`` with each walk applied: down the children its numbers pick, then the value set there (or the
    field dropped, the list entry repeated)."""
    for steps, value in walks:
        parent, key, node = None, None, record
        for step in steps:
            if not isinstance(node, (dict, list)) or not node:
                break
            parent, key = node, (sorted(node)[step % len(node)] if isinstance(node, dict) else step % len(node))
            node = node[key]
        if parent is None:
            record = value if value not in (DROP, REPEAT) else record
        elif value == DROP:
            del parent[key]
        elif value == REPEAT:
            parent.insert(key, json.loads(json.dumps(node))) if isinstance(parent, list) else None
        else:
            parent[key] = value
    return record


def mutated(name: str, data: bytes, edits: Any) -> bytes:
    """The bytes of the stored file ``name`` (``data``) with ``edits`` of :data:`EDITS` ``[name]`` applied."""
    if isinstance(edits, bytes):
        return edits
    if name.endswith(".safetensors"):
        walks = edits[1]  # a sample's metadata (its ``laya`` JSON) walked too
        return edit_weights(data, edits[0], lambda meta: meta | ({"laya": json.dumps(walked(json.loads(
            meta["laya"]), walks), allow_nan=True)} if walks and "laya" in meta else {}))[0]  # fmt: skip
    if name.endswith(".csv"):
        return _csv(data, edits)
    return json.dumps(walked(json.loads(data), edits), allow_nan=True).encode("utf-8", "surrogatepass")


def _csv(data: bytes, edits: list[tuple[str, int, Any, Any]]) -> bytes:
    table = pd.read_csv(io.BytesIO(data), keep_default_na=False)
    raw = []
    for op, a, b, value in edits:
        if op == "bytes":
            raw.append((a, value))
        elif op == "drop" and len(table.columns):
            table = table.drop(columns=table.columns[a % len(table.columns)])
        elif op == "repeat" and len(table):
            table = pd.concat([table, table.iloc[[a % len(table)]]], ignore_index=True)
        elif op == "cell" and len(table) and len(table.columns):
            table = table.astype(object)
            table.iat[a % len(table), b % len(table.columns)] = value
    out = table.to_csv(index=False).encode("utf-8", "surrogatepass")
    for at, chunk in raw:
        at = len(out) * at // 100
        out = out[:at] + chunk + out[at + len(chunk) :]
    return out


# ---------------------------------------------------------------- the setting

def fuzz_setting(dest: Path) -> Path:
    """The bundled attached network's stored files (:func:`tests.hostile.stored_setting`) with a bundled LAYA head's
    evaluation report (every method measured: the views have cells to read) and per-input arrays made for it, and
    the backbone the own head loads; returns the head's folder."""
    own = stored_setting(dest)
    shutil.copy(BUNDLED_SETTING / "backbone.safetensors", own.parent / "backbone.safetensors")
    shutil.copy(BUNDLED_REPORT, own / "report.json")
    report = json.loads(BUNDLED_REPORT.read_text())
    generator = torch.Generator().manual_seed(0)
    arrays = {f"faithfulness/{mode}/{reduction}/{method}/{metric}": torch.rand(SAMPLES, generator=generator)
              for mode in report["modes"] for reduction in report["reductions"] for method in report["methods"]
              for metric in ("spearman_eps", "top1")}  # fmt: skip
    save_file(arrays | {"correct": torch.ones(SAMPLES)}, own / "per_input.safetensors")
    return own


def folder_of(own: Path, name: str) -> Path:
    """Where ``name`` lies: the setting's folder for its per-seed table, the head's folder for the rest."""
    return own.parent if name == "class_profiles.csv" else own


# ---------------------------------------------------------------- one attempt

@dataclass
class StoredOutcome:
    """One stored file's fate: ``read`` (every view built), ``absent`` (read as none stored) or ``refused`` (the
    AttachedFileError's message, naming the file); the seconds it took."""

    stage: str
    message: str = ""
    seconds: float = 0.0


def attempt_stored(own: Path, name: str, checkpoint: Checkpoint, image: torch.Tensor) -> StoredOutcome:
    """``name`` read beside the own head ``checkpoint`` (in ``own``) as the pages read it, then every view they build
    of it; only an AttachedFileError may refuse it, naming ``name``, and the catalogue still lists the head."""
    start = time.monotonic()
    try:
        stage = "read" if VIEWS[name](own, checkpoint, image) else "absent"
    except AttachedFileError as refusal:
        assert refusal.file == name and name in str(refusal), (name, str(refusal))
        return StoredOutcome("refused", str(refusal), time.monotonic() - start)
    assert describe(own).error is None, describe(own).error  # a stored file never takes the checkpoint down
    return StoredOutcome(stage, "", time.monotonic() - start)


def _sample(own: Path, checkpoint: Checkpoint, image: torch.Tensor) -> bool:
    """Browse: its table under each sort (the outcomes in turn), the summary, the thumbnails Inspect and Patching
    open."""
    sample = Sample.load(own)
    if sample is None:
        return False
    layer, scores = browser.default_layer(sample), browser.detection_scores(sample)
    score = browser.default_score(sample, checkpoint.model.backbone.layer_dims)
    sorts = [k for k, c in browser.SORTS.items() if c != "prediction depth" or "depth" in sample.table]
    for sort, outcome in zip(sorts, browser.OUTCOMES * len(sorts)):
        table = browser.browse_table(sample, browser.Query(layer=layer, score=score, sort=sort, outcome=outcome,
                                                           label=sample.classes[0], top_layer=layer))  # fmt: skip
        browser.summary(table)
    browser.browse_table(sample, browser.Query(score=scores[-1] if scores else None))
    words = [labels.method_label(sample.meta["method"]), labels.mode_label(sample.meta["mode"]),
             f"{sample.meta['n_test']:,} {sample.meta['seed']:d}"]  # the page's caption
    assert all(isinstance(w, str) for w in words)
    if sample.sprite is not None and len(sample.table):
        for row in (0, len(sample.table) - 1):  # what Inspect and Activation patching open
            sample.png(row)
    return True


def _depth(own: Path, checkpoint: Checkpoint, image: torch.Tensor) -> bool:
    """Depth analytics' whole-test-set section, and Inspect's and Depth's words on one input's scores."""
    report = DepthReport.load(own)
    if report is None:
        return False
    data, widths = report.data, checkpoint.model.backbone.layer_dims
    depth_plots.whole_test_set_figures(report, None)
    depth_views.exit_estimate_caption(data["early_exit"]["at_1pt"])
    caption = f"{data['command']} · {data['n_test']:,} test inputs · readouts: {data['readout_source']}"
    threshold = report.exit_threshold  # the slider's default
    assert isinstance(caption, str) and (threshold is None or isinstance(threshold, float))
    for key in ("prediction_depth", "prediction_depth_probes"):
        if key in data:
            depth_views.prediction_depth_view(report.table(key))
    report.auroc_table()
    roc = report.table("roc")
    for task in dict.fromkeys(roc["task"]):
        depth_plots.roc_figure(roc, task)
    scores = {key: 0.5 for key in SCORE_LABELS}
    depth_views.detection_view(scores, data)
    depth_views.ood_status(scores, data, widths)
    depth_views.shown_ood_scores(data, widths)
    depth_views.mahalanobis_warning(2e3, data["n_train"], widths, data.get("covariance"))
    return True


def _depth_fit(own: Path, checkpoint: Checkpoint, image: torch.Tensor) -> bool:
    """One input's depth analytics under the stored fit, or without it and saying why (what a worker answers)."""
    fit, note = DepthFit.usable(checkpoint)
    result = input_depth(checkpoint, image, fit, note)
    depth_views.detection_view(result.scores, None)
    if result.readouts is not None:
        result.exit_layer(0.9)
        result.lens()
    assert result.fit_note == note
    if note is not None:
        DepthFit.load(own, checkpoint)  # the refusal the note quotes
        raise AssertionError(f"a note without a refusal: {note}")
    return fit is not None


def _report(own: Path, checkpoint: Checkpoint, image: torch.Tensor) -> bool:
    """Faithfulness (every intervention and reduction), Class-wise and the catalogue's numbers."""
    report = Report.load(own)
    for mode in report.modes:
        for reduction in report.data["reductions"]:
            faithfulness_views.faithfulness_matrix(report, mode, reduction)
            faithfulness_views.comparisons_view(report, mode, reduction)
            verdicts.faithfulness_verdict(report, mode, reduction, resamples=50)
            assert labels.MODE_HELP[mode] and labels.REDUCTION_HELP[reduction] and REDUCTION_LABELS[reduction]
    mode, reduction = report.default_mode, report.data["reductions"][0]
    faithfulness_figure(report.faithfulness_table(), mode, reduction)
    curves = report.deletion_curves()
    deletion_curves_figure(curves, mode, faithfulness_views.curves_reduction(curves, mode, reduction)[0])
    heads = faithfulness_views.heads_table(["laya"], [report], mode, reduction)
    faithfulness_views.heads_display(heads)
    heads_overview_figure(heads, mode)
    faithfulness_views.report_caption(report)
    options = report.data["options"]
    assert isinstance(options.get("ig") or ig_description(options["ig_steps"]), str)
    caption = f"One trained seed ({report.data['checkpoint']['seed']:d}) · {report.accuracy} {report.faithfulness()}"
    assert isinstance(caption + str(report.status()), str)
    for kind in ("scores", "loo"):
        profile = report.class_layer_profile(kind)
        if profile.empty:
            continue
        title = classwise_views.profile_title(report, kind)
        for subset in dict.fromkeys(profile["subset"]):
            classwise_views.clickable_heatmap(heatmap_figure(profile, subset, title, kind))
            counts = classwise_views.class_counts(profile, subset)
            for name in list(counts)[:2]:
                profile_bars_figure(classwise_views.class_profile(profile, name, subset), name, kind)
    for method in classwise_views.profile_methods(report):
        profile_bars_figure(classwise_views.global_profile(report, method), method)
    classwise_views.global_loo(report)
    report.per_class()
    classwise_views.clickable_heatmap(browser.confusion_figure(report.confusion()))
    return True


def _per_input(own: Path, checkpoint: Checkpoint, image: torch.Tensor) -> bool:
    """Faithfulness's paired tests between neighbouring methods, from the per-input arrays."""
    per_input = verdicts.load_per_input(own)
    report = Report.load(own)
    verdicts.faithfulness_verdict(report, report.default_mode, report.data["reductions"][0], per_input=per_input,
                                  resamples=50)  # fmt: skip
    return per_input is not None


def _lens_csv(own: Path, checkpoint: Checkpoint, image: torch.Tensor) -> bool:
    """Depth analytics' lens: the class means (the predicted class's and all, each metric) and their caption."""
    summary = load_lens(own)
    if summary is None:
        return False
    predicted = checkpoint.meta.classes[0]
    for metric in METRICS:
        trajectory_figure(class_view(summary, metric, ["all", predicted]), metric, "linear probes")
        trajectory_figure(class_view(summary, metric), metric, str(summary["readout"].iloc[0]))
    depth_plots.lens_caption("linear probes", summary, predicted)
    return True


def _class_profiles(own: Path, checkpoint: Checkpoint, image: torch.Tensor) -> bool:
    """Class-wise's "Across seeds": each kind of value of the own head and of the first other head in the table."""
    table = read_class_profiles(own.parent)
    if table is None:
        return False
    for head in list(dict.fromkeys(["own", *table["head"].astype(str)]))[:2]:
        for kind in ("scores", "loo"):
            seeds = seed_summary(table, head, kind)
            if seeds.per_seed.empty:
                continue
            seed_profiles_figure(seeds.per_seed, str(seeds.per_seed["class"].iloc[0]), "", kind)
            seed_profiles_figure(seeds.whole, ALL_CLASSES, "", kind)
    return True


def _exits(own: Path, checkpoint: Checkpoint, image: torch.Tensor) -> bool:
    """Depth analytics' measured early-exit runs: the verdict per exit kind, the chart and its caption."""
    measured = load_exits(own)
    if measured is None:
        return False
    verdicts.measured_exit_verdict(measured)
    depth_plots.measured_exit_figure(pd.DataFrame(measured["runs"]))
    caption = f"Measured runs (`{measured['command']}`), {measured['n_test']:,} test inputs"
    assert isinstance(caption, str)
    return True


VIEWS = {"sample.safetensors": _sample, "depth.json": _depth, "depth_fit.json": _depth_fit,
         "depth_fit.safetensors": _depth_fit, "report.json": _report, "per_input.safetensors": _per_input,
         "lens.csv": _lens_csv, "class_profiles.csv": _class_profiles, "exits.json": _exits}  # fmt: skip

__all__ = ["FILES", "MUTATIONS", "StoredOutcome", "attempt_stored", "folder_of", "fuzz_setting", "mutated", "walked"]
