"""Cached loading: checkpoints, reports, explanations and depth analytics, in the server or in a sandboxed worker.

Bundled checkpoints (under ``LAYA_MODELS``) are loaded once per process (``st.cache_resource``,
keyed by path and file time) and shared by every session. Uploaded and typed checkpoints are
loaded and run only in sandboxed workers (:mod:`laya.sandbox`, :func:`laya.app.deploy.sandboxed`):
the server keeps their :class:`ModelInfo` and results, never the model. Either way a page gets a
:class:`ModelInfo` from :func:`load_model` and the same result types from :func:`explain`,
:func:`depth_of_input`, :func:`class_maps` and :func:`evaluate_locally`. A checkpoint that fails to load is remembered
as failed (not rebuilt on every rerun) and its memory handed back to the OS. Reports and
explanations are cached per argument (``st.cache_data``).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import streamlit as st
import torch

from laya import settings
from laya.analysis.block_ablation import BlockAblation, ablate_bytes
from laya.analysis.depth.exits_record import EXITS_FILE
from laya.analysis.depth.exits_record import load_exits as read_exits
from laya.analysis.depth.fit import FIT_FILE, DepthFit
from laya.analysis.depth.input_depth import InputDepth, input_depth
from laya.analysis.depth.layer_lens import LENS_FILE
from laya.analysis.depth.layer_lens import load_lens as read_lens
from laya.analysis.depth.report import DepthReport
from laya.analysis.depth.report_record import DEPTH_FILE
from laya.analysis.head.explain import Explanation, explain_bytes
from laya.analysis.head.spatial import ClassMaps, sample_class_maps
from laya.analysis.network.explain import NetworkExplanation, network_bytes
from laya.analysis.network.gradcam_choice import GradcamChoice
from laya.analysis.network.lens import LENS_CONFIG, LENS_WEIGHTS
from laya.analysis.network.report_files import load_network_report
from laya.analysis.network.report_record import REPORT_JSON
from laya.analysis.network.stored_references import REFERENCES_FILE
from laya.analysis.network.unit_patching import UnitPatch, patch_units_bytes
from laya.analysis.overflow import OutputOverflow
from laya.analysis.patching import PatchEffects, patch_bytes
from laya.analysis.report import PER_INPUT_FILE, REPORT_FILE, Report
from laya.analysis.sample import SAMPLE_FILE, Sample
from laya.app import classwise_views, deploy, uploads, verdicts
from laya.app.catalog import Entry, example_images, find_checkpoints, read_example
from laya.app.depth_plots import WholeTestSetFigures, whole_test_set_figures
from laya.app.seed_views import CLASS_PROFILES, SeedSummary, read_class_profiles, seed_summary
from laya.app.text import plain, shown
from laya.data.images import ImageError, load_image_tensor
from laya.model.attached_files import AttachedFileError
from laya.model.checkpoint import WEIGHTS_FILE, Checkpoint, CheckpointError, load_checkpoint
from laya.sandbox.client import Sandboxed
from laya.sandbox.failures import FailureMemory
from laya.sandbox.info import ModelInfo
from laya.sandbox.pool import WorkerError, worker_pool

MAX_FAILURES = 256  # failed loads the process remembers
MAX_BROKEN = 32  # checkpoints one session remembers as broken on their first image
ALLOW_NONFINITE = "laya_allow_nonfinite"
BROKEN, ANSWERED = "laya_broken_models", "laya_answered_models"

T = TypeVar("T")


@st.cache_resource
def configure_torch() -> int:
    """Torch CPU threads for the whole process (``LAYA_THREADS``, default half the cores, at most 4)."""
    threads = settings.integer("LAYA_THREADS")
    torch.set_num_threads(threads)
    return threads


def _stamp(path: str | Path) -> int:
    """Modification time of a file (0 if missing): part of cache keys, so changed files are reread."""
    try:
        return Path(path).stat().st_mtime_ns
    except OSError:
        return 0


def _versions(*paths: str | Path) -> tuple[tuple[int, int], ...]:
    """Each file's modification time and size ((0, 0) if missing): a cache key of files read together, so that a
    change to any of them is reread (a rewrite within the file system's time resolution too, where its size
    differs)."""
    versions = []
    for path in paths:
        try:
            stat = Path(path).stat()
        except OSError:
            versions.append((0, 0))
        else:
            versions.append((stat.st_mtime_ns, stat.st_size))
    return tuple(versions)


@st.cache_data(ttl=60, show_spinner=False)
def catalog(root: str) -> list[Entry]:
    return find_checkpoints(root)


@st.cache_resource(max_entries=32, show_spinner="Loading the model…")
def _load_model(path: str, stamp: int, allow_nonfinite: bool = False) -> Checkpoint:
    """A bundled checkpoint in this process (the bundled set is small and fixed, so a count cap bounds it)."""
    device = settings.text("LAYA_DEVICE")  # auto: CUDA when available
    return load_checkpoint(path, map_location=device, confine=deploy.confinement(path), allow_nonfinite=allow_nonfinite)


def _sandboxed(path: str, allow_nonfinite: bool) -> Sandboxed:
    return Sandboxed(worker_pool(), path, allow_nonfinite, deploy.confinement(path, uploads.upload_store().root))


@st.cache_data(max_entries=256, show_spinner="Loading the model…")
def _local_info(path: str, stamp: int, allow_nonfinite: bool) -> ModelInfo:
    return ModelInfo.of(_load_model(path, stamp, allow_nonfinite))  # nested: only this function's spinner shows


@st.cache_data(max_entries=256, show_spinner="Loading the model in a sandboxed worker…")
def _worker_info(path: str, stamp: int, allow_nonfinite: bool) -> ModelInfo:
    return _sandboxed(path, allow_nonfinite).info()


def _load_info(path: str, stamp: int, allow_nonfinite: bool) -> ModelInfo:
    """The checkpoint's :class:`ModelInfo`, with a spinner that says where it loads."""
    return (_worker_info if deploy.sandboxed(path) else _local_info)(path, stamp, allow_nonfinite)


