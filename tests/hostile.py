"""A corpus of hostile checkpoints, generated from a good one: every case of issue 11, and more.

Each case is a function of a valid ``model.json`` record (an MLP checkpoint of the test fixtures)
returning the hostile record, and the text the refusal must contain. The library and AppTest use every case
(tests/model/test_hostile.py, tests/pages/test_app.py); the browser test of a deployment its memory cases and one
case of each other kind of refusal (tests/e2e/test_e2e_deploy.py).
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Record = dict[str, Any]


@dataclass(frozen=True)
class Case:
    name: str
    mutate: Callable[[Record], None]
    message: str  # part of the CheckpointError the case must get
    huge: bool = False  # would allocate far past 2 GB if it were built
    on_load: bool = True  # refused when the checkpoint is loaded (else when its dataset is read)


def _set(*path_and_value: Any) -> Callable[[Record], None]:
    *path, value = path_and_value

    def mutate(record: Record) -> None:
        node = record
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


def _timm(**kwargs: Any) -> Callable[[Record], None]:
    def mutate(record: Record) -> None:
        record["backbone"].update(name="timm", model="test_vit", model_kwargs=kwargs, widths=[1])

    return mutate


def _input(channels: int, size: int) -> Callable[[Record], None]:
    def mutate(record: Record) -> None:
        record["input"].update(channels=channels, size=size, mean=[0.5] * channels, std=[0.25] * channels)

    return mutate


def _vit_huge(record: Record) -> None:
    record["backbone"].update(name="timm", model="vit_huge_patch14_224", input_size=224, widths=[1])
    _input(3, 224)(record)


def _timm_at(model: str, size: int, **kwargs: Any) -> Callable[[Record], None]:
    """A timm backbone at ``size`` px (input spec to match)."""

    def mutate(record: Record) -> None:
        record["backbone"].update(name="timm", model=model, input_size=size, model_kwargs=kwargs, widths=[1])
        _input(3, size)(record)
        record["input"]["source_size"] = size

    return mutate


def _deep_mlp(record: Record) -> None:
    record["backbone"]["widths"] = [20_000] * 60


CASES: tuple[Case, ...] = (
    Case("mlp-100-layers-of-20000", _set("backbone", "widths", [20_000] * 100), "at most 64 entries", huge=True),
    Case("mlp-60-layers-of-20000", _deep_mlp, "over the limit of 500,000,000 (LAYA_MAX_PARAMS)", huge=True),
    Case("mlp-width-200000", _set("backbone", "widths", [200_000, 200_000]), "backbone.widths[0] = 200000", huge=True),
    Case("d-star-3e6", _set("head", "d_star", 3_000_000), "head.d_star = 3000000: must be in", huge=True),
    Case("timm-depth-2000", _timm(depth=2000), "model_kwargs.depth = 2000: must be in [1, 64]", huge=True),
    Case("input-size-60000", _set("input", "size", 60_000), "input.size = 60000: must be in", huge=True),
    Case("vit-huge", _vit_huge, "(LAYA_MAX_PARAMS)", huge=True),
    Case("format-version-string", _set("format_version", "1"), "format_version = '1': must be an integer"),
    Case("in-channels-string", _set("backbone", "in_channels", "3"), "backbone.in_channels = '3': must be"),
    Case("d-star-string", _set("head", "d_star", "8"), "head.d_star = '8': must be an integer"),
    Case("input-size-string", _set("backbone", "input_size", "8"), "backbone.input_size = '8': must be"),
    Case("weights-string", _set("weights", "model.safetensors"), "weights = 'model.safetensors': must be an object"),
    Case("channels-mismatch", _input(1, 8), "input.channels = 1: must equal the backbone's in_channels (3)"),
    Case("size-mismatch", _input(3, 32), "input.size = 32: must equal the backbone's input_size (8)"),
    Case("channels-2", _input(2, 8), "input.channels = 2: must be one of 1, 3"),
    Case("timm-unknown-kwarg", _timm(frobnicate=1), "model_kwargs.frobnicate = 1: not an allowed argument"),
    Case("timm-channels-string", _timm(channels="64"), "model_kwargs.channels = '64': must be a list of integers"),
    Case("timm-channels-many", _timm(channels=[8] * 9), "model_kwargs.channels = [8, 8, 8, 8, 8, 8, 8, 8, 8]: must have at least 1 and at most 8"),
    Case("timm-channels-huge", _timm(channels=[64, 100_000]), "model_kwargs.channels[1] = 100000: must be in",
         huge=True),
    Case("timm-checkpoint-path", _timm(checkpoint_path="/etc/passwd"), "names files, weights, URLs or downloads"),
    Case("timm-pretrained", _timm(pretrained=True), "model_kwargs.pretrained = True: names files"),
    Case(
        "timm-pretrained-cfg-overlay-url",
        _timm(pretrained_cfg_overlay={"url": "http://127.0.0.1:8799/x"}),
        "model_kwargs.pretrained_cfg_overlay",
    ),
    Case("timm-bad-depth-for-model", _timm(depth=0), "model_kwargs.depth = 0"),
    Case("model-kwargs-null", _set("backbone", "model_kwargs", None), "backbone.model_kwargs = None: must be an object"),
    Case("weights-server-file", _set("backbone", "weights", "/proc/self/environ"), "backbone.weights = '/proc/self/"),
    Case("weights-parent-file", _set("backbone", "weights", "../../../etc/passwd"), "must be a named source"),
    Case("weights-timm-download", _set("backbone", "weights", "timm"), "downloads are not allowed"),
    Case("tau-nan", _set("head", "tau", math.nan), "head.tau = nan: must be a finite number"),
    Case("tau-inf", _set("head", "tau", math.inf), "head.tau = inf: must be a finite number"),
    Case("tau-negative", _set("head", "tau", -1.0), "head.tau = -1.0: must be in"),
    Case("mean-nan", _set("input", "mean", [math.nan, 0.5, 0.5]), "input.mean[0] = nan: must be a finite number"),
    Case("std-zero", _set("input", "std", [0.0, 0.5, 0.5]), "input.std[0] = 0.0: must be in"),
    Case("classes-one", _set("classes", ["only"]), "classes = ['only']: must have at least 2"),
    Case("unknown-key", _set("backbone", "hidden", 4), "backbone.hidden = 4: unknown key"),
    Case("not-an-object", _set("head", [1, 2]), "head = [1, 2]: must be an object"),
    Case("dataset-server-folder", _set("dataset", "/etc"), "dataset = '/etc': must be a known dataset", on_load=False),
    # issue 17, hole 1: ``~`` was checked literally and then expanded when opened
    Case("weights-tilde-environ", _set("backbone", "weights", "~/../proc/self/environ"), "starts with '~'"),
    Case("weights-tilde-passwd", _set("backbone", "weights", "~/../etc/passwd"), "starts with '~'"),
    Case("weights-tilde-missing", _set("backbone", "weights", "~/../etc/no-such-file"), "starts with '~'"),
    Case("weights-tilde-home", _set("backbone", "weights", "~"), "starts with '~'"),
    Case("weights-tilde-user", _set("backbone", "weights", "~root/.bashrc"), "starts with '~'"),
    Case("weights-nul", _set("backbone", "weights", "a\x00b"), "without NUL"),
    Case("dataset-tilde", _set("dataset", "~/../etc"), "starts with '~'", on_load=False),
    # hole 2: buffers (a BEiT's relative-position index is a non-persistent int64 buffer of tokens**2),
    # attention temporaries and CPU cost per image
    Case(
        "beit-1024-patch4-buffers",
        _timm_at("beit_base_patch16_224", 1024, img_size=1024, patch_size=4, embed_dim=16, depth=1, num_heads=1),
        "4,295,098,401 in buffers",
        huge=True,
    ),
    Case(
        "beit-1024-patch8-temporaries",
        _timm_at("beit_base_patch16_224", 1024, img_size=1024, patch_size=8, embed_dim=16, depth=1, num_heads=1),
        "(LAYA_MAX_ACTIVATIONS; float32 elements at the peak",
        huge=True,
    ),
    Case(
        "vit-65536-tokens",
        _timm_at("test_vit", 1024, img_size=1024, patch_size=4),
        "(LAYA_MAX_ACTIVATIONS; float32 elements at the peak",
        huge=True,
    ),
    Case("resnet101-1024-cpu-cost", _timm_at("resnet101", 1024), "326.0 GFLOP per input", huge=True),
    # hole 3: a model far larger than its 20 KB weights file is refused from the file's header, before building
    # hole 9: fields that passed validation and failed later with the generic incident message
    Case("seed-4000-digits", _set("seed", 10**4000), "integer of 4,001 digits"),
    Case("metrics-huge-int", _set("metrics", {"n": -(10**60)}), "integer of 61 digits"),
    Case("classes-lone-surrogate", _set("classes", ["blue", "\ud800", "red"]), "classes[1] = '\\ud800': must be valid Unicode"),
    Case("dataset-lone-surrogate", _set("dataset", "x\udcff"), "dataset = 'x\\udcff': must be valid Unicode"),
    Case("layer-name-lone-surrogate", _set("layer_names", ["a", "\udfff", "c"]), "must be valid Unicode"),
    # hole 13: uploads are resized to source_size before anything else
    Case("source-size-4096", _set("input", "source_size", 4096), "input.source_size = 4096: must be in [1, 1024]"),
    Case("mlp-22000-tiny-weights", _set("backbone", "widths", [22_000, 22_000, 8]), "wrong shape", huge=True),
)


def hostile_record(good: Record, case: Case) -> Record:
    record = copy.deepcopy(good)
    case.mutate(record)
    return record


def write_case(good_dir: Path, case: Case, dest: Path) -> Path:
    """A copy of the checkpoint ``good_dir`` with ``case``'s ``model.json`` (weights unchanged) in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    record = hostile_record(json.loads((good_dir / "model.json").read_text()), case)
    (dest / "model.json").write_text(json.dumps(record))
    (dest / "model.safetensors").write_bytes((good_dir / "model.safetensors").read_bytes())
    return dest


