"""The network report on disk: what :func:`~laya.analysis.network.report.network_report` computes, written beside
the own head and read back as untrusted input.

Stored in the checkpoint's folder (``<setting>/own/``) beside ``tuned_lens.safetensors`` + ``tuned_lens.json``:

``network.safetensors`` (arrays; ``N`` test inputs, ``U`` units; never pickled)
    ``indices (N,)`` int64 positions in the test split; ``labels``, ``predictions (N,)`` int64;
    ``probability (N,)`` p of the prediction; ``drops (N, U)`` ``p_ŷ(x) - p_ŷ(x | unit intervened)`` under
    ``method``; ``skip_drops (N, U)`` under skip (only where a unit is residual; entries of units that are not
    residual used the resample fallback, see ``skip_methods``); ``lens_kl (N, U)`` KL(final || lens) in nats;
    ``lens_prob (N, U)`` the lens's p of the final prediction; ``lens_class (N, U)`` int64 the lens's class;
    ``lens_agrees (N, U)`` bool ``lens_class == predictions``; ``prediction_depth (N,)`` int64, 1-based, ``U + 1``
    where even the last unit disagrees; ``scores/<name> (N, U)`` per cheap score of
    :data:`~laya.analysis.network.scores.SCORES`.

``network.json``
    ``version``; ``units`` (module names), ``stages`` (the backbone layer index of each unit's stage),
    ``stage_names``, ``residual`` (bool per unit), ``method`` (the default intervention, with its branch where one
    was chosen and the units have it: ``resample of MLP``), ``methods`` and ``skip_methods`` (what each unit got),
    ``classes``, ``references`` (K), ``options`` (:class:`~laya.analysis.network.report.NetworkOptions`), ``command``; ``lens`` (``source``,
    ``command`` that fitted it, ``fit`` its training summary, ``units``: per unit on this sample the records of
    :func:`~laya.analysis.network.lens_fit.lens_summary`: ``unit, kl, logit_kl, constant_kl, agreement``, None where
    the logit lens does not apply or the stored lens has no constant);
    ``agreement`` (records of :func:`~laya.analysis.network.scores.trusted_agreement`: ``score, intervention,
    spearman_mean, ci_low, ci_high, n, kind, units, vs_baseline, vs_low, vs_high, trusted``: each cheap score and
    the two baselines, per-input Spearman over the units that keep the input; a report written before the
    baselines has no values in the last six); ``tables`` (``"<metric>/<true|predicted>"`` -> a class x unit table in
    pandas' ``split`` layout, rows ``"all"`` then each class with inputs, a last column ``n``; metrics
    ``lens_prob``, ``lens_kl``, ``lens_agrees``, ``drops``); ``lesion`` the lesion study on the same inputs
    (:class:`~laya.analysis.network.lesion.LesionStudy`: ``n``, ``intact``, ``single``, ``curve`` and ``by_class``
    records, ``classes`` tables; absent before it, ``by_class`` too); ``gradcam`` every unit's Grad-CAM against
    random on the pixel metrics and the unit to use (:class:`~laya.analysis.network.gradcam_choice.GradcamChoice`, on
    ``options.gradcam_sample`` test images; absent before it or with 0); ``shapes`` (every array's shape, checked on
    load).

Reading (for the pages)::

    report = load_network_report(folder)   # NetworkReport, or None where network.json is absent
    report.units, report.drops, report.agreement, report.tables["lens_prob/true"], report.scores["grad_x_act"]

:func:`load_network_report` reads both files as untrusted input and raises
:class:`~laya.model.attached_files.AttachedFileError` (a ``ValueError``) where they do not fit together (a missing
or misshapen array, a JSON field missing or of the wrong kind), never returning a half-read report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor

from laya.analysis.network.gradcam_choice import GradcamChoice
from laya.analysis.network.lesion import LesionStudy
from laya.analysis.network.report_record import (
    MAX_REPORT_JSON,
    REPORT_JSON,
    agreement_records,
    checked_record,
    class_unit_tables,
    gradcam_record,
    lesion_record,
)
from laya.analysis.network.scores import SCORES
from laya.analysis.strict_json import json_safe, split_table
from laya.model.attached_files import AttachedFileError, attached_file, read_json, read_tensors, tensor_header
from laya.model.checkpoint import Checkpoint, atomic_write_json, atomic_write_tensors

REPORT_TENSORS = "network.safetensors"
INTEGERS = ("indices", "labels", "predictions", "lens_class", "prediction_depth")  # int64 arrays; lens_agrees bool
VERSION = 1
ARRAYS = ("indices", "labels", "predictions", "probability", "drops", "lens_kl", "lens_prob", "lens_class",
          "lens_agrees", "prediction_depth")  # fmt: skip


@dataclass
class NetworkReport:
    """The network report of one checkpoint (module docstring: every field, its shape and its file)."""

    units: list[str]
    stages: list[int]
    stage_names: list[str]
    residual: list[bool]
    method: str
    methods: list[str]
    classes: list[str]
    indices: Tensor
    labels: Tensor
    predictions: Tensor
    probability: Tensor
    drops: Tensor
    lens_kl: Tensor
    lens_prob: Tensor
    lens_class: Tensor
    lens_agrees: Tensor
    prediction_depth: Tensor
    scores: dict[str, Tensor]
    agreement: pd.DataFrame
    tables: dict[str, pd.DataFrame]
    skip_drops: Tensor | None = None
    skip_methods: list[str] = field(default_factory=list)
    references: int = 0
    lens: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    command: str = ""
    setting_command: str = ""  # the command that made the attached setting (``laya attach``); "" where it is this one
    lesion: LesionStudy | None = None  # absent from a report written before the lesion study
    gradcam: GradcamChoice | None = None  # absent before it, or where ``options.gradcam_sample`` is 0

    @property
    def last_unit_agreement(self) -> float:
        """Share of the sample whose last unit's lens class is the network's prediction."""
        return float(self.lens_agrees[:, -1].double().mean())

    def arrays(self) -> dict[str, Tensor]:
        """Every array as stored in ``network.safetensors``."""
        out = {name: getattr(self, name) for name in ARRAYS}
        out |= {f"scores/{k}": v for k, v in self.scores.items()}
        return out | ({} if self.skip_drops is None else {"skip_drops": self.skip_drops})


def write_network_report(checkpoint: Checkpoint | None, report: NetworkReport, dest: str | Path) -> Path:
    """Write ``dest/network.safetensors`` and ``dest/network.json`` (module docstring; ``checkpoint`` names the
    checkpoint it explains in the JSON, None: not recorded). Returns the JSON's path."""
    dest = Path(dest)
    arrays = report.arrays()
    record = {
        "version": VERSION,
        "checkpoint": None if checkpoint is None else str(checkpoint.path),
        **{k: getattr(report, k) for k in ("units", "stages", "stage_names", "residual", "method", "methods",
                                           "skip_methods", "classes", "references", "lens", "options", "command",
                                           "setting_command")},
        "agreement": report.agreement.to_dict(orient="records"),
        "tables": {k: split_table(v) for k, v in report.tables.items()},
        "lesion": None if report.lesion is None else report.lesion.to_record(),
        "gradcam": None if report.gradcam is None else report.gradcam.to_record(),
        "shapes": {k: list(v.shape) for k, v in arrays.items()},
    }  # fmt: skip
    atomic_write_tensors(dest / REPORT_TENSORS, {k: v.contiguous() for k, v in arrays.items()})
    atomic_write_json(dest / REPORT_JSON, json_safe(record))
    return dest / REPORT_JSON