@st.cache_resource
def _failures() -> FailureMemory:
    """Checkpoints that failed to load in this process, deterministically: (path, file time, anyway) -> message."""
    return FailureMemory(MAX_FAILURES)


def _broken() -> FailureMemory:
    """This session's checkpoints that failed on their first image (same key) -> message."""
    return st.session_state.setdefault(BROKEN, FailureMemory(MAX_BROKEN))


def _key(path: str) -> tuple[str, int, bool]:
    return path, _stamp(Path(path) / WEIGHTS_FILE), anyway()


def _answered(path: str) -> None:
    answered = st.session_state.setdefault(ANSWERED, OrderedDict())
    answered[_key(path)] = True
    while len(answered) > MAX_BROKEN:
        answered.popitem(last=False)


def _model_failed(path: str, error: WorkerError | CheckpointError) -> None:
    """Stop the page with the model's failure; a deterministic one on the session's first image of this model
    marks it broken for the session (:func:`load_model` then refuses it with the same message)."""
    if _key(path) not in st.session_state.get(ANSWERED, {}):
        _broken().remember(_key(path), error)
    st.error(shown(f"The model could not answer: {error}. The server and other sessions are not affected."))
    st.stop()


def _overflowed(error: OutputOverflow) -> None:
    """Stop the page with the overflow's message instead of NaN probabilities (:mod:`laya.analysis.overflow`).
    Not remembered as broken: another input may stay in range."""
    st.error(shown(str(error)))
    st.stop()


@contextlib.contextmanager
def _model_call(path: str, doing: str, images: str) -> Iterator[None]:
    """A model call on uploaded or example image(s) under a spinner saying ``doing``: an unusable image
    (``images``: their names, as the message names them), an output that overflowed or a failed model or worker
    shows ``st.error`` and stops the page; an answer marks the model as answered in this session."""
    try:
        with st.spinner(shown(doing)):
            yield
    except ImageError as error:
        st.error(shown(f"Cannot use {images} as an image: {error}"))
        st.stop()
    except OutputOverflow as error:
        _overflowed(error)
    except (WorkerError, CheckpointError) as error:  # the model's code failed, or its worker
        _model_failed(path, error)
    _answered(path)


def anyway() -> bool:
    """The session's "Load it anyway" choice for checkpoints with NaN/Inf weights (kept across pages)."""
    return bool(st.session_state.get(ALLOW_NONFINITE, False))