def write_weights(good_dir: Path, dest: Path, change: Callable[[dict], None], dtype: str | None = None) -> Path:
    """A copy of ``good_dir`` whose weights ``change`` edits in place (``model.json`` re-hashed, its
    ``weights.dtype`` set to ``dtype`` if given)."""
    from safetensors.torch import load_file, save_file

    from laya.model.checkpoint import sha256_file

    dest.mkdir(parents=True, exist_ok=True)
    state = load_file(str(good_dir / "model.safetensors"))
    change(state)
    save_file(state, str(dest / "model.safetensors"), metadata={"format": "laya-checkpoint"})
    record = json.loads((good_dir / "model.json").read_text())
    record["weights"]["sha256"] = sha256_file(dest / "model.safetensors")
    if dtype is not None:
        record["weights"]["dtype"] = dtype
    (dest / "model.json").write_text(json.dumps(record))
    return dest


def write_nan_weights(good_dir: Path, dest: Path) -> str:
    """A copy of ``good_dir`` whose classifier weight holds one NaN (``model.json`` re-hashed); returns the tensor's name."""
    key = ""

    def poison(state: dict) -> None:
        nonlocal key
        key = next(k for k in state if k.startswith("head.classifier") and k.endswith("weight"))
        state[key][0, 0] = float("nan")

    write_weights(good_dir, dest, poison)
    return key