def load_network_report(dest: str | Path) -> NetworkReport | None:
    """The network report in ``dest``, or None where ``network.json`` is absent (module docstring). Both files are
    untrusted (:mod:`laya.model.attached_files`): confined to the setting folder, ``network.json``'s fields checked
    (tables, agreement rows), the arrays' header against its shapes before an array is read.

    Raises:
        AttachedFileError: a file unreadable, a field missing or of the wrong kind, an array missing or of another
            shape or kind than recorded, or shapes that do not fit the units and the sample (every ``(N, U)`` array
            with ``U = len(units)``, one ``N`` throughout); never a half-read report.
    """
    dest = Path(dest)
    path = attached_file(dest, REPORT_JSON)
    if path is None:
        return None
    record = checked_record(read_json(path, REPORT_JSON, MAX_REPORT_JSON))
    agreement, tables = agreement_records(record["agreement"]), class_unit_tables(record["tables"], record["units"])
    lesion = lesion_record(record.get("lesion"), record["units"], record["classes"])
    gradcam = gradcam_record(record.get("gradcam"), record["units"])
    tensors = attached_file(dest, REPORT_TENSORS)
    if tensors is None:
        raise AttachedFileError(REPORT_TENSORS, f"{REPORT_TENSORS} is missing beside {REPORT_JSON}")
    header = tensor_header(tensors, REPORT_TENSORS)
    missing = [k for k in ARRAYS if k not in header] + [f"scores/{k}" for k in SCORES if f"scores/{k}" not in header]
    if missing:
        raise AttachedFileError(REPORT_TENSORS, f"{REPORT_TENSORS}: the network report lacks {missing}")
    U, N = len(record["units"]), header["indices"][0][0] if len(header["indices"][0]) == 1 else -1
    expected = {k: (N,) if k in ("indices", "labels", "predictions", "probability", "prediction_depth") else (N, U)
                for k in header}  # fmt: skip
    shapes = record["shapes"]
    wrong = [k for k, (shape, _) in header.items() if list(shape) != shapes.get(k) or shape != expected[k]]
    if wrong:
        shown = {k[:40]: (list(header[k][0]), shapes.get(k), list(expected[k])) for k in wrong[:4]}
        raise AttachedFileError(REPORT_TENSORS, f"{REPORT_TENSORS}: the network report's shapes do not fit its "
                                                f"{U} units and {N} inputs (found, recorded, expected): {shown}")
    def fits(name: str, dtype: torch.dtype) -> bool:
        if name in INTEGERS:
            return dtype == torch.int64
        return dtype == torch.bool if name == "lens_agrees" else dtype.is_floating_point

    odd = [k for k, (_, dtype) in header.items() if not fits(k, dtype)]
    if odd:
        raise AttachedFileError(REPORT_TENSORS, f"{REPORT_TENSORS}: {odd[:4]} are of another kind than recorded "
                                                "(int64 indices and classes, bool agreement, floating values)")
    arrays = read_tensors(tensors, REPORT_TENSORS)
    K = len(record["classes"])
    if any(bool(((arrays[k] < 0) | (arrays[k] >= K)).any()) for k in ("labels", "predictions", "lens_class")):
        raise AttachedFileError(REPORT_TENSORS, f"{REPORT_TENSORS}: a class index outside the {K} classes")
    return NetworkReport(
        units=record["units"], stages=record["stages"], stage_names=record["stage_names"], residual=record["residual"],
        method=record["method"], methods=record["methods"], classes=record["classes"],
        **{k: arrays[k] for k in ARRAYS}, scores={k: arrays[f"scores/{k}"] for k in SCORES}, agreement=agreement,
        tables=tables, skip_drops=arrays.get("skip_drops"), skip_methods=record.get("skip_methods", []),
        references=record.get("references", 0), lens=record.get("lens", {}), options=record.get("options", {}),
        command=record.get("command", ""), setting_command=record.get("setting_command", ""), lesion=lesion,
        gradcam=gradcam,
    )  # fmt: skip


__all__ = ["ARRAYS", "INTEGERS", "REPORT_TENSORS", "VERSION", "NetworkReport", "load_network_report",
           "write_network_report"]  # fmt: skip
