"""A fixed sample of test inputs with their per-input arrays and thumbnails: what the test-set browser shows.

For a seeded, class-balanced sample of ``n`` test inputs (all of them when the split is smaller),
one backbone pass gives the hidden states and one head pass per batch gives, per input:

* ``label``, ``prediction``, ``confidence`` (max softmax) ``(n,)``;
* ``scores (n, L)``: the primary layer scores (LAYA α, ScalarMix weights, else Integrated Gradients),
  under the report's headline reduction;
* ``drops (n, L)``: leave-one-layer-out drops of p(ŷ) under the headline intervention;
* where depth analytics exist (``depth_fit.safetensors``, or a head with its own readouts):
  ``depth (n,)`` the prediction depth (1-based layer from which every readout agrees with ŷ) and
  ``detection/<score> (n,)`` every error/OOD score (higher = more suspicious).

Stored as ``sample.safetensors`` (arrays + JSON metadata, never pickled) beside the checkpoint and the
inputs themselves, at source resolution up to :data:`MAX_TILE` px, as one PNG sprite sheet
``sample_images.png`` (tiles row-major, :data:`SPRITE_COLUMNS` per row). The sample depends only on
the test labels and the seed, so the heads of a bundled setting share one sprite in the setting folder
(``../sample_images.png``), pinned by its sha256.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from PIL import Image
from safetensors import SafetensorError, safe_open
from torch import Tensor

from laya.analysis.depth.detection import detection_scores
from laya.analysis.depth.fit import DepthFit, head_pass
from laya.analysis.depth.readouts import has_own_readouts
from laya.analysis.head.ablation import leave_one_out
from laya.analysis.head.attribution import DEFAULT_REDUCTION, attributions_by_reduction, intrinsic_method
from laya.data.datasets import Images, batch_indices
from laya.data.features import hidden_states
from laya.model.attached_files import (
    MAX_UNITS,
    AttachedFileError,
    attached_file,
    field_error,
    parse_json,
    read_bytes,
    read_tensors,
    tensor_header,
)
from laya.model.checkpoint import Checkpoint, atomic_write_tensors, read_meta
from laya.model.devices import model_device
from laya.model.header import Header
from laya.model.heads import DEFAULT_MODE

SAMPLE_FILE = "sample.safetensors"
SAMPLE_IMAGES = "sample_images.png"
SAMPLE_SIZE = 1000
SPRITE_COLUMNS = 50
MAX_TILE = 64  # px; larger inputs are stored downsampled (the browser shows thumbnails, Inspect says so)
EXAMPLES_DIR = "examples"


def sample_indices(labels: Tensor, size: int = SAMPLE_SIZE, seed: int = 0) -> Tensor:
    """Sorted indices of a seeded, class-balanced sample of ``size`` inputs (every input if fewer).

    Each class gets ``size // C`` inputs (a seeded permutation of its members); what small classes
    cannot fill goes, round-robin, to the classes that still have inputs left.
    """
    labels = torch.as_tensor(labels).long()
    if len(labels) <= size:
        return torch.arange(len(labels))
    generator = torch.Generator().manual_seed(seed)
    members = [torch.nonzero(labels == c).flatten() for c in labels.unique().tolist()]
    members = [m[torch.randperm(len(m), generator=generator)] for m in members]
    quota = [0] * len(members)
    left = size
    while left:
        open_classes = [i for i, m in enumerate(members) if quota[i] < len(m)]
        share = max(1, left // len(open_classes))
        for i in open_classes:
            take = min(share, len(members[i]) - quota[i], left)
            quota[i] += take
            left -= take
            if not left:
                break
    return torch.cat([m[:q] for m, q in zip(members, quota)]).sort().values


def primary_method(checkpoint: Checkpoint) -> str:
    """The head's intrinsic layer scores, else Integrated Gradients (as the report's primary method)."""
    return intrinsic_method(checkpoint.model.head) or "integrated_gradients"


def sample_arrays(
    checkpoint: Checkpoint,
    data: Images,
    indices: Tensor,
    mode: str | None = None,
    reduction: str = DEFAULT_REDUCTION,
    fit: DepthFit | None = None,
    batch_size: int = 256,
    ig_steps: int = 32,
    seed: int = 0,
) -> dict[str, Tensor]:
    """The per-input arrays of the module docstring for ``data[indices]`` (CPU tensors)."""
    head = checkpoint.model.head
    mode = mode or (DEFAULT_MODE if DEFAULT_MODE in head.modes else head.modes[0])
    if mode not in head.modes:
        raise ValueError(f"ablation mode {mode!r} does not apply to this head; it has {list(head.modes)}")
    method = primary_method(checkpoint)
    subset = data.subset(indices)
    device = model_device(head)
    hidden = [h.to(device) for h in hidden_states(checkpoint.model.backbone, checkpoint.preprocess, subset, batch_size)]
    parts: dict[str, list[Tensor]] = {}
    for b, rows in enumerate(batch_indices(len(subset), batch_size)):
        h = [x[rows.to(device)] for x in hidden]
        with torch.inference_mode():
            out = head(h)
        probs = torch.softmax(out.logits.float(), -1)
        prediction = probs.argmax(-1)  # as evaluate's: argmax of the logits
        scores = attributions_by_reduction(
            head, h, method, prediction, out.layer_scores, ig_steps, seed * 1_000_003 + b, [reduction]
        )[reduction]
        parts.setdefault("prediction", []).append(prediction)
        parts.setdefault("confidence", []).append(probs.amax(-1))
        parts.setdefault("scores", []).append(scores.float())
        parts.setdefault("drops", []).append(leave_one_out(head, h, mode).drops.float())
    arrays = {k: torch.cat(v).cpu() for k, v in parts.items()}
    arrays |= {"index": indices.long(), "label": subset.labels.long()}
    if fit is not None or has_own_readouts(head, hidden):
        passed = head_pass(checkpoint, hidden, fit.probes if fit else None)
        arrays["depth"] = passed.readouts.depth.long().cpu()
        arrays |= {f"detection/{k}": v.float().cpu() for k, v in passed.scores(fit).items()}
    else:  # Concat/LastLayer before `laya depth` fitted their probes: only the final-layer scores
        with torch.inference_mode():
            logits = torch.cat([head([x[r.to(device)] for x in hidden]).logits for r in batch_indices(len(subset), 1024)])
        arrays |= {f"detection/{k}": v.float().cpu() for k, v in detection_scores(logits).items()}
    return {k: v.contiguous() for k, v in arrays.items()}


def _tiles(data: Images, indices: Tensor) -> np.ndarray:
    """``uint8 (n, t, t, C)`` thumbnails (source size, at most :data:`MAX_TILE` px)."""
    first = data.image(int(indices[0]))
    C, H, W = first.shape
    side = min(max(H, W), MAX_TILE)
    tiles = []
    for i in indices.tolist():
        image = data.image(i)
        if image.shape[1:] != (side, side):
            image = torch.nn.functional.interpolate(image[None].float(), size=(side, side), mode="area")[0]
            image = image.round().clamp(0, 255).to(torch.uint8)
        tiles.append(image.permute(1, 2, 0).numpy())
    return np.stack(tiles)


def sprite_png(tiles: np.ndarray, columns: int = SPRITE_COLUMNS) -> bytes:
    """Tiles ``(n, t, t, C)`` -> one PNG, row-major, ``columns`` tiles per row (empty slots black)."""
    n, t, _, C = tiles.shape
    rows = -(-n // columns)
    sheet = np.zeros((rows * t, min(n, columns) * t, C), dtype=np.uint8)
    for k, tile in enumerate(tiles):
        r, c = divmod(k, columns)
        sheet[r * t : (r + 1) * t, c * t : (c + 1) * t] = tile
    buffer = io.BytesIO()
    Image.fromarray(sheet[:, :, 0] if C == 1 else sheet).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def write_sample(
    checkpoint: Checkpoint,
    data: Images,
    out: str | Path | None = None,
    size: int = SAMPLE_SIZE,
    seed: int = 0,
    mode: str | None = None,
    images_dir: str | Path | None = None,
    batch_size: int = 256,
) -> Path:
    """Compute and write ``sample.safetensors`` (to ``out``, default beside the checkpoint) and its sprite
    ``sample_images.png`` (to ``images_dir``, default ``out``; a bundled setting passes its folder so the
    heads share one). Uses the checkpoint's depth fit when one is stored beside it."""
    out = Path(out or checkpoint.path)
    images_dir = Path(images_dir or out)
    indices = sample_indices(data.labels, size, seed)
    fit = DepthFit.load(checkpoint.path, checkpoint)
    arrays = sample_arrays(checkpoint, data, indices, mode, fit=fit, batch_size=batch_size, seed=seed)
    tiles = _tiles(data, indices)
    png = sprite_png(tiles)
    images_dir.mkdir(parents=True, exist_ok=True)
    sprite = images_dir / SAMPLE_IMAGES
    if not _holds(images_dir, SAMPLE_IMAGES, png):
        sprite.unlink(missing_ok=True)  # a link is replaced, never written through
        sprite.write_bytes(png)
    head = checkpoint.model.head
    metadata = {
        "format": "laya-sample",
        "method": primary_method(checkpoint),
        "mode": mode or (DEFAULT_MODE if DEFAULT_MODE in head.modes else head.modes[0]),
        "reduction": DEFAULT_REDUCTION,
        "classes": list(checkpoint.meta.classes),
        "layer_names": list(checkpoint.layer_names),
        "n_test": len(data),
        "seed": seed,
        "tile": int(tiles.shape[1]),
        "source_size": int(max(data.image(int(indices[0])).shape[1:])),
        "images": os.path.relpath(sprite, out),
        "images_sha256": hashlib.sha256(png).hexdigest(),
        "weights_sha256": read_meta(checkpoint.path).get("weights", {}).get("sha256"),
        "depth_fit": fit is not None,
        "n_train": fit.info.get("n_train") if fit else None,  # the fit's training inputs and covariance estimator
        "covariance": fit.info.get("covariance") if fit else None,
    }
    atomic_write_tensors(out / SAMPLE_FILE, arrays, {"laya": json.dumps(metadata)})
    return out / SAMPLE_FILE