def write_scaled_weights(good_dir: Path, dest: Path, factor: float = 1e18) -> Path:
    """A copy of ``good_dir`` with every floating weight multiplied by ``factor`` (finite: it loads; 1e18 makes
    the tiny MLP's logits overflow float32)."""

    def scale(state: dict) -> None:
        for key, tensor in state.items():
            if tensor.is_floating_point():
                state[key] = tensor * factor

    return write_weights(good_dir, dest, scale)


__all__ = ["CASES", "Case", "hostile_record", "write_case", "write_nan_weights", "write_scaled_weights",
           "write_weights"]  # fmt: skip


# ---------------------------------------------------------------- an attached setting's stored files

BUNDLED_SETTING = Path(__file__).resolve().parents[1] / "models" / "cifar10-resnet18-half"
LENS_FILES = ("tuned_lens.json", "tuned_lens.safetensors")
REPORT_FILES = ("network.json", "network.safetensors")


def attached_setting(dest: Path, files: tuple[str, ...] = LENS_FILES + REPORT_FILES) -> Path:
    """``dest/setting/own`` holding copies of the bundled own head's ``files``; returns that folder."""
    own = dest / "setting" / "own"
    own.mkdir(parents=True)
    for name in files:
        shutil.copy(BUNDLED_SETTING / "own" / name, own / name)
    return own


@dataclass(frozen=True)
class FileCase:
    """A hostile variant of one stored file: ``write`` breaks it in an own folder; ``message`` is part of the
    :class:`~laya.model.attached_files.AttachedFileError` it must get, which names ``file``."""

    name: str
    file: str
    write: Callable[[Path], None]
    message: str


def _edit(file: str, change: Callable[[Any], Any]) -> Callable[[Path], None]:
    def write(own: Path) -> None:
        record = json.loads((own / file).read_text())
        (own / file).write_text(json.dumps(change(record), allow_nan=True))

    return write


def _text(file: str, text: str | bytes) -> Callable[[Path], None]:
    def write(own: Path) -> None:
        (own / file).write_bytes(text if isinstance(text, bytes) else text.encode())

    return write


def _missing(file: str) -> Callable[[Path], None]:
    return lambda own: (own / file).unlink()


def _linked_out(file: str) -> Callable[[Path], None]:
    """The file moved outside the setting folder (a valid copy, so only the link is wrong) and linked to."""

    def write(own: Path) -> None:
        outside = own.parent.parent / "outside"
        outside.mkdir(exist_ok=True)
        shutil.move(own / file, outside / file)
        (own / file).symlink_to(outside / file)

    return write


def _with(**fields: Any) -> Callable[[Any], Any]:
    return lambda record: record | fields


def _row(change: Callable[[dict], Any]) -> Callable[[Any], Any]:
    def edit(record: Any) -> Any:
        record["agreement"][0] = change(record["agreement"][0])
        return record

    return edit


def _table_row(record: Any) -> Any:
    record["tables"]["lens_prob/true"]["data"][0] = [0.5]
    return record


def _lesion(**change: Any) -> Callable[[Any], Any]:
    """The record with a well-formed ``lesion`` section for its units, the fields in ``change`` replaced (a callable
    gets the section)."""

    def edit(record: Any) -> Any:
        units = record["units"]
        row = {"intervention": "skip", "unit": units[1], "method": "skip", "accuracy": 0.5, "low": 0.4, "high": 0.6,
               "drop": 0.1, "drop_low": 0.0, "drop_high": 0.2, "p_value": 0.05}
        table = {"index": ["all"], "columns": ["intact", *units, "n"], "data": [[0.6] * (len(units) + 1) + [10]]}
        lesion = {"n": 10, "intact": [0.6, 0.5, 0.7], "single": [row], "classes": {"skip": table},
                  "curve": [{"k": 0, "draws": 1, "mean": 0.6, "sd": 0.0, "min": 0.6, "max": 0.6}]}
        return record | {"lesion": lesion | {k: v(lesion) if callable(v) else v for k, v in change.items()}}

    return edit


def _fit(**fields: Any) -> Callable[[Any], Any]:
    """A ``tuned_lens.json`` record with these fields of its ``fit`` replaced."""
    return lambda record: record | {"fit": record["fit"] | fields}


def _lens(**change: Any) -> Callable[[Any], Any]:
    """A ``network.json`` record with these fields of its ``lens`` section replaced (a callable gets the field)."""
    return lambda record: record | {"lens": record["lens"] | {k: v(record["lens"][k]) if callable(v) else v
                                                               for k, v in change.items()}}


def _lens_row(change: Callable[[dict], Any]) -> Callable[[Any], Any]:
    def edit(record: Any) -> Any:
        record["lens"]["units"][0] = change(record["lens"]["units"][0])
        return record

    return edit


def with_gradcam(**change: Any) -> Callable[[Any], Any]:
    """The record with a well-formed ``gradcam`` section for its units (one unit's rows, every difference a tie, so
    no unit is chosen), the fields in ``change`` replaced (a callable gets the section)."""

    def edit(record: Any) -> Any:
        units = record["units"]
        rows = [{"unit": units[1], "metric": metric, "mean": 0.5, "low": 0.4, "high": 0.6, "random": 0.5,
                 "random_low": 0.4, "random_high": 0.6, "diff": 0.0, "diff_low": -0.1, "diff_high": 0.1,
                 "p_value": 1.0, "holm_p": 1.0} for metric in ("insertion", "road", "deletion")]
        costs = [{"unit": u, "h": 4, "w": 4, "seconds": 0.01, "x_forward": 2.0} for u in units]
        gradcam = {"n": 10, "seed": 0, "rows": rows, "units": costs, "forward_seconds": 0.005, "all_seconds": 0.01,
                   "chosen": None}
        return record | {"gradcam": gradcam | {k: v(gradcam) if callable(v) else v for k, v in change.items()}}

    return edit