def load_model(path: str, allow_nonfinite: bool | None = None) -> ModelInfo:
    """The checkpoint at ``path``, loaded once (here or in a worker). Raises :class:`CheckpointError`.

    A deterministic failure (a refusal, a worker's memory or CPU limit: :mod:`laya.sandbox.failures`) is
    remembered by the process, at most :data:`MAX_FAILURES` (same path and file time: the same error, without
    rebuilding), and the memory the attempt took is handed back to the OS; a transient one (a signal, the
    timeout, a busy pool) is tried again on the next rerun. A checkpoint that failed on this session's first
    image is refused with that message. ``allow_nonfinite``: load NaN/Inf weights with a warning
    (``ModelInfo.warnings``) instead of refusing (default: the session's "load anyway" choice). A worker that
    could not answer is a :class:`CheckpointError` with its reason.
    """
    if allow_nonfinite is None:
        allow_nonfinite = anyway()
    key = (path, _stamp(Path(path) / WEIGHTS_FILE), allow_nonfinite)
    failures = _failures()
    message = _broken().get(key) or failures.get(key)
    if message is not None:
        raise CheckpointError(message)
    try:
        return _load_info(*key)
    except WorkerError as error:
        failures.remember(key, error)
        raise CheckpointError(str(error)) from None
    except CheckpointError as error:
        failures.remember(key, error)
        deploy.release_memory()
        raise


@st.cache_data(max_entries=64, show_spinner=False)
def _load_report(path: str, stamp: int) -> Report:
    return Report.load(path)


def load_report(path: str | Path, warn: bool = True) -> Report | None:
    """The evaluation report next to a checkpoint, or None (with a warning saying why)."""
    try:
        return _load_report(str(path), _stamp(Path(path) / REPORT_FILE))
    except (FileNotFoundError, ValueError) as error:
        if warn:
            st.warning(shown(error))
        return None


@st.cache_data(max_entries=128, show_spinner=False)
def _explain(
    path: str, stamps: tuple[int, int], anyway: bool, data: bytes, mode: str, posthoc: tuple[str, ...],
    approximate: bool, ood: bool | tuple[str, ...],
) -> Explanation:  # fmt: skip
    if deploy.sandboxed(path):
        return _sandboxed(path, anyway).explain(data, mode, posthoc, approximate, ood)
    checkpoint = _load_model(path, stamps[0], anyway)
    fit, note = _depth_fit(path, stamps, checkpoint) if ood else (None, None)
    return explain_bytes(checkpoint, data, mode=mode, posthoc=posthoc, approximate=approximate, ood=ood, fit=fit,
                         fit_note=note)  # fmt: skip


def explain(
    path: str, name: str, data: bytes, mode: str = "mean", posthoc: tuple[str, ...] = (), approximate: bool = True,
    ood: bool | tuple[str, ...] = False,
) -> Explanation:  # fmt: skip
    """Explain an uploaded or example image; an unusable image, an output that overflowed or a failed worker
    shows ``st.error`` and stops the page. ``approximate=False``: CLS-token layers' approximate maps deferred;
    ``ood``: the input's detection scores (True: all; names: only those) from the same backbone pass, under the
    depth fit beside the checkpoint (``laya.analysis.head.explain``; where it cannot be used, a warning says why,
    from a worker too)."""
    stamps = _stamp(Path(path) / WEIGHTS_FILE), _stamp(Path(path) / FIT_FILE)
    with _model_call(path, f"Running {Path(path).name} on {name}…", repr(name)):
        result = _explain(path, stamps, anyway(), data, mode, posthoc, approximate, ood)
    _fit_note(result.fit_note)
    return result


def evaluate_locally(path: str, limit: int | None, progress: Callable[[float, str], None]) -> Report:
    """:func:`laya.app.classwise_views.evaluate_locally`, here or in a worker. Raises what it raises, and
    :class:`CheckpointError` when a worker could not answer."""
    if not deploy.sandboxed(path):
        checkpoint = _load_model(path, _stamp(Path(path) / WEIGHTS_FILE), anyway())
        return classwise_views.evaluate_locally(checkpoint, limit, progress)
    try:
        return _sandboxed(path, anyway()).evaluate(limit, progress)
    except WorkerError as error:
        raise CheckpointError(f"the model could not answer: {error}") from None


@st.cache_data(max_entries=16, show_spinner=False)
def _load_depth(path: str, stamp: int) -> DepthReport | None:
    return DepthReport.load(path)



def _or_warn(what: str, load: Callable[..., T], *args: Any) -> T | None:
    """``load(*args)``, or None after an ``st.warning`` that ``what`` cannot be shown and why: a stored file that
    does not read loses its view, and the rest of the page draws."""
    try:
        return load(*args)
    except AttachedFileError as error:
        st.warning(shown(f"{what} cannot be shown: {error}"))
        return None