def _holds(folder: Path, name: str, data: bytes) -> bool:
    """Whether ``folder/name`` holds ``data``, read as untrusted (:mod:`laya.model.attached_files`): a file inside
    ``folder``, at most ``len(data)`` bytes read."""
    try:
        real = attached_file(folder, name, folder)
        return real is not None and read_bytes(real, name, len(data)) == data
    except AttachedFileError:
        return False


def refresh_sample(checkpoint: Checkpoint, out: str | Path | None = None) -> Path | None:
    """After a depth fit: rewrite the browser sample in ``out`` (default beside the checkpoint), same size, mode
    and shared sprite, now with prediction depth and every detection score; None where there is no sample."""
    out = Path(out) if out is not None else checkpoint.path
    if not (out / SAMPLE_FILE).is_file():
        return None
    old = Sample.load(out)
    return write_sample(checkpoint, checkpoint.load_data("test"), out, size=len(old.table), mode=old.meta["mode"],
                        images_dir=(out / old.meta["images"]).parent)  # fmt: skip


def class_slug(name: str) -> str:
    """A class name as example files spell it: ``"T-shirt/top"`` -> ``"t-shirt-top"`` (``<nn>-<slug>…png``)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def write_examples(sample: Sample, dest: str | Path, per_class: int = 2) -> list[Path]:
    """A few test inputs per class from the sample, ``per_class`` correct and ``per_class`` wrong (where
    there are any), as PNG: ``dest/<nn>-<class>-correct-<k>.png``, ``…-wrong-<k>-as-<predicted>.png``."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    table, classes, paths = sample.table, sample.classes, []
    for c, name in enumerate(classes):
        of_class = table[table["label"] == c]
        for outcome, rows in (("correct", of_class[of_class["correct"]]), ("wrong", of_class[~of_class["correct"]])):
            for k, (row, item) in enumerate(zip(rows.index[:per_class], rows.itertuples())):
                suffix = f"-as-{class_slug(classes[item.prediction])}" if outcome == "wrong" else ""
                path = dest / f"{c:02d}-{class_slug(name)}-{outcome}-{k + 1}{suffix}.png"
                array = sample.thumbnail(row)
                Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array).save(path)
                paths.append(path)
    return paths