def beating_rows(gradcam: dict) -> list[dict]:
    """The section's rows with its first row beating random (a positive insertion difference, Holm p 0)."""
    return [gradcam["rows"][0] | {"diff": 0.2, "diff_low": 0.1, "diff_high": 0.3, "p_value": 0.0, "holm_p": 0.0},
            *gradcam["rows"][1:]]


def _class_rows(**change: Any) -> Callable[[Any], Any]:
    """The record with a well-formed lesion section whose ``by_class`` holds one row of its first class, the fields in
    ``change`` replaced in that row."""

    def edit(record: Any) -> Any:
        row = {"intervention": "skip", "class": record["classes"][0], "unit": record["units"][1], "n": 2,
               "accuracy": 0.5, "low": 0.0, "high": 1.0, "drop": 0.5, "drop_low": 0.0, "drop_high": 1.0,
               "p_value": 0.5} | change
        return _lesion(by_class=[row])(record)

    return edit


NESTED = "[" * 100_000 + "]" * 100_000
LENS_CASES = [
    FileCase("width 6000", "tuned_lens.safetensors", _edit("tuned_lens.json", _with(width=6000)),
             "does not fit its config"),
    FileCase("200,000 units", "tuned_lens.json",
             _edit("tuned_lens.json", _with(units=[f"layer{i}" for i in range(200_000)], dims=[64] * 200_000)),
             "is over 1,048,576 bytes"),
    FileCase("width 10**12", "tuned_lens.json", _edit("tuned_lens.json", _with(width=10**12)),
             "width = 1000000000000: must be an integer in [1, 65536]"),
    FileCase("units an int", "tuned_lens.json", _edit("tuned_lens.json", _with(units=3)), "units = 3: must be a list"),
    FileCase("dims of another length", "tuned_lens.json", _edit("tuned_lens.json", _with(dims=[64])), "dims = [64]"),
    FileCase("null file", "tuned_lens.json", _text("tuned_lens.json", "null"), "must be a JSON object"),
    FileCase("deeply nested", "tuned_lens.json", _text("tuned_lens.json", NESTED), "nested too deeply"),
    FileCase("not JSON", "tuned_lens.json", _text("tuned_lens.json", b"\xff{"), "is not valid JSON"),
    FileCase("missing weights", "tuned_lens.safetensors", _missing("tuned_lens.safetensors"), "is missing"),
    FileCase("corrupt weights", "tuned_lens.safetensors", _text("tuned_lens.safetensors", b"\x10\x00" * 40),
             "is not a valid safetensors file"),
    FileCase("config linked out", "tuned_lens.json", _linked_out("tuned_lens.json"), "links outside"),
    FileCase("weights linked out", "tuned_lens.safetensors", _linked_out("tuned_lens.safetensors"), "links outside"),
    # issue 43: the fit summary was read unchecked (torch.tensor(fit["constant"]) raised a TypeError in `laya network`)
    FileCase("a text in the fit's constant", "tuned_lens.json", _edit("tuned_lens.json", _fit(constant=["x"] * 10)),
             "fit.constant = ['x', 'x',"),
    FileCase("a nested fit constant", "tuned_lens.json", _edit("tuned_lens.json", _fit(constant=[[0.1] * 10])),
             "must be 10 finite non-negative numbers, one per class"),
    FileCase("a fit constant of another length", "tuned_lens.json", _edit("tuned_lens.json", _fit(constant=[0.5] * 2)),
             "fit.constant = [0.5, 0.5]"),
    FileCase("a fit of a list", "tuned_lens.json", _edit("tuned_lens.json", _with(fit=[1])), "fit = [1]"),
    FileCase("epochs run of another length", "tuned_lens.json", _edit("tuned_lens.json", _fit(epochs_run=[1])),
             "fit.epochs_run = [1]: must be one non-negative integer per unit (9)"),
    FileCase("a text held-out share", "tuned_lens.json", _edit("tuned_lens.json", _with(held_out="0.2")),
             "held_out = '0.2': must be a share in [0, 1)"),
    FileCase("a fractional patience", "tuned_lens.json", _edit("tuned_lens.json", _with(patience=2.5)),
             "patience = 2.5: must be a non-negative integer"),
    FileCase("a NaN learning rate", "tuned_lens.json", _edit("tuned_lens.json", _with(lr=math.nan)),
             "lr = nan: must be a finite number"),
]  # fmt: skip
REPORT_CASES = [
    FileCase("a list for the tables", "network.json", _edit("network.json", _with(tables=[])), "tables = []"),
    FileCase("a misshapen table row", "network.json", _edit("network.json", _table_row), "tables['lens_prob/true']"),
    FileCase("NaN inputs in an agreement row", "network.json",
             _edit("network.json", _row(lambda r: r | {"n": math.nan})), "agreement[0]"),
    FileCase("a list for an agreement row", "network.json", _edit("network.json", _row(lambda r: [1, 2])),
             "agreement[0] = [1, 2]"),
    FileCase("agreement not a list", "network.json", _edit("network.json", _with(agreement={"a": 1})), "agreement ="),
    FileCase("units an int", "network.json", _edit("network.json", _with(units=3)), "units = 3"),
    FileCase("residual of texts", "network.json", _edit("network.json", _with(residual=["x"] * 9)), "residual ="),
    FileCase("null file", "network.json", _text("network.json", "null"), "must be a JSON object"),
    FileCase("deeply nested", "network.json", _text("network.json", NESTED), "nested too deeply"),
    FileCase("shapes of another sample", "network.safetensors",
             _edit("network.json", lambda r: r | {"shapes": r["shapes"] | {"drops": [100, 9]}}), "do not fit its"),
    FileCase("missing arrays", "network.safetensors", _missing("network.safetensors"), "is missing"),
    FileCase("corrupt arrays", "network.safetensors", _text("network.safetensors", b"\x10\x00" * 40),
             "is not a valid safetensors file"),
    FileCase("report linked out", "network.json", _linked_out("network.json"), "links outside"),
    FileCase("a list for the lesion", "network.json", _edit("network.json", _with(lesion=[])), "lesion = []"),
    FileCase("NaN inputs in the lesion", "network.json", _edit("network.json", _lesion(n=math.nan)), "lesion.n"),
    FileCase("a null intact accuracy (found by the fuzzer: the lesion chart's line at it raised a TypeError)",
             "network.json", _edit("network.json", _lesion(intact=[None, 0.5, 0.7])), "lesion.intact = [None, 0.5"),
    FileCase("a lesion row of another unit", "network.json",
             _edit("network.json", _lesion(single=lambda l: [l["single"][0] | {"unit": "nowhere"}])),
             "lesion.single = ['nowhere']"),
    FileCase("a text accuracy in a lesion row", "network.json",
             _edit("network.json", _lesion(single=lambda l: [l["single"][0] | {"accuracy": "high"}])),
             "lesion.single[0]"),
    FileCase("a negative k on the lesion curve", "network.json",
             _edit("network.json", _lesion(curve=lambda l: [l["curve"][0] | {"k": -1}])), "lesion.curve[0]"),
    FileCase("a lesion table of other columns", "network.json",
             _edit("network.json", _lesion(classes={"skip": {"index": ["all"], "columns": ["n"], "data": [[1]]}})),
             "lesion.classes['skip']"),
    FileCase("a lesion row of another intervention", "network.json",
             _edit("network.json", _lesion(single=lambda l: [l["single"][0] | {"intervention": "zap"}])),
             "lesion.single = ['zap']: interventions must be among"),
    # issue 43: the lens section was only checked to be an object, and Class-wise read it unchecked
    FileCase("a lens row without its agreement", "network.json",
             _edit("network.json", _lens_row(lambda r: {k: v for k, v in r.items() if k != "agreement"})),
             "lens.units[0]"),
    FileCase("a text agreement in the lens", "network.json",
             _edit("network.json", _lens_row(lambda r: r | {"agreement": "high"})), "lens.units[0]"),
    FileCase("lens rows of other units", "network.json",
             _edit("network.json", _lens_row(lambda r: r | {"unit": "nowhere"})), "lens.units = ['nowhere'"),
    FileCase("a lens fit of a list", "network.json", _edit("network.json", _lens(fit=[1, 2])), "lens.fit = [1, 2]"),
    FileCase("a lens fit's epochs of texts", "network.json",
             _edit("network.json", _lens(fit=lambda f: f | {"epochs_run": ["x"] * 9})), "lens.fit.epochs_run"),
    FileCase("a lens fit's constant of texts", "network.json",
             _edit("network.json", _lens(fit=lambda f: f | {"constant": "flat"})), "lens.fit.constant = 'flat'"),
    FileCase("a lens of unknown fields", "network.json", _edit("network.json", _lens(extra=1)), "lens = {"),
    FileCase("a lesion class row of another class", "network.json",
             _edit("network.json", _class_rows(**{"class": "nowhere"})), "lesion.by_class = ['nowhere']"),
    FileCase("a lesion class row of another unit", "network.json", _edit("network.json", _class_rows(unit="x")),
             "lesion.by_class = ['x']"),
    FileCase("NaN inputs in a lesion class row", "network.json", _edit("network.json", _class_rows(n=math.nan)),
             "lesion.by_class[0]"),
    FileCase("a text drop in a lesion class row", "network.json", _edit("network.json", _class_rows(drop="all")),
             "lesion.by_class[0]"),
    FileCase("lesion class rows not a list", "network.json", _edit("network.json", _lesion(by_class={"a": 1})),
             "lesion.by_class ="),
    FileCase("a list for the Grad-CAM section", "network.json", _edit("network.json", _with(gradcam=[])),
             "gradcam = []"),
    FileCase("an unknown field in the Grad-CAM section", "network.json", _edit("network.json", with_gradcam(extra=1)),
             "gradcam = "),
    FileCase("NaN images in the Grad-CAM section", "network.json", _edit("network.json", with_gradcam(n=math.nan)),
             "gradcam.n"),
    FileCase("a text time in the Grad-CAM section", "network.json",
             _edit("network.json", with_gradcam(all_seconds="fast")), "gradcam.all_seconds"),
    FileCase("a Grad-CAM row of another unit", "network.json",
             _edit("network.json", with_gradcam(rows=lambda g: [g["rows"][0] | {"unit": "nowhere"}])),
             "gradcam.rows = ['nowhere insertion']"),
    FileCase("a Grad-CAM row of another metric", "network.json",
             _edit("network.json", with_gradcam(rows=lambda g: [g["rows"][0] | {"metric": "pointing game"}])),
             "gradcam.rows"),
    FileCase("a Grad-CAM row twice", "network.json",
             _edit("network.json", with_gradcam(rows=lambda g: [g["rows"][0], g["rows"][0]])), "each pair once"),
    FileCase("a text difference in a Grad-CAM row", "network.json",
             _edit("network.json", with_gradcam(rows=lambda g: [g["rows"][0] | {"diff": "large"}])), "gradcam.rows[0]"),
    FileCase("Grad-CAM costs of units in another order", "network.json",
             _edit("network.json", with_gradcam(units=lambda g: g["units"][::-1])), "gradcam.units"),
    FileCase("a negative Grad-CAM grid", "network.json",
             _edit("network.json", with_gradcam(units=lambda g: [g["units"][0] | {"h": -1}, *g["units"][1:]])),
             "gradcam.units[0]"),
    FileCase("a chosen unit its rows do not choose", "network.json",
             _edit("network.json", with_gradcam(chosen=lambda g: g["units"][0]["unit"])),
             "gradcam.chosen = 'bn1': must be the unit its rows choose (None)"),
    FileCase("no unit chosen where one beats random", "network.json",
             _edit("network.json", with_gradcam(rows=beating_rows)),
             "gradcam.chosen = None: must be the unit its rows choose"),
]  # fmt: skip