def load_depth(path: str | Path) -> DepthReport | None:
    """``depth.json`` beside a checkpoint (``python -m laya depth``), or None: where there is none, or where it does
    not read (then an ``st.warning`` names the file and what is wrong; the rest of the page draws)."""
    return _or_warn("The depth report", _load_depth, str(path), _stamp(Path(path) / DEPTH_FILE))


@st.cache_data(max_entries=32, show_spinner=False)
def _seed_summary(path: str, stamp: int, head: str, values: str) -> SeedSummary | None:
    table = read_class_profiles(path)
    return None if table is None else seed_summary(table, head, values)


def seed_summary_of(setting: str | Path, head: str, values: str) -> SeedSummary | None:
    """A setting's per-seed profiles of ``head`` (its ``class_profiles.csv``, written by ``laya reproduce``) as
    the Class-wise page shows them, or None without that file or where it does not read (then an ``st.warning``
    names it); computed once per file version and kind."""
    return _or_warn("The per-seed profiles", _seed_summary, str(setting), _stamp(Path(setting) / CLASS_PROFILES), head,
                    values)  # fmt: skip


@st.cache_data(max_entries=16, show_spinner=False)
def _load_exits(path: str, stamp: int) -> dict | None:
    return read_exits(path)


def load_exits(path: str | Path) -> dict | None:
    """``exits.json`` beside a checkpoint (``python -m laya exits``), or None: where there is none, or where it does
    not read (then an ``st.warning`` names the file and what is wrong; only the measured runs are left out)."""
    return _or_warn("The measured early-exit runs", _load_exits, str(path), _stamp(Path(path) / EXITS_FILE))


@st.cache_resource(max_entries=16, show_spinner=False)
def _depth_figures(path: str, stamp: int, exits_stamp: int) -> WholeTestSetFigures | None:
    report = _load_depth(path, stamp)  # the page's own cached reads of depth.json and exits.json, not second parses
    if report is None:
        return None
    try:
        measured = _load_exits(path, exits_stamp)
    except AttachedFileError:  # load_exits warns, naming the file
        measured = None
    return whole_test_set_figures(report, measured)


def depth_figures(path: str | Path) -> WholeTestSetFigures | None:
    """The Depth page's whole-test-set figures of a checkpoint (``depth.json`` and ``exits.json``), or None: built
    once per process and shared by every session, so shown only through ``shown`` (a copy), never changed. Called
    once :func:`load_depth` has read the report; without the measured runs where ``exits.json`` does not read."""
    return _depth_figures(str(path), _stamp(Path(path) / DEPTH_FILE), _stamp(Path(path) / EXITS_FILE))


@st.cache_data(max_entries=64, show_spinner=False)
def _faithfulness_verdict(path: str, stamps: tuple[int, int], mode: str, reduction: str) -> str:
    try:
        per_input, note = verdicts.load_per_input(path), ""
    except AttachedFileError as error:  # only the per-input paired tests are lost
        per_input, note = None, f" ({plain(str(error))}: the per-input paired tests are left out.)"
    return verdicts.faithfulness_verdict(_load_report(path, stamps[0]), mode, reduction, per_input=per_input) + note


def faithfulness_verdict(path: str | Path, mode: str, reduction: str) -> str:
    """:func:`laya.app.verdicts.faithfulness_verdict` of the report beside a checkpoint, its per-input arrays read
    and bootstrapped once per version of the two files, not on every rerun."""
    stamps = _stamp(Path(path) / REPORT_FILE), _stamp(Path(path) / PER_INPUT_FILE)
    return _faithfulness_verdict(str(path), stamps, mode, reduction)


@st.cache_data(max_entries=16, show_spinner=False)
def _load_lens(path: str, stamp: int) -> pd.DataFrame | None:
    return read_lens(path)


def load_lens(path: str | Path) -> pd.DataFrame | None:
    """``lens.csv`` beside a checkpoint (``python -m laya lens`` or ``depth``), or None (a warning if unreadable)."""
    try:
        return _load_lens(str(path), _stamp(Path(path) / LENS_FILE))
    except AttachedFileError as error:
        st.warning(shown(error))
        return None


@st.cache_resource(max_entries=16, show_spinner=False)
def _depth_fit(path: str, stamps: tuple[int, int], _checkpoint: Checkpoint) -> tuple[DepthFit | None, str | None]:
    return DepthFit.usable(_checkpoint)  # keyed by the weights' and the fit's file times