@dataclass
class Sample:
    """A loaded ``sample.safetensors``: ``table`` (one row per input) and the thumbnails' sprite."""

    table: pd.DataFrame  # index, label, prediction, correct, confidence, depth?, detection/*, score/<i>, drop/<i>
    meta: dict[str, Any]
    sprite: np.ndarray | None  # (rows * t, cols * t, C) uint8, or None when the sprite file is missing

    @property
    def classes(self) -> list[str]:
        return self.meta["classes"]

    @property
    def layer_names(self) -> list[str]:
        return self.meta["layer_names"]

    @classmethod
    def load(cls, directory: str | Path) -> Sample | None:
        """The sample beside a checkpoint, or None if there is none. The file is untrusted
        (:mod:`laya.model.attached_files`): confined to the setting folder, its header's arrays checked for their
        names, shapes and kinds (one ``n`` throughout, ``L`` layers as its metadata names) before one is read, the
        metadata's fields for their kinds, the classes within the metadata's.

        Raises:
            AttachedFileError: a file that does not read or does not fit (its message names the file and field).
        """
        directory = Path(directory)
        path = attached_file(directory, SAMPLE_FILE)
        if path is None:
            return None
        header = tensor_header(path, SAMPLE_FILE)
        meta = _checked_meta(path)
        _check_arrays(header, len(meta["layer_names"]))
        tensors = read_tensors(path, SAMPLE_FILE)
        if any(bool(((tensors[k] < 0) | (tensors[k] >= len(meta["classes"]))).any()) for k in ("label", "prediction")):
            raise AttachedFileError(SAMPLE_FILE, f"{SAMPLE_FILE}: a class index outside the "
                                                 f"{len(meta['classes'])} classes")  # fmt: skip
        return cls(_table(tensors), meta, _sprite(directory, meta, len(tensors["index"])))

    def thumbnail(self, row: int) -> np.ndarray:
        """``uint8 (t, t, C)`` image of table row ``row``."""
        if self.sprite is None:
            raise ValueError("this sample has no thumbnails (sample_images.png is missing)")
        t = self.meta["tile"]
        r, c = divmod(int(row), SPRITE_COLUMNS)
        return self.sprite[r * t : (r + 1) * t, c * t : (c + 1) * t]

    def images(self) -> Tensor | None:
        """Every thumbnail as ``uint8 (n, C, t, t)`` (the inputs themselves where ``tile == source_size``), or
        None without a sprite."""
        if self.sprite is None:
            return None
        return torch.from_numpy(np.stack([self.thumbnail(r) for r in range(len(self.table))])).permute(0, 3, 1, 2)

    def png(self, row: int) -> bytes:
        """Table row ``row``'s thumbnail as PNG bytes (what Inspect opens)."""
        array = self.thumbnail(row)
        buffer = io.BytesIO()
        Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array).save(buffer, format="PNG")
        return buffer.getvalue()