# ---------------------------------------------------------------- every other file a setting stores beside a head
# (issue 43): the files a page reads back, each read by its loader as untrusted input


def _sample(change: Callable[[dict, dict], Any]) -> Callable[[Path], None]:
    """``sample.safetensors`` rewritten with ``change(tensors, meta)`` applied (in place)."""

    def write(own: Path) -> None:
        from safetensors import safe_open
        from safetensors.torch import load_file, save_file

        with safe_open(str(own / "sample.safetensors"), "pt") as handle:
            meta = json.loads(handle.metadata()["laya"])
        tensors = load_file(str(own / "sample.safetensors"))
        change(tensors, meta)
        save_file(tensors, str(own / "sample.safetensors"), {"laya": json.dumps(meta)})

    return write


def _csv(file: str, change: Callable[[Any], Any]) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        import pandas as pd

        change(pd.read_csv(folder / file)).to_csv(folder / file, index=False)

    return write


def _per_input(own: Path) -> None:
    import torch
    from safetensors.torch import save_file

    save_file({"correct": torch.ones(4), "faithfulness/x": torch.zeros(4, 2)}, str(own / "per_input.safetensors"))


def _set_meta(**fields: Any) -> Callable[[dict, dict], None]:
    return lambda tensors, meta: meta.update(fields)