def _fit_note(note: str | None) -> None:
    """The warning that the stored depth fit cannot be used and why (a result's ``fit_note``, from this process or a
    worker), where it cannot; the rest of the page is drawn."""
    if note is not None:
        st.warning(shown(note))


@st.cache_data(max_entries=128, show_spinner=False)
def _input_depth(path: str, stamp: int, fit_stamp: int, anyway: bool, data: bytes) -> InputDepth:
    if deploy.sandboxed(path):
        return _sandboxed(path, anyway).depth(data)
    checkpoint = _load_model(path, stamp, anyway)
    spec = checkpoint.meta.input
    image = load_image_tensor(data, spec.channels, spec.source_size)
    return input_depth(checkpoint, image, *_depth_fit(path, (stamp, fit_stamp), checkpoint))


def depth_of_input(path: str, name: str, data: bytes) -> InputDepth:
    """Depth analytics of an uploaded or example image (where the stored depth fit cannot be used, a warning says
    why); an unusable image, an output that overflowed or a failed worker shows ``st.error`` and stops the page."""
    stamps = _stamp(Path(path) / WEIGHTS_FILE), _stamp(Path(path) / FIT_FILE)
    with _model_call(path, f"Running {Path(path).name} on {name}…", repr(name)):
        result = _input_depth(path, *stamps, anyway(), data)
    _fit_note(result.fit_note)
    return result


@st.cache_data(max_entries=64, show_spinner=False)
def _patch(path: str, stamp: int, anyway: bool, target: bytes, source: bytes, where: str) -> PatchEffects:
    if deploy.sandboxed(path):
        return _sandboxed(path, anyway).patch(target, source, where)
    return patch_bytes(_load_model(path, stamp, anyway), target, source, where)


def patch(path: str, target: tuple[str, bytes], source: tuple[str, bytes], where: str) -> PatchEffects:
    """The patching sweep of ``target`` with layers from ``source`` (``(name, bytes)`` each), here or in a worker;
    an unusable image, an output that overflowed or a failed worker shows ``st.error`` and stops the page."""
    doing = f"Patching {target[0]} with layers of {source[0]} ({where})…"
    with _model_call(path, doing, f"{target[0]!r} or {source[0]!r}"):
        result = _patch(path, _stamp(Path(path) / WEIGHTS_FILE), anyway(), target[1], source[1], where)
    return result


@st.cache_data(max_entries=64, show_spinner=False)
def _patch_units(path: str, stamp: int, anyway: bool, target: bytes, source: bytes, branch: str) -> UnitPatch:
    if deploy.sandboxed(path):
        return _sandboxed(path, anyway).patch_units(target, source, branch)
    return patch_units_bytes(_load_model(path, stamp, anyway), target, source, branch)


def patch_units(
    path: str, target: tuple[str, bytes], source: tuple[str, bytes], branch: str = "block"
) -> UnitPatch | str:
    """An attached network's own units patched one at a time from ``source`` into ``target`` (``(name, bytes)``
    each, :func:`laya.analysis.network.unit_patching.patch_units_bytes` on ``branch``), here or in a worker, or the
    sentence saying why it is not shown; an unusable image, an output that overflowed or a failed worker shows
    ``st.error`` and stops the page."""
    doing = f"Patching {target[0]} with the units of {source[0]}…"
    try:
        with _model_call(path, doing, f"{target[0]!r} or {source[0]!r}"):
            result = _patch_units(path, _stamp(Path(path) / WEIGHTS_FILE), anyway(), target[1], source[1], branch)
    except ValueError as error:  # no units to hook
        return f"The network's units cannot be patched here: {error}"
    return result


@st.cache_data(max_entries=64, show_spinner=False)
def _block_ablation(
    path: str, stamp: int, anyway: bool, data: bytes, references: tuple[bytes, ...], skip: bool
) -> BlockAblation:
    if deploy.sandboxed(path):
        return _sandboxed(path, anyway).ablate(data, references, skip)
    return ablate_bytes(_load_model(path, stamp, anyway), data, references, skip)