FLOATS = (torch.float16, torch.float32, torch.float64)  # the table's values (numpy has no bfloat16)
META_TEXTS = ("method", "mode", "images")  # the metadata's texts a page reads
MAX_META = 1 << 20  # bytes of the metadata's JSON (a few KB: class and layer names)


def _checked_meta(path: Path) -> dict[str, Any]:
    """The ``laya`` metadata of a ``sample.safetensors`` whose header has been read (so bounded), each field a page
    reads of its kind: ``format``, ``classes`` and ``layer_names`` (texts), ``method``, ``mode``, ``images`` (texts),
    ``n_test``, ``seed``, ``tile`` (non-negative integers, a tile of 1 to :data:`MAX_TILE` px); the detection fit's
    ``n_train`` (null or a non-negative integer) and ``covariance`` (null or a text)."""
    try:
        with safe_open(str(path), "pt") as handle:
            text = (handle.metadata() or {}).get("laya", "{}")
    except (SafetensorError, OSError, ValueError) as error:
        raise AttachedFileError(SAMPLE_FILE, f"{SAMPLE_FILE} is not a readable sample file "
                                             f"({type(error).__name__})") from None  # fmt: skip
    meta = parse_json(text[:MAX_META], SAMPLE_FILE) if len(text) <= MAX_META else None
    if not isinstance(meta, dict) or meta.get("format") != "laya-sample":
        raise AttachedFileError(SAMPLE_FILE, f"{SAMPLE_FILE} is not a LAYA sample file (run `python -m laya evaluate`)")
    for field in ("classes", "layer_names"):
        value = meta.get(field)
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_UNITS or not all(isinstance(v, str)
                                                                                      for v in value):  # fmt: skip
            raise field_error(SAMPLE_FILE, field, value, f"must be a list of 1 to {MAX_UNITS} texts")
    for field in META_TEXTS:
        if not isinstance(meta.get(field), str):
            raise field_error(SAMPLE_FILE, field, meta.get(field), "must be a text")
    for field, high in (("n_test", 2**63 - 1), ("seed", 2**63 - 1), ("tile", MAX_TILE)):
        if type(meta.get(field)) is not int or not 0 <= meta[field] <= high:
            raise field_error(SAMPLE_FILE, field, meta.get(field), f"must be an integer in [0, {high}]")
    n_train, covariance = meta.get("n_train"), meta.get("covariance")  # the detection fit's, where there is one
    if n_train is not None and (type(n_train) is not int or not 0 <= n_train <= 2**63 - 1):
        raise field_error(SAMPLE_FILE, "n_train", n_train, "must be null or an integer in [0, 2**63 - 1]")
    if covariance is not None and not isinstance(covariance, str):
        raise field_error(SAMPLE_FILE, "covariance", covariance, "must be null or a text")
    return meta


