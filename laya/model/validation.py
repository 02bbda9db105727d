"""Strict types and ranges for every config field, checked before anything is built.

One layer for the CLI, the library and the dashboard: :func:`check_fields` checks a dict
against a config dataclass's annotations (``int``, ``float``, ``bool``, ``str``, ``Literal``,
lists, ``X | None``) and the ranges in :data:`RULES`; :func:`check_record` does the same for
the rest of a checkpoint's ``model.json``. Every failure is a :class:`CheckpointError` that
names the field, the value and the rule, e.g.::

    backbone.widths[3] = 20000000: must be in [1, 65536]

timm ``model_kwargs`` are limited to :data:`TIMM_KWARGS` (architecture arguments only); keys
that name files, weights, URLs or downloads are refused with their own message.
"""

from __future__ import annotations

import math
import re
import types
import typing
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args, get_origin, get_type_hints


class CheckpointError(ValueError):
    """A checkpoint or config that cannot be used; the message names the field, the value and the rule."""


def _short_repr(value: Any) -> str:
    """``repr(value)`` in at most 80 characters, without building a huge string first (a 5,000-digit
    integer, a list of 100,000 names)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"<an integer of about {int(value.bit_length() * 0.30103):,} digits>"
    if isinstance(value, (list, tuple)) and len(value) > 20:
        value = [*value[:20], ...]
    if isinstance(value, str) and len(value) > 200:
        value = value[:200]
    if isinstance(value, dict) and len(value) > 20:
        value = dict(list(value.items())[:20])
    try:
        shown = repr(value)
    except ValueError:  # an int nested in a list, over Python's digit limit
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= 80 else shown[:77] + "..."


def refuse(field: str, value: Any, rule: str) -> CheckpointError:
    """``CheckpointError("field = value: rule")`` with the value shortened to 80 characters."""
    return CheckpointError(f"{field} = {_short_repr(value)}: {rule}")


def closest(name: object, names: typing.Iterable[str], count: int = 5) -> str:
    """``"; the closest names: 'resnet18', 'resnet18d'"``: the known names nearest a misspelt ``name``
    (:func:`difflib.get_close_matches`, case ignored), or ``""`` when none is near."""
    import difflib

    if not isinstance(name, str) or not name:
        return ""
    lowered = {n.lower(): n for n in names}
    near = difflib.get_close_matches(name.lower()[:100], list(lowered), n=count, cutoff=0.6)
    return f"; the closest names: {', '.join(repr(lowered[n]) for n in near)}" if near else ""


@dataclass(frozen=True)
class Rule:
    """Range of a number (or of every number in a list), allowed values, list and text lengths."""

    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    max_items: int | None = None
    max_chars: int | None = None
    min_items: int = 0


SIZE = Rule(1, 1024)
WIDTH = Rule(1, 65536, max_items=64, min_items=1)
RULES: dict[str, Rule] = {
    "backbone.in_channels": Rule(choices=(1, 3)),
    "backbone.input_size": SIZE,
    "backbone.widths": WIDTH,
    "backbone.convs_per_block": Rule(1, 16),
    "backbone.model": Rule(max_chars=100),
    "backbone.indices": Rule(-1000, 1000, max_items=1000),
    "backbone.weights": Rule(max_chars=255),
    "backbone.layer_names": Rule(max_items=1000, max_chars=100),
    "head.d_star": Rule(1, 8192),
    "head.tau": Rule(1e-3, 1e3),
    "head.scorer_hidden": Rule(1, 16384),
    "input.channels": Rule(choices=(1, 3)),
    "input.source_size": SIZE,  # uploads are resized to it: 4096 px cost 750 MB per image
    "input.size": SIZE,
    "input.mean": Rule(-1e3, 1e3, max_items=3),
    "input.std": Rule(1e-6, 1e3, max_items=3),
    "training.dataset": Rule(max_chars=4096),
    "training.seed": Rule(0, 2**63 - 1),
    "training.split_seed": Rule(0, 2**63 - 1),
    "training.lr": Rule(1e-12, 10),
    "training.weight_decay": Rule(0, 10),
    "training.batch_size": Rule(1, 65536),
    "training.val_fraction": Rule(1e-6, 1 - 1e-6),
    "training.patience": Rule(0, 100_000),
    "training.max_epochs": Rule(1, 100_000),
    "training.image_size": SIZE,
    "training.eval_batch_size": Rule(1, 65536),
}

# timm architecture arguments a checkpoint may set: name -> (type, rule)
TIMM_KWARGS: dict[str, tuple[type, Rule]] = {
    "img_size": (int, SIZE),
    "patch_size": (int, Rule(1, 64)),
    "embed_dim": (int, Rule(1, 8192)),
    "depth": (int, Rule(1, 64)),
    "num_heads": (int, Rule(1, 128)),
    "mlp_ratio": (float, Rule(0.1, 16)),
    "qkv_bias": (bool, Rule()),
    "class_token": (bool, Rule()),
    "no_embed_class": (bool, Rule()),
    "reg_tokens": (int, Rule(0, 64)),
    "global_pool": (str, Rule(choices=("", "avg", "max", "token", "map", "avgmax", "catavgmax"))),
    "num_classes": (int, Rule(0, 100_000)),
    "drop_rate": (float, Rule(0, 0.99)),
    "drop_path_rate": (float, Rule(0, 0.99)),
    "channel_multiplier": (float, Rule(0.1, 8)),
    "depth_multiplier": (float, Rule(0.1, 8)),
    "num_features": (int, Rule(1, 8192)),
    "output_stride": (int, Rule(choices=(8, 16, 32))),
    "channels": (list[int], Rule(1, 8192, max_items=8, min_items=1)),  # a ResNet's stage widths
    "stem_width": (int, Rule(1, 8192)),
}
INTERMEDIATES_KWARGS: dict[str, tuple[type, Rule]] = {
    "extra_blocks": (bool, Rule()),
    "norm": (bool, Rule()),
    "stop_early": (bool, Rule()),
}
RESOURCE_KEY = re.compile(
    r"pretrain|checkpoint|file|url|path|weight|cache|hub|download|dir|source|overlay", re.IGNORECASE
)


# ---------------------------------------------------------------- types


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (typing.Union, types.UnionType)


def _matches(value: Any, tp: Any) -> bool:
    """Whether a JSON value has the annotated type (``bool`` is not an int, an int is a float)."""
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    if _is_union(tp):
        return any(_matches(value, arg) for arg in get_args(tp))
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return any(type(value) is type(choice) and value == choice for choice in args)
    if origin in (tuple, list):
        return isinstance(value, (list, tuple)) and all(_matches(v, args[0]) for v in value)
    if origin is dict or tp is dict:
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if tp is bool:
        return type(value) is bool
    if tp is int:
        return type(value) is int
    if tp is float:
        return type(value) in (int, float)
    if tp is str:
        return isinstance(value, str)
    return isinstance(value, tp) if isinstance(tp, type) else False


def describe(tp: Any) -> str:
    """``int | None`` -> ``null or an integer`` (for error messages)."""
    if _is_union(tp):
        return " or ".join(describe(arg) for arg in get_args(tp))
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (tuple, list):
        return f"a list of {describe(args[0]).removeprefix('a ').removeprefix('an ')}s"
    names = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    return names.get(tp, "an object")


def _check_rule(field: str, value: Any, rule: Rule) -> None:
    if isinstance(value, (list, tuple)):
        if len(value) < rule.min_items or (rule.max_items is not None and len(value) > rule.max_items):
            high = "" if rule.max_items is None else f" and at most {rule.max_items}"
            raise refuse(field, value, f"must have at least {rule.min_items}{high} entries")
        for i, item in enumerate(value):
            _check_rule(f"{field}[{i}]", item, rule)
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise refuse(field, value, "must be a finite number")
    if rule.choices is not None and value not in rule.choices:
        raise refuse(field, value, f"must be one of {', '.join(map(repr, rule.choices))}")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and rule.low is not None and not rule.low <= value <= rule.high:
        raise refuse(field, value, f"must be in [{rule.low:g}, {rule.high:g}]")
    text = isinstance(value, str) and rule.max_chars is not None
    if text and (len(value) > rule.max_chars or "\x00" in value):
        raise refuse(field, value, f"must be text of at most {rule.max_chars} characters without NUL")


def check_value(field: str, value: Any, tp: Any, rule: Rule | None = None) -> None:
    """Raise :class:`CheckpointError` unless ``value`` has type ``tp`` and obeys ``rule``."""
    if not _matches(value, tp):
        raise refuse(field, value, f"must be {describe(tp)}")
    if value is not None:
        _check_rule(field, value, rule or Rule())


def check_fields(cls: type, data: Any, what: str, required: bool = False) -> None:
    """Check a config dict against the dataclass ``cls``: known keys, types, :data:`RULES` ranges.

    ``required``: every field must be present (otherwise missing fields take their defaults).
    """
    if not isinstance(data, dict):
        raise refuse(what, data, "must be an object")
    hints = get_type_hints(cls)
    known = [f.name for f in fields(cls)]
    for key in data:
        if key not in known:
            raise refuse(f"{what}.{key}", data[key], f"unknown key; expected one of {', '.join(known)}")
    if required and set(known) - set(data):
        raise refuse(what, sorted(data), f"needs the keys {', '.join(known)}")
    for key, value in data.items():
        check_value(f"{what}.{key}", value, hints[key], RULES.get(f"{what}.{key}"))
    if what == "backbone":
        check_kwargs("backbone.model_kwargs", data.get("model_kwargs", {}), TIMM_KWARGS)
        check_kwargs("backbone.intermediates_kwargs", data.get("intermediates_kwargs", {}), INTERMEDIATES_KWARGS)


def check_kwargs(field: str, kwargs: dict[str, Any], allowed: dict[str, tuple[type, Rule]]) -> None:
    """Only allow-listed keyword arguments, each of its type and range; file/URL/weights keys are refused."""
    for key, value in kwargs.items():
        if RESOURCE_KEY.search(key):
            raise refuse(f"{field}.{key}", value, "names files, weights, URLs or downloads; not allowed in a config")
        if key not in allowed:
            raise refuse(f"{field}.{key}", value, f"not an allowed argument; allowed: {', '.join(sorted(allowed))}")
        tp, rule = allowed[key]
        check_value(f"{field}.{key}", value, tp, rule)


HEX64 = re.compile(r"[0-9a-f]{64}")
MAX_INT_DIGITS = 40  # a seed is at most 19 digits; JSON integers longer than this are refused when parsed
MAX_INT = 10**MAX_INT_DIGITS


def check_plain(value: Any, where: str = "model.json") -> None:
    """Refuse, anywhere in a JSON record, text that is not valid Unicode (lone surrogates such as
    ``"\\ud800"``, which JSON allows and UTF-8 cannot encode) and integers of more than
    :data:`MAX_INT_DIGITS` digits. Iterative, so a deep record costs no recursion."""
    stack = [(where, value)]
    while stack:
        field, node = stack.pop()
        if isinstance(node, str):
            if not node.isascii():
                try:
                    node.encode("utf-8")
                except UnicodeEncodeError:
                    raise refuse(field, node, "must be valid Unicode text (it holds a lone surrogate)") from None
        elif isinstance(node, int) and not isinstance(node, bool):
            if not -MAX_INT < node < MAX_INT:
                raise refuse(field, node, f"integers may have at most {MAX_INT_DIGITS} digits")
        elif isinstance(node, dict):
            for key, item in node.items():
                key_text = str(key).encode("utf-8", "backslashreplace").decode("utf-8")  # printable field names
                name = f"{field}.{key_text}" if field != where else key_text
                stack.extend([(f"{name} (its name)", key), (name, item)])
        elif isinstance(node, list):
            stack.extend((f"{field}[{i}]", item) for i, item in enumerate(node))


def parse_int(text: str) -> int:
    """``json.loads(..., parse_int=parse_int)``: integers of more than :data:`MAX_INT_DIGITS` digits are
    refused before Python converts them (a 5,000-digit seed)."""
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise CheckpointError(
            f"model.json holds an integer of {digits:,} digits ({text[:12]}...); integers may have at most {MAX_INT_DIGITS}"
        )
    return int(text)


def check_record(record: Any, format_name: str, format_version: int, weights_file: str) -> None:
    """The parts of ``model.json`` outside the backbone/head/input configs (those have their own dataclasses)."""
    if not isinstance(record, dict):
        raise refuse("model.json", type(record).__name__, "must be a JSON object")
    check_plain(record)
    if record.get("format") != format_name:
        raise refuse("format", record.get("format"), f'must be "{format_name}" (not a LAYA checkpoint)')
    version = record.get("format_version", 0)
    check_value("format_version", version, int)
    if version > format_version:
        raise refuse("format_version", version, f"newer than this laya's {format_version}; upgrade laya")
    if version < 0:
        raise refuse("format_version", version, f"must be in [0, {format_version}]")
    for key in ("backbone", "head", "input"):
        if not isinstance(record.get(key), dict):
            raise refuse(key, record.get(key), "must be an object")
    check_value("classes", record.get("classes"), list[str], Rule(max_items=100_000, max_chars=200, min_items=2))
    check_value("dataset", record.get("dataset"), str, Rule(max_chars=4096))
    check_value("seed", record.get("seed", 0), int, Rule(0, 2**63 - 1))
    check_value("train", record.get("train", {}), dict[str, Any])
    check_value("metrics", record.get("metrics", {}), dict[str, Any])
    check_value("laya_version", record.get("laya_version", ""), str, Rule(max_chars=64))
    check_value("layer_names", record.get("layer_names", []), list[str], Rule(max_items=1000, max_chars=100))
    weights = record.get("weights", {})
    check_value("weights", weights, dict[str, Any])
    check_value("weights.file", weights.get("file", weights_file), Literal[weights_file])
    check_value("weights.dtype", weights.get("dtype", "float32"), Literal["float32", "float16", "bfloat16"])
    for key, value in (("weights.sha256", weights.get("sha256")), ("backbone_sha256", record.get("backbone_sha256"))):
        check_value(key, value, str | None)
        if value is not None and not HEX64.fullmatch(value):
            raise refuse(key, value, "must be 64 lowercase hex digits (a sha256)")


__all__ = [
    "INTERMEDIATES_KWARGS",
    "RULES",
    "TIMM_KWARGS",
    "CheckpointError",
    "Rule",
    "check_fields",
    "check_kwargs",
    "check_plain",
    "check_record",
    "check_value",
    "closest",
    "describe",
    "parse_int",
    "refuse",
]