def block_ablation(path: str, name: str, data: bytes, skip: bool = False) -> BlockAblation | str:
    """Block ablation of one image inside the backbone (``skip``: residual blocks skipped), the means over the
    checkpoint's bundled example images (:func:`laya.analysis.block_ablation.ablate_bytes`), here or in a worker, or
    the sentence saying why it is not shown: none bundled, or a backbone whose layers have no modules to hook. An
    unusable image or a failed worker shows ``st.error`` and stops the page."""
    try:
        references = tuple(read_example(p) for p in example_images(path))
    except ImageError as error:  # an example over the size limit: its size checked before a byte is read
        return f"Block ablation needs the bundled examples as references: {error}"
    if not references:
        return "Block ablation needs reference images for its means; this checkpoint has no bundled examples."
    try:
        with _model_call(path, f"Ablating each block for {name}…", repr(name)):
            result = _block_ablation(path, _stamp(Path(path) / WEIGHTS_FILE), anyway(), data, references, skip)
    except ValueError as error:  # layers without modules to hook (layer_blocks says which)
        return f"Block ablation is not available for this backbone: {error}"
    return result


@st.cache_data(max_entries=64, show_spinner=False)
def _network(
    path: str, stamps: tuple[int, tuple[tuple[int, int], ...]], anyway: bool, data: bytes, method: str,
    granularity: str, cam_class: int | None, branch: str,
) -> NetworkExplanation:  # fmt: skip
    examples = tuple(read_example(p) for p in example_images(path))  # references where the training split is absent
    if deploy.sandboxed(path):
        return _sandboxed(path, anyway).network(data, method, granularity, cam_class, examples, branch)
    return network_bytes(_load_model(path, stamps[0], anyway), data, method, granularity, cam_class, examples, branch)


def network(
    path: str, name: str, data: bytes, method: str = "resample", granularity: str = "unit",
    cam_class: int | None = None, branch: str = "block",
) -> NetworkExplanation | str:  # fmt: skip
    """An attached network's own units on one image (:func:`laya.analysis.network.explain.network_bytes`: unit
    profile on ``branch``, lens, Grad-CAM), here or in a worker, or the sentence saying why it is not shown. An
    unusable image or a failed worker shows ``st.error`` and stops the page."""
    stamps = _stamp(Path(path) / WEIGHTS_FILE), _versions(*(Path(path) / name
                                                            for name in (LENS_CONFIG, LENS_WEIGHTS, REFERENCES_FILE)))
    try:
        with _model_call(path, f"Explaining the network's units on {name}…", repr(name)):
            result = _network(path, stamps, anyway(), data, method, granularity, cam_class, branch)
    except ValueError as error:  # no references, no units to hook
        return f"The network's units cannot be explained here: {error}"
    return result


@st.cache_data(max_entries=16, show_spinner=False)
def _load_sample(path: str, stamp: int) -> Sample | None:
    return Sample.load(path)


def load_sample(path: str | Path) -> Sample | None:
    """The test-set browser's sample beside a checkpoint (``python -m laya evaluate``), or None: where there is
    none, or where it does not read (then an ``st.warning`` names the file and what is wrong; the rest of the page
    draws)."""
    return _or_warn("The test-set sample", _load_sample, str(path), _stamp(Path(path) / SAMPLE_FILE))


@st.cache_data(max_entries=16, show_spinner=False)
def _gradcam_choice(path: str, stamp: int) -> GradcamChoice | None:
    report = load_network_report(path)
    return None if report is None else report.gradcam


def gradcam_choice(path: str | Path) -> GradcamChoice | None:
    """Which unit's Grad-CAM the stored network report beside an own-classifier checkpoint says to use (its
    ``gradcam`` section), or None: no report, one written before the test, or one whose files do not read (the
    stored-report views say what is wrong)."""
    try:
        return _gradcam_choice(str(path), _stamp(Path(path) / REPORT_JSON))
    except AttachedFileError:
        return None


@st.cache_data(max_entries=16, show_spinner=False)
def _class_maps(path: str, stamp: int, sample_stamp: int, anyway: bool) -> ClassMaps:
    if deploy.sandboxed(path):
        return _sandboxed(path, anyway).class_maps()
    return sample_class_maps(_load_model(path, stamp, anyway))


def class_maps(path: str) -> ClassMaps:
    """Mean spatial maps per class and layer over the checkpoint's test-set sample, here or in a worker; a
    failed worker shows ``st.error`` and stops the page. Raises ``ValueError`` without a usable sample."""
    stamps = _stamp(Path(path) / WEIGHTS_FILE), _stamp(Path(path) / SAMPLE_FILE)
    try:
        with st.spinner(shown(f"Running {Path(path).name} on the test-set sample…")):
            return _class_maps(path, *stamps, anyway())
    except WorkerError as error:
        _model_failed(path, error)
