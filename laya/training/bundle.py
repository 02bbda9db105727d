"""Package trained checkpoints for the dashboard: ``models/<setting>/<head>/``.

Each bundled head folder holds ``model.{json,safetensors}``, the evaluation report
(``report.json`` + CSVs) and ``expected.json`` (prediction, probabilities and layer scores on
the setting's example images, recorded when the bundle was made, for regression tests).
Example images from the test split live once per setting in ``models/<setting>/examples/``;
a frozen backbone's weights live once in ``models/<setting>/backbone.safetensors``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch
from PIL import Image
from torch.nn import Module

from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.head.explain import explain
from laya.analysis.report import write_report
from laya.analysis.sample import class_slug, write_sample
from laya.app.catalog import example_images
from laya.data.datasets import Images
from laya.data.images import load_image_tensor
from laya.model.checkpoint import Checkpoint, atomic_write_json, atomic_write_tensors, load_checkpoint, save_checkpoint

BACKBONE_FILE = "backbone.safetensors"
EXPECTED_FILE = "expected.json"


def export_examples(data: Images, dest: str | Path, per_class: int = 1) -> list[Path]:
    """Write the first ``per_class`` images of each class as PNG: ``dest/<nn>-<class>.png``."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    paths = []
    for c, name in enumerate(data.classes):
        for i in torch.nonzero(data.labels == c).flatten()[:per_class].tolist():
            array = data.image(i).permute(1, 2, 0).numpy()
            path = dest / f"{len(paths):02d}-{class_slug(name)}.png"
            Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array).save(path)
            paths.append(path)
    return paths


def record_expected(checkpoint: Checkpoint, examples: list[Path]) -> dict:
    """Prediction, class probabilities and layer scores of ``checkpoint`` on each example image."""
    spec = checkpoint.meta.input
    record = {}
    for path in examples:
        e = explain(checkpoint, load_image_tensor(path, spec.channels, spec.source_size))
        record[path.name] = {
            "prediction": e.label,
            "probabilities": e.probs.tolist(),
            "layer_scores": e.scores[e.intrinsic].tolist() if e.intrinsic else None,
            "loo_drops": e.drops.tolist(),
        }
    return record


def bundle(
    run: str | Path,
    dest: str | Path,
    test: Images,
    options: EvalOptions | None = None,
    progress=None,
    module: Module | None = None,
    sample: bool = True,
    device: str | torch.device = "cpu",
) -> Path:
    """Copy the checkpoint in ``run`` to ``dest``, evaluate it on ``test`` on ``device``, record expected outputs.

    A frozen backbone is written once to ``dest/../backbone.safetensors`` and referenced from the
    head's ``model.json``. ``module``: the network of a ``wrapped`` checkpoint. ``sample``: False leaves the
    browser's sample to the caller (who writes it after a depth fit, once).
    """
    dest = Path(dest)
    checkpoint = load_checkpoint(run, module=module)
    meta = checkpoint.meta
    if meta.backbone.freeze and meta.backbone.weights:
        shared = dest.parent / BACKBONE_FILE
        if not shared.is_file():
            atomic_write_tensors(shared, checkpoint.model.backbone.network_state(), {"format": "laya-backbone"})
        meta = replace(meta, backbone=replace(meta.backbone, weights=f"../{BACKBONE_FILE}"))
    dtype = getattr(torch, json.loads((Path(run) / "model.json").read_text())["weights"]["dtype"])
    save_checkpoint(checkpoint.model, meta, dest, dtype=dtype)
    return refresh(dest, test, options, progress, module, sample, device)


def refresh(
    dest: str | Path, test: Images, options: EvalOptions | None = None, progress=None, module: Module | None = None,
    sample: bool = True, device: str | torch.device = "cpu",
) -> Path:  # fmt: skip
    """(Re-)evaluate the bundled checkpoint in ``dest`` exactly as it ships: its report, its per-input arrays
    (``per_input.safetensors``, for paired comparisons between heads; not committed), the test-set browser's
    sample (``sample.safetensors``; the thumbnails once per setting, ``../sample_images.png``) and ``expected.json``.

    ``python -m laya evaluate --checkpoint dest`` with the same options reproduces the report. ``sample``, ``device``:
    as :func:`bundle`.
    """
    dest = Path(dest)
    checkpoint = load_checkpoint(dest, map_location=device, module=module)
    per_input: dict = {}
    report = evaluate(checkpoint, test, options, progress, per_input=per_input)
    write_report(report, dest, per_input)
    if sample:
        write_sample(checkpoint, test, dest, mode=report["headline"]["mode"], images_dir=dest.parent)  # shared sprite
    atomic_write_json(dest / EXPECTED_FILE, record_expected(checkpoint, example_images(dest)))
    return dest