def _set_tensor(name: str, make: Callable[[Any], Any]) -> Callable[[dict, dict], None]:
    def change(tensors: dict, meta: dict) -> None:
        tensors[name] = make(tensors[name])

    return change


COMPARISON = {"mode": "mean", "metric": "spearman_eps", "a": "saliency", "reduction_a": "signed", "b": "random",
              "reduction_b": "signed", "difference": {"estimate": 0.1, "low": 0.0, "high": 0.2}, "p_value": 0.04,
              "tie": False}  # fmt: skip


def _changed(*path_and_value: Any) -> Callable[[Any], Any]:
    """A record with the field at ``path`` set to ``value`` (the last argument), in place."""

    def edit(record: Any) -> Any:
        _set(*path_and_value)(record)
        return record

    return edit


def _exit_run(change: Callable[[dict], Any] | None = None, **fields: Any) -> Callable[[Any], Any]:
    """An ``exits.json`` record with its first run changed: ``change`` applied, or ``fields`` set."""

    def edit(record: Any) -> Any:
        run = record["runs"][0]
        record["runs"][0] = change(run) if change else run | fields
        return record

    return edit


@dataclass(frozen=True)
class StoredCase:
    """A hostile variant of a file a setting stores: ``write`` breaks it in a copy of the bundled own head's folder
    (``own``; its setting folder is ``own.parent``); ``read`` is the loader the pages use, called on ``own``;
    ``message`` is part of the AttachedFileError it must raise, which names ``file``."""

    name: str
    file: str
    write: Callable[[Path], None]
    read: str  # "sample", "depth", "depth_fit", "report", "per_input", "lens_csv", "class_profiles", "model_card",
    # or "exits"
    message: str


