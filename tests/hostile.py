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
]  # fmt: skip