def summary_seeds(setting: str | Path) -> int:
    """Most seeds any head of the setting folder's ``summary.csv`` is summarised over (0 without one)."""
    path = Path(setting) / "summary.csv"
    return int(pd.read_csv(path)["seeds"].max()) if path.is_file() else 0


STALE_START, STALE_END = "<!-- stale-posthoc:start -->", "<!-- stale-posthoc:end -->"


def stale_posthoc_note(setting: str | Path) -> str | None:
    """A warning if the setting's ``results.csv`` predates float64 gradients (it has no zero-baseline IG, which
    was added with them, issue 18): its post-hoc numbers (IG, Gradient × Input, Saliency, and every verdict
    comparing them) may carry the float32 underflow. With the bundled seed-0 reports it also states how far
    re-evaluating seed 0 moved them (:func:`~laya.training.suite.seed0_posthoc_shift`). None when the file is
    current or absent."""
    from laya.analysis.head.attribution import METHOD_LABELS
    from laya.analysis.head.faithfulness import METRIC_LABELS
    from laya.model.heads import HEAD_LABELS
    from laya.training.suite import seed0_posthoc_shift

    path = Path(setting) / "results.csv"
    if not path.is_file() or "integrated_gradients_zero" in set(pd.read_csv(path, usecols=["method"])["method"]):
        return None
    note = (
        "**Stale post-hoc numbers.** This multi-seed summary was computed before post-hoc gradients were made "
        "float64-safe (docs/decisions/attributions.md): its Integrated Gradients, Gradient × Input and Saliency "
        "figures, and the verdicts comparing them, may carry the float32 underflow (p = 1.0 kills p(1 − p)). "
        "Accuracy and the intrinsic scores (α, ScalarMix weights) are unaffected. The bundled seed-0 reports "
        "(`<head>/report.json`) are current; rebuild this summary with `python -m laya reproduce`."
    )
    shift = seed0_posthoc_shift(setting)
    if shift is not None and shift["shift"] == 0:
        note += " Re-evaluating seed 0 left every one of its post-hoc figures unchanged."
    elif shift is not None:
        note += (
            f" Re-evaluating seed 0 moved its post-hoc figures by at most {shift['shift']:.2g} "
            f"({METRIC_LABELS[shift['metric']]}, {HEAD_LABELS.get(shift['head'], shift['head'])} "
            f"{METHOD_LABELS.get(shift['method'], shift['method'])}, `{shift['mode']}`, {shift['reduction']})."
        )
    return note


def mark_stale_summary(setting: str | Path) -> Path | None:
    """Write (or remove) :func:`stale_posthoc_note` between markers under the title of ``summary.md``."""
    path = Path(setting) / "summary.md"
    if not path.is_file():
        return None
    text = path.read_text()
    if STALE_START in text:
        before, rest = text.split(STALE_START, 1)
        text = before.rstrip("\n") + "\n" + rest.split(STALE_END, 1)[1].lstrip("\n")
    note = stale_posthoc_note(setting)
    if note:
        title, _, body = text.partition("\n")
        text = f"{title}\n\n{STALE_START}\n{note}\n{STALE_END}\n{body}"
    path.write_text(text)
    return path


def refresh_setting(
    setting: str | Path, options: EvalOptions | None = None, progress_for=None, resume: bool = False
) -> Path:
    """:func:`refresh` every head of a bundled setting folder, then rewrite its summary tables from the
    bundled reports (one seed each) unless they summarise several seeds (:func:`summary_seeds` > 1: made by
    ``reproduce`` from the runs, whose seed-0 reports these equal). ``resume``: keep heads whose report and
    per-input arrays were written by this version."""
    from laya.analysis.report import PER_INPUT_FILE, Report
    from laya.training.suite import results_table, write_summary

    setting = Path(setting)
    heads = sorted(p.parent for p in setting.glob("*/model.json"))
    if not heads:
        raise FileNotFoundError(f"no bundled checkpoints (*/model.json) under {setting}")
    test = load_checkpoint(heads[0]).load_data("test")
    for head in heads:
        if resume and (head / PER_INPUT_FILE).is_file():
            try:
                Report.load(head)
                continue
            except ValueError:  # written by an older laya
                pass
        refresh(head, test, options, progress_for(f"re-evaluating {head}") if progress_for else None)
    if summary_seeds(setting) > 1:
        mark_stale_summary(setting)
        return setting
    title = (
        (setting / "summary.md").read_text().splitlines()[0].lstrip("# ")
        if (setting / "summary.md").is_file()
        else setting.name
    )
    write_summary(results_table(heads), setting, title, heads)
    return setting