def _check_arrays(header: Header, layers: int) -> None:
    """``index``, ``label``, ``prediction`` (and ``depth``) int64 ``(n,)``; ``confidence`` and ``detection/*`` floating
    ``(n,)``; ``scores``, ``drops`` floating ``(n, L)``; nothing else."""
    n = header["index"][0][0] if "index" in header and len(header["index"][0]) == 1 else -1
    expected = {k: ((n, layers) if k in ("scores", "drops") else (n,)) for k in header}
    missing = [k for k in ("index", "label", "prediction", "confidence", "scores", "drops") if k not in header]
    odd = [k for k in header if k not in ("index", "label", "prediction", "depth", "confidence", "scores", "drops")
           and not k.startswith("detection/")]  # fmt: skip
    wrong = [k for k, (shape, dtype) in header.items() if shape != expected[k] or (
        dtype != torch.int64 if k in ("index", "label", "prediction", "depth") else dtype not in FLOATS)]
    if missing or odd or wrong:
        raise AttachedFileError(SAMPLE_FILE, f"{SAMPLE_FILE}: arrays missing {missing}, unknown {odd[:4]}, or of "
                                             f"another shape or kind {[k[:40] for k in wrong[:4]]} (one n = {n}; "
                                             f"{layers} layers; int64 indices and classes, floating values)")


def _table(tensors: dict[str, Tensor]) -> pd.DataFrame:
    columns: dict[str, np.ndarray] = {k: tensors[k].numpy() for k in ("index", "label", "prediction")}
    columns["correct"] = columns["label"] == columns["prediction"]
    columns["confidence"] = tensors["confidence"].numpy()
    if "depth" in tensors:
        columns["depth"] = tensors["depth"].numpy()
    for key in sorted(k for k in tensors if k.startswith("detection/")):
        columns[key] = tensors[key].numpy()
    for kind, key in (("score", "scores"), ("drop", "drops")):
        for i in range(tensors[key].shape[1]):
            columns[f"{kind}/{i}"] = tensors[key][:, i].numpy()
    return pd.DataFrame(columns)


MAX_SPRITE_BYTES = 64 << 20  # 1,000 tiles of 64 px as PNG: about 12 MB at most
MAX_SPRITE_PIXELS = SPRITE_COLUMNS * MAX_TILE * 64 * MAX_TILE  # 64 rows of 50 tiles: 3,200 tiles


def _sprite(directory: Path, meta: dict[str, Any], n: int) -> np.ndarray | None:
    """The sprite named in ``meta`` (beside the sample or in the setting folder), if its sha256 matches; None where
    it is missing, links outside the setting folder, is over :data:`MAX_SPRITE_BYTES` or
    :data:`MAX_SPRITE_PIXELS`, does not decode or holds fewer than the ``n`` tiles of ``meta["tile"]`` px (the
    browser then shows its table without thumbnails)."""
    name = Path(meta.get("images", SAMPLE_IMAGES))
    if name.is_absolute() or any(part not in ("..", name.name) for part in name.parts) or name.parts.count("..") > 1:
        return None  # a sample file never points outside its checkpoint or setting folder
    for folder, file in ((directory, name), (directory, SAMPLE_IMAGES), (directory.parent, SAMPLE_IMAGES)):
        try:
            real = attached_file(folder, str(file), directory.parent)
        except AttachedFileError:
            continue
        try:
            data = None if real is None else read_bytes(real, SAMPLE_IMAGES, MAX_SPRITE_BYTES)
        except AttachedFileError:
            continue
        if data is None:
            continue
        if hashlib.sha256(data).hexdigest() != meta.get("images_sha256"):
            continue
        try:
            with Image.open(io.BytesIO(data)) as image:
                if image.width * image.height > MAX_SPRITE_PIXELS:
                    return None
                grey = image.mode in ("L", "1")
                array = np.asarray(image.convert("L" if grey else "RGB"))
        except (OSError, ValueError, Image.DecompressionBombError):
            return None
        t = meta["tile"]
        if n and (t < 1 or array.shape[0] < -(-n // SPRITE_COLUMNS) * t or array.shape[1] < min(n, SPRITE_COLUMNS) * t):
            return None
        return array[..., None] if grey else array
    return None


__all__ = [
    "EXAMPLES_DIR",
    "SAMPLE_FILE",
    "SAMPLE_IMAGES",
    "SAMPLE_SIZE",
    "Sample",
    "class_slug",
    "primary_method",
    "refresh_sample",
    "sample_arrays",
    "sample_indices",
    "sprite_png",
    "write_examples",
    "write_sample",
]