STORED_CASES = [
    StoredCase("a sample's mode a number", "sample.safetensors", _sample(_set_meta(mode=3)), "sample",
               "sample.safetensors: mode = 3: must be a text"),
    StoredCase("a sample without its classes", "sample.safetensors", _sample(_set_meta(classes=None)), "sample",
               "classes = None: must be a list of 1 to 1024 texts"),
    StoredCase("a sample's n_test a text", "sample.safetensors", _sample(_set_meta(n_test="all")), "sample",
               "n_test = 'all': must be an integer"),
    StoredCase("a sample's tile of 10**6 px", "sample.safetensors", _sample(_set_meta(tile=10**6)), "sample",
               "tile = 1000000: must be an integer in [0, 64]"),
    StoredCase("sample scores of another width", "sample.safetensors",
               _sample(_set_tensor("scores", lambda t: t[:, :2].contiguous())), "sample", "another shape or kind"),
    StoredCase("sample scores in bfloat16", "sample.safetensors",
               _sample(_set_tensor("scores", lambda t: t.bfloat16())), "sample", "another shape or kind ['scores']"),
    StoredCase("a sample label of another class", "sample.safetensors",
               _sample(_set_tensor("label", lambda t: t + 100)), "sample", "a class index outside the 10 classes"),
    StoredCase("a sample without its confidences", "sample.safetensors",
               _sample(lambda tensors, meta: tensors.pop("confidence")), "sample",
               "sample.safetensors: arrays missing ['confidence']"),  # Browse raised a KeyError (the fuzzer's find)
    StoredCase("a corrupt sample", "sample.safetensors", _text("sample.safetensors", b"\x10\x00" * 40), "sample",
               "is not a valid safetensors file"),
    StoredCase("a sample linked out", "sample.safetensors", _linked_out("sample.safetensors"), "sample",
               "links outside"),
    StoredCase("depth.json's layers a number", "depth.json", _edit("depth.json", _with(layer_names=3)), "depth",
               "depth.json: layer_names = 3: must be a list"),
    StoredCase("a depth table row of texts", "depth.json",
               _edit("depth.json", lambda r: r | {"pruning": [r["pruning"][0] | {"accuracy": "high"}]}), "depth",
               "depth.json: pruning[0].accuracy = 'high': must be a finite number or null"),
    StoredCase("the early exit without its threshold", "depth.json",
               _edit("depth.json", lambda r: r | {"early_exit": r["early_exit"] | {"at_1pt": {}}}), "depth",
               "early_exit.at_1pt.threshold"),
    StoredCase("detection's ROC a text", "depth.json",
               _edit("depth.json", lambda r: r | {"detection": r["detection"] | {"roc": "x"}}), "depth",
               "detection.roc = 'x'"),
    StoredCase("a flag threshold of text", "depth.json",
               _edit("depth.json", lambda r: _changed("detection", "flag_thresholds", "msp", "x")(r)), "depth",
               "depth.json: detection.flag_thresholds.msp = 'x': must be a finite number or null"),
    StoredCase("readout accuracies of another length", "depth.json",
               _edit("depth.json", lambda r: r | {"readout_accuracy": r["readout_accuracy"][:-1]}), "depth",
               "depth.json: readout_accuracy = '5 rows': must hold one row per layer (6)"),
    StoredCase("a null accuracy", "depth.json", _edit("depth.json", _with(accuracy=None)), "depth",
               "depth.json: accuracy = None: must be a finite number"),
    StoredCase("depth.json nested deeply", "depth.json", _text("depth.json", NESTED), "depth", "nested too deeply"),
    StoredCase("depth.json linked out", "depth.json", _linked_out("depth.json"), "depth", "links outside"),
    StoredCase("a depth fit's provenance a list", "depth_fit.json", _text("depth_fit.json", "[]"), "depth_fit",
               "depth_fit.json: (the file) = []: must be a JSON object"),
    StoredCase("corrupt depth fit tensors", "depth_fit.safetensors", _text("depth_fit.safetensors", b"\x10\x00" * 40),
               "depth_fit", "is not a valid safetensors file"),
    StoredCase("report.json's accuracy a text", "report.json", _edit("report.json", _with(accuracy="high")),
               "report", "report.json: accuracy = 'high': must be a finite number or null"),
    StoredCase("report.json's layers of numbers", "report.json", _edit("report.json", _with(layer_names=[1, 2])),
               "report", "layer_names = [1, 2]"),
    StoredCase("report.json's faithfulness a list", "report.json", _edit("report.json", _with(faithfulness=[])),
               "report", "faithfulness = []: must be a JSON object"),
    # issue 43: the cells inside report.json's sections were not checked one by one
    StoredCase("a faithfulness interval of texts", "report.json",
               _edit("report.json", _changed("faithfulness", "mean", "signed", "saliency", "top1",
                                             {"estimate": 0.5, "low": "x", "high": 0.6})), "report",
               "report.json: faithfulness['mean']['signed']['saliency'].top1.low = 'x': must be a finite number"),
    StoredCase("a measured method without its intervals", "report.json",
               _edit("report.json", _changed("faithfulness", "mean", "signed", "saliency", "status", None)), "report",
               "faithfulness['mean']['signed']['saliency'].spearman = None: must be an interval where the status"),
    StoredCase("an infinite accuracy", "report.json", _edit("report.json", _with(accuracy=math.inf)), "report",
               "report.json: accuracy = inf: must be a finite number or null"),
    StoredCase("a deletion curve of another length", "report.json",
               _edit("report.json", lambda r: _changed("deletion_curves", "mean", "signed", "saliency",
                                                       r["deletion_curves"]["mean"]["signed"]["saliency"][:2])(r)),
               "report", "deletion_curves['mean']['signed']['saliency'] = [{"),
    StoredCase("the LOO table without a mode", "report.json",
               _edit("report.json", lambda r: r | {"loo": {k: v for k, v in r["loo"].items() if k != "zero"}}),
               "report", "report.json: loo['zero'] = None: must be a JSON object"),
    StoredCase("a comparison of an unknown metric", "report.json",
               _edit("report.json", _with(comparisons=[COMPARISON | {"metric": "accuracy"}])), "report",
               "report.json: comparisons[0].metric = 'accuracy': must be among"),
    StoredCase("a comparison's NaN p-value", "report.json",
               _edit("report.json", _with(comparisons=[COMPARISON | {"p_value": math.nan}])), "report",
               "report.json: comparisons[0].p_value = nan: must be a finite number"),
    StoredCase("a repeated class x layer cell", "report.json",
               _edit("report.json", lambda r: _changed("profiles", "class_layer", [
                   *r["profiles"]["class_layer"], r["profiles"]["class_layer"][0]])(r)),
               "report", "profiles.class_layer = '1 repeated cells': must hold one row per subset, class and layer"),
    StoredCase("a confusion matrix of another size", "report.json",
               _edit("report.json", lambda r: r | {"confusion_matrix": r["confusion_matrix"][:-1]}), "report",
               "must be 10 x 10 counts"),
    StoredCase("an unknown intervention", "report.json",
               _edit("report.json", lambda r: r | {"modes": [*r["modes"], "shuffle"]}), "report",
               "report.json: modes = ['mean', 'zero_input', 'zero', 'shuffle']: must be a list of 1 to 1024 texts"),
    StoredCase("an intervention named twice (found by the fuzzer: Class-wise's LOO table took two columns as one)",
               "report.json", _edit("report.json", lambda r: r | {"modes": [*r["modes"], r["modes"][0]]}), "report",
               "report.json: modes = ['mean', 'zero_input', 'zero', 'mean']: must name each entry once ('mean' is "
               "there twice)"),
    StoredCase("a seed of text", "report.json", _edit("report.json", _changed("checkpoint", "seed", "0")), "report",
               "report.json: checkpoint.seed = '0': must be a non-negative integer"),
    StoredCase("class counts without a class", "report.json",
               _edit("report.json", lambda r: r | {"class_counts": dict(list(r["class_counts"].items())[1:])}),
               "report", "report.json: class_counts.airplane = '(missing)': must be a non-negative integer"),
    StoredCase("report.json nested deeply", "report.json", _text("report.json", NESTED), "report", "nested too deeply"),
    StoredCase("report.json linked out", "report.json", _linked_out("report.json"), "report", "links outside"),
    StoredCase("per-input arrays of two columns", "per_input.safetensors", _per_input, "per_input",
               "['faithfulness/x'] are not arrays of one length"),
    StoredCase("lens.csv without its KL", "lens.csv", _csv("lens.csv", lambda t: t.drop(columns="kl")), "lens_csv",
               "lens.csv is not a lens summary: no column ['kl']"),
    StoredCase("lens.csv's KL of texts", "lens.csv", _csv("lens.csv", lambda t: t.assign(kl="high")), "lens_csv",
               "lens.csv: the columns ['kl'] are not numbers"),
    StoredCase("lens.csv of binary", "lens.csv", _text("lens.csv", b"\xff\xfe\x00" * 10), "lens_csv",
               "lens.csv is not a CSV table"),
    StoredCase("class_profiles.csv's means of texts", "class_profiles.csv",
               lambda own: _csv("class_profiles.csv", lambda t: t.assign(mean="x"))(own.parent), "class_profiles",
               "class_profiles.csv: no column [], or the columns ['mean'] are not numbers"),
    StoredCase("lens.csv without its command", "lens.csv", _csv("lens.csv", lambda t: t.drop(columns="command")),
               "lens_csv", "lens.csv is not a lens summary: no column ['command']"),
    StoredCase("lens.csv of no row", "lens.csv", _csv("lens.csv", lambda t: t.iloc[:0]), "lens_csv",
               "lens.csv is not a lens summary: no column [] or no row"),
    StoredCase("lens.csv with a missing count", "lens.csv", _csv("lens.csv", lambda t: t.assign(n=float("nan"))),
               "lens_csv", "lens.csv: the column n holds a missing or negative count"),
    StoredCase("class_profiles.csv with a repeated row", "class_profiles.csv",
               lambda own: _csv("class_profiles.csv", lambda t: t.iloc[[0, *range(len(t))]])(own.parent),
               "class_profiles", "class_profiles.csv: a row repeated"),
    StoredCase("network.json's command a number", "network.json", _edit("network.json", _with(command=3)),
               "model_card", "network.json: command = 3: must be a text"),
    # the measured early-exit runs were read with json.loads(read_text()), unbounded and unchecked
    StoredCase("exits.json's runs a text", "exits.json", _edit("exits.json", _with(runs="x")), "exits",
               "exits.json: runs = 'x': must be a non-empty list of records"),
    StoredCase("an exit run's MACs a text", "exits.json", _edit("exits.json", _exit_run(macs="many")), "exits",
               "exits.json: runs[0].macs = 'many': must be a finite number"),
    StoredCase("an exit run's accuracy NaN", "exits.json", _edit("exits.json", _exit_run(accuracy=math.nan)), "exits",
               "exits.json: runs[0].accuracy = nan: must be a finite number"),
    StoredCase("an exit run's accuracy past int64", "exits.json", _edit("exits.json", _exit_run(accuracy=10**30)),
               "exits", "exits.json: runs[0].accuracy = 1000000000000000000000000000000: must be a finite number"),
    StoredCase("an exit run without its timing", "exits.json",
               _edit("exits.json", _exit_run(lambda run: {k: v for k, v in run.items() if k != "plain_ms_b64"})),
               "exits", "exits.json: runs[0].plain_ms_b64 = '(missing)': must be a finite number or null"),
    StoredCase("a batch size of letters", "exits.json", _edit("exits.json", _exit_run(saved_bx=0.1)), "exits",
               "saved_bx'"),
    StoredCase("an exit kind without its full model", "exits.json",
               _edit("exits.json", lambda r: r | {"runs": [run for run in r["runs"] if run["policy"] != "full model"]}),
               "exits", "each exit kind needs one 'full model' run and a 'confidence' run with its threshold"),
    StoredCase("exits.json without its command", "exits.json",
               _edit("exits.json", lambda r: {k: v for k, v in r.items() if k != "command"}), "exits",
               "exits.json: command = None: must be a text"),
    StoredCase("exits.json nested deeply", "exits.json", _text("exits.json", NESTED), "exits", "nested too deeply"),
    StoredCase("exits.json linked out", "exits.json", _linked_out("exits.json"), "exits", "links outside"),
]  # fmt: skip
STORED_FILES = ("sample.safetensors", "depth.json", "depth_fit.json", "depth_fit.safetensors", "report.json",
                "lens.csv", "model.json", "model.safetensors", "network.json")  # fmt: skip
BUNDLED_EXITS = BUNDLED_SETTING.parent / "fashion-mnist-mlp" / "laya" / "exits.json"  # the attached network has none


def stored_setting(dest: Path) -> Path:
    """``dest/setting/own`` holding copies of the bundled own head's :data:`STORED_FILES` and a bundled head's
    measured early-exit runs (:data:`BUNDLED_EXITS`), the setting's ``class_profiles.csv`` beside it; returns the
    head's folder."""
    own = attached_setting(dest, STORED_FILES)
    shutil.copy(BUNDLED_SETTING / "class_profiles.csv", own.parent / "class_profiles.csv")
    shutil.copy(BUNDLED_EXITS, own / "exits.json")
    return own