def model_card(models: str | Path) -> str:
    """Markdown table of every bundled checkpoint: accuracy and macro-F1 with 95% bootstrap CIs over test
    inputs; per method, Spearman over informative layers (intervention ``mean``, signed reduction) with its
    CI, or "n/a (one informative layer)"; top-1 agreement and Deletion@1 / oracle (mean; median) of the primary method;
    training time and the command that made it (the exact config of each checkpoint is in its ``model.json``)."""
    from laya.analysis.head.attribution import ig_description
    from laya.analysis.report import Report
    from laya.app.catalog import find_checkpoints
    from laya.training.suite import HEAD_LABELS  # the own classifier's name too

    short = {"laya_alpha": "α", "scalarmix_weights": "w", "integrated_gradients": "IG", "integrated_gradients_zero":
             "IG₀", "input_x_gradient": "G×I", "saliency": "Sal", "random": "rand"}  # fmt: skip

    def ci(entry: dict | None, digits: int = 3) -> str:
        return (
            "–"
            if entry is None
            else f"{entry['estimate']:.{digits}f} [{entry['low']:.{digits}f}, {entry['high']:.{digits}f}]"
        )

    lines = [
        "All figures: estimate [95% bootstrap CI over the test inputs]. Faithfulness: intervention `mean`, signed "
        "reduction, Spearman over layers with |LOO drop| > 1e-3; "
        + ", ".join(f"{v} = {k}" for k, v in short.items())
        + f". {ig_description(EvalOptions().ig_steps)}.",
        "",
        (
            "| setting | head | accuracy | macro-F1 | Spearman (informative layers) per method | top-1 (primary) | "
            "Deletion@1 / oracle (primary): mean; median | train min | epochs | command |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in find_checkpoints(models):
        if entry.error:
            continue
        report = Report.load(entry.path)
        mode = report.default_mode
        scores = "; ".join(
            f"{short.get(m, m)} {report.status(m, mode) or ci(report.faithfulness_entry(m, mode)['spearman_eps'])}"
            for m in report.data["methods"]
        )
        primary = report.faithfulness_entry(mode=mode)
        na = primary["status"]
        train = report.data["checkpoint"]["train_metrics"]
        trained = f"{train['train_seconds'] / 60:.1f} | {train['epochs']}" if train else "– (not trained) | –"
        lines.append(
            f"| {entry.path.parent.name} | {HEAD_LABELS[entry.head]} | "
            f"{ci(report.interval('accuracy'), 4)} | {ci(report.interval('macro_f1'), 4)} | {scores} | "
            f"{na or ci(primary['top1'])} | "
            f"{na or ci(primary['deletion_at_1_norm']) + '; ' + ci(primary.get('deletion_at_1_norm_median'))} | "
            f"{trained} | `{_command(entry.path.parent)}` |"
        )
    return "\n".join(lines) + "\n"


def _command(setting: Path) -> str:
    """What made a bundled setting: ``laya reproduce`` for the paper's settings; for an attached network, the
    ``laya attach`` command its network report records (``own/network.json``), then the command that rewrote the
    report where another one did (``laya network``). ``network.json`` is read as the untrusted file it is
    (:mod:`laya.model.attached_files`: confined, bounded, the two fields checked).

    Raises:
        AttachedFileError: ``network.json`` unreadable, or its commands not texts (naming the field).
    """
    from laya.analysis.network.report_record import MAX_REPORT_JSON, REPORT_JSON
    from laya.model.attached_files import attached_file, field_error, read_json

    network = attached_file(setting / "own", REPORT_JSON)
    if network is None:
        return f"python -m laya reproduce {setting.name}"
    record = read_json(network, REPORT_JSON, MAX_REPORT_JSON)
    if not isinstance(record, dict) or not isinstance(record.get("command"), str):
        raise field_error(REPORT_JSON, "command", record.get("command") if isinstance(record, dict) else record,
                          "must be a text")  # fmt: skip
    if not isinstance(record.get("setting_command", ""), str):
        raise field_error(REPORT_JSON, "setting_command", record["setting_command"], "must be a text")
    made = record.get("setting_command") or record["command"]
    later = f"`, then `python -m {record['command']}" if made != record["command"] else ""
    return f"python -m {made}{later}"


CARD_START, CARD_END = "<!-- model-card:start -->", "<!-- model-card:end -->"


def update_model_card(models: str | Path) -> Path:
    """Rewrite the generated table between the model-card markers of ``models/README.md``."""
    path = Path(models) / "README.md"
    text = path.read_text() if path.is_file() else f"# Bundled checkpoints\n\n{CARD_START}\n{CARD_END}\n"
    if CARD_START not in text or CARD_END not in text:
        text += f"\n{CARD_START}\n{CARD_END}\n"
    head, rest = text.split(CARD_START, 1)
    _, tail = rest.split(CARD_END, 1)
    path.write_text(f"{head}{CARD_START}\n{model_card(models)}{CARD_END}{tail}")
    return path


__all__ = [
    "BACKBONE_FILE",
    "EXPECTED_FILE",
    "bundle",
    "export_examples",
    "mark_stale_summary",
    "model_card",
    "record_expected",
    "refresh",
    "refresh_setting",
    "stale_posthoc_note",
    "summary_seeds",
    "update_model_card",
]
