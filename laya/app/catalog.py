"""Find checkpoints under a folder (``models/`` by default) with their reports and example images.

Only ``model.json`` and ``report.json`` are read here; weights load on demand. A folder
that holds a damaged checkpoint is listed with its error instead of being skipped silently.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from laya.analysis.report import REPORT_FILE, Report
from laya.data.datasets import dataset_label
from laya.data.images import MAX_BYTES, ImageError
from laya.model.attached_files import AttachedFileError, read_bytes
from laya.model.checkpoint import META_FILE, CheckpointError, read_meta
from laya.model.own_head import OWN, is_own_head
from laya.paths import canonical_path, inside
from laya.training.settings import SETTINGS

EXAMPLE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif")


@dataclass
class Entry:
    """One checkpoint found on disk."""

    path: Path
    group: str  # dataset · backbone: heads in one group are comparable side by side
    dataset: str
    backbone: str
    head: str
    seed: int | None
    accuracy: float | None
    faithfulness: float | None  # headline faithfulness of the primary method (mean intervention), from the report
    compute_saved: float | None = None  # measured early exit: MACs saved within 1 point (exits.json)
    error: str | None = None  # the checkpoint cannot be read
    report_error: str | None = None  # the checkpoint is fine but its report.json is not
    faithfulness_status: str | None = None  # "n/a (one informative layer)" where no ranking can be tested

    @property
    def label(self) -> str:
        acc = f"acc {self.accuracy:.3f}" if self.accuracy is not None else "no report"
        return f"{self.head} ({acc})"


def backbone_label(backbone: dict) -> str:
    """Short human name of a backbone config: ``mlp 512-256-128``, ``efficientnet_lite0 (frozen)``,
    ``vit_tiny_patch16_224 patch_size=8 depth=6`` (timm name and architecture overrides)."""
    if backbone.get("name") == "timm":  # architecture overrides matter: a timm name alone can mislead
        overrides = {k: v for k, v in backbone.get("model_kwargs", {}).items() if k not in ("img_size", "num_classes")}
        name = (backbone.get("model") or "timm") + "".join(f" {k}={v}" for k, v in overrides.items())
    else:
        name = f"{backbone.get('name')} {'-'.join(str(w) for w in backbone.get('widths', []))}"
    return name + (" (frozen)" if backbone.get("freeze") else "")


def describe(path: Path) -> Entry:
    """An :class:`Entry` for the checkpoint directory ``path``.

    ``error`` is set if the checkpoint is unreadable; a damaged report only leaves the
    metrics empty (``report_error`` says why), the checkpoint stays usable.
    """
    try:
        meta = read_meta(path)
        backbone = backbone_label(meta["backbone"])
        group = f"{dataset_label(meta['dataset'])} · {backbone}"
        report, report_error = None, None
        if (path / REPORT_FILE).is_file():
            try:
                report = Report.load(path)
            except ValueError as error:
                report_error = str(error)
        return Entry(
            path=path,
            group=group,
            dataset=meta["dataset"],
            backbone=backbone,
            head=OWN if is_own_head(meta.get("train", {})) else meta["head"]["name"],  # an attached network's own
            seed=meta.get("seed"),
            accuracy=report.accuracy if report else meta.get("metrics", {}).get("test_accuracy"),
            faithfulness=report.faithfulness() if report else None,
            report_error=report_error,
            faithfulness_status=report.status() if report else None,
            compute_saved=_compute_saved(path),
        )
    except (CheckpointError, ValueError, KeyError, json.JSONDecodeError) as error:
        return Entry(path, "unreadable", "?", "?", "?", None, None, None, error=str(error))


def _compute_saved(path: Path) -> float | None:
    """MACs saved by the measured readout early exit within 1 point (``exits.json``, ``python -m laya exits``);
    None without one (``depth.json``'s per-input estimate is not shown as a saving) or where it does not read (the
    Depth page names the file and what is wrong)."""
    from laya.analysis.depth.exits_record import load_exits
    from laya.analysis.depth.measured import best_exit

    try:
        report = load_exits(path)
    except AttachedFileError:
        report = None
    if report is None:
        return None
    runs = pd.DataFrame(report["runs"])
    row, within = best_exit(runs[runs["exits"] == runs["exits"].iloc[0]])
    return float(row["macs_saved"]) if within else 0.0


def find_checkpoints(root: str | Path = "models") -> list[Entry]:
    """Every checkpoint below ``root``: the paper's settings first, in :data:`laya.training.settings.SETTINGS`
    order (by top-level folder name; the first is the dashboard's default), then the other groups
    alphabetically; within a group, heads in the order own classifier, LastLayer, Concat, ScalarMix, LAYA."""
    heads = {OWN: -1, "lastlayer": 0, "concat": 1, "scalarmix": 2, "laya": 3}
    settings = {name: i for i, name in enumerate(SETTINGS)}
    root = Path(root)
    entries = [describe(p.parent) for p in sorted(root.rglob(META_FILE))] if root.is_dir() else []

    def key(e: Entry) -> tuple:
        folder = e.path.relative_to(root).parts[0]
        return (settings.get(folder, len(settings)), e.group, heads.get(e.head, 9), str(e.path))

    return sorted(entries, key=key)


def catalog_table(entries: list[Entry]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "group": e.group,
                "head": e.head,
                "seed": e.seed,
                "accuracy": e.accuracy,
                "faithfulness": e.faithfulness,
                "faithfulness status": e.faithfulness_status or "",
                "exit saves MACs (≤ 1 pt, measured)": e.compute_saved,
                "path": str(e.path),
            }
            for e in entries
            if e.error is None
        ]
    )


def example_images(checkpoint_dir: str | Path) -> list[Path]:
    """Bundled example images: ``<checkpoint>/examples/`` or the setting's shared ``../examples/``.

    Only regular files whose real path (:func:`laya.paths.canonical_path`) stays inside the setting's
    folder: a linked example cannot show a server file."""
    checkpoint_dir = Path(checkpoint_dir)
    setting = [checkpoint_dir.parent]
    for folder in (checkpoint_dir / "examples", checkpoint_dir.parent / "examples"):
        if folder.is_dir() and inside(folder, setting):
            return sorted(
                canonical_path(p)
                for p in folder.iterdir()
                if p.suffix.lower() in EXAMPLE_SUFFIXES and inside(p, setting) and p.is_file()
            )
    return []


def read_example(path: Path) -> bytes:
    """The bytes of a bundled example image (a path of :func:`example_images`), its size checked before a byte is
    read (:func:`laya.model.attached_files.read_bytes`): at most :data:`laya.data.images.MAX_BYTES`, the limit an
    upload has.

    Raises:
        ImageError: an example over the limit or unreadable (its message names the file, never its server path).
    """
    try:
        return read_bytes(path, path.name, MAX_BYTES)
    except AttachedFileError as error:
        raise ImageError(str(error)) from None


def group_entries(entries: Sequence[Entry]) -> dict[str, list[Entry]]:
    """Readable entries by group (dataset · backbone), in catalog order."""
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry.error is None:
            groups.setdefault(entry.group, []).append(entry)
    return groups


__all__ = [
    "Entry",
    "backbone_label",
    "catalog_table",
    "describe",
    "example_images",
    "find_checkpoints",
    "group_entries",
    "read_example",
]
