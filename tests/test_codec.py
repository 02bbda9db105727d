"""laya.codec: dataclasses <-> (tensors, plain values), and the stored keys of the results that use it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from torch import Tensor

from laya.analysis.block_ablation import BlockAblation
from laya.analysis.depth.fit import FIT_FILE, DepthFit
from laya.analysis.depth.input_depth import InputDepth
from laya.analysis.depth.detection import Mahalanobis
from laya.analysis.head.ablation import AblationResult
from laya.analysis.head.explain import Explanation
from laya.analysis.head.logit_attribution import LogitAttribution
from laya.analysis.head.spatial import ClassMaps, SpatialAttribution
from laya.analysis.network.explain import NetworkExplanation
from laya.analysis.patching import PatchEffects
from laya.analysis.depth.readouts import LayerProbes, Readouts
from laya.codec import decode, encode, stored

MODELS = Path(__file__).resolve().parents[1] / "models"


@dataclass
class Part:
    weight: Tensor
    name: str


@dataclass
class Bare:
    bias: Tensor


@dataclass
class Whole:
    x: Tensor
    mask: Tensor = field(metadata=stored(dtype=(torch.uint8, torch.bool)))
    maps: list[Tensor | None] = field(metadata=stored("map.{}", index="layers"))
    rows: Tensor = field(metadata=stored("row_table"))
    per_row: list[Tensor] = field(metadata=stored("row_{}", rows_of="rows"))
    count: int
    ratio: float
    names: tuple[str, ...]
    flags: tuple[bool, ...]
    part: Part
    bare: Bare
    maybe: Tensor | None = None
    extra: Part | None = None
    other: Bare | None = None
    scores: dict[str, Tensor] = field(default_factory=dict, metadata=stored(index="order"))
    seconds: dict[str, float] = field(default_factory=dict)
    note: str | None = None
    _cache: dict = field(default_factory=dict, init=False)


def whole() -> Whole:
    t = torch.arange(6.0).view(2, 3)
    return Whole(t, torch.tensor([True, False]), [t, None, t + 1], torch.zeros(2, 4), [t[0], t[1]], 3, 0.5,
                 ("a", "b"), (True, False), Part(t * 2, "p"), Bare(t[:, 0]), scores={"z": t[0], "a": t[1]},
                 seconds={"s": 1.5})  # fmt: skip


def wire(tensors: dict[str, Tensor], values: dict) -> tuple[dict[str, Tensor], dict]:
    """As a sandboxed worker's reply arrives: the values through JSON, the tensors copied."""
    return {k: v.clone() for k, v in tensors.items()}, json.loads(json.dumps(values))


def test_encode_names_every_tensor_and_value_by_its_field() -> None:
    tensors, values = encode(whole())
    assert list(tensors) == ["x", "mask", "map.0", "map.2", "row_table", "row_0", "row_1", "part.weight", "bare.bias",
                             "scores.z", "scores.a"]  # fmt: skip
    assert tensors["mask"].dtype == torch.uint8 and tensors["mask"].tolist() == [1, 0]
    assert values == {"layers": 3, "count": 3, "ratio": 0.5, "names": ["a", "b"], "flags": [True, False],
                      "part": {"name": "p"}, "extra": None, "order": ["z", "a"], "seconds": {"s": 1.5},
                      "note": None}  # fmt: skip


def test_round_trip_is_exact_through_json() -> None:
    original = whole()
    original.maybe, original.extra, original.other = torch.ones(2), Part(torch.ones(1), "e"), Bare(torch.zeros(3))
    original.note = "n"
    copy = decode(Whole, *wire(*encode(original)))
    for name in ("x", "rows", "maybe"):
        assert torch.equal(getattr(copy, name), getattr(original, name)), name
    for name in ("count", "ratio", "names", "flags", "seconds", "note"):
        assert getattr(copy, name) == getattr(original, name), name
    assert copy.mask.dtype == torch.bool and copy.mask.tolist() == [True, False]
    assert copy.maps[1] is None and torch.equal(copy.maps[2], original.maps[2]) and len(copy.per_row) == 2
    assert list(copy.scores) == ["z", "a"] and torch.equal(copy.scores["a"], original.scores["a"])
    assert (copy.part.name, copy.extra.name) == ("p", "e") and torch.equal(copy.other.bias, torch.zeros(3))
    assert isinstance(copy.names, tuple) and isinstance(copy.count, int) and copy.seconds == {"s": 1.5}


def test_absent_optionals_come_back_none_and_left_out_values_their_default() -> None:
    tensors, values = encode(whole())
    del tensors["map.0"]  # an entry of a list[Tensor | None]
    copy = decode(Whole, tensors, {k: v for k, v in values.items() if k not in ("order", "seconds", "note")})
    assert (copy.maybe, copy.extra, copy.other, copy.note, copy.maps[0]) == (None, None, None, None, None)
    assert copy.scores == {} and copy.seconds == {}


@pytest.mark.parametrize(
    "drop, message",
    [("x", "Whole.x: no tensor 'x'"),
     ("part.weight", "Part.weight: no tensor 'part.weight'"), ("row_table", "Whole.rows: no tensor 'row_table'"),
     ("row_1", "Whole.per_row: no tensor 'row_1'"),
     ("scores.a", "Whole.scores: no tensor 'scores.a'")],
)  # fmt: skip
def test_a_missing_tensor_names_its_field(drop: str, message: str) -> None:
    tensors, values = encode(whole())
    del tensors[drop]
    with pytest.raises(ValueError, match=message):
        decode(Whole, tensors, values)


@pytest.mark.parametrize("drop, message", [("count", "Whole.count: no value 'count'"),
                                           ("layers", "Whole.maps: no value 'layers'"),
                                           ("part", "Whole.part: no value 'part'")])  # fmt: skip
def test_a_missing_value_names_its_field(drop: str, message: str) -> None:
    tensors, values = encode(whole())
    del values[drop]
    with pytest.raises(ValueError, match=message):
        decode(Whole, tensors, values)


def test_a_tensor_stored_in_another_dtype_names_its_field() -> None:
    tensors, values = encode(whole())
    tensors["mask"] = tensors["mask"].float()
    with pytest.raises(ValueError, match=r"Whole.mask: 'mask' must be stored as torch.uint8, got torch.float32"):
        decode(Whole, tensors, values)
    tensors["mask"] = [1, 0]
    with pytest.raises(ValueError, match=r"Whole.mask: 'mask' must be a tensor, got list"):
        decode(Whole, tensors, values)


@pytest.mark.parametrize("key, value, message", [("count", "three", r"Whole.count: 'count' must be int, got 'three'"),
                                                 ("count", [3], r"Whole.count: 'count' must be int"),
                                                 ("names", 5, r"Whole.names: 'names' must be tuple\[str, ...\]"),
                                                 ("seconds", {"s": "x"}, r"Whole.seconds: 'seconds' must be dict"),
                                                 ("ratio", None, r"Whole.ratio: 'ratio' must be float, got None")])
def test_a_value_of_the_wrong_type_names_its_field(key: str, value: object, message: str) -> None:
    tensors, values = encode(whole())
    with pytest.raises(ValueError, match=message):
        decode(Whole, tensors, values | {key: value})


# The results that use the codec keep the keys they were stored under before it (a sandboxed worker's reply, a
# depth fit): each one's tensors and values, exactly.
def r(*shape: int) -> Tensor:
    return torch.arange(float(torch.Size(shape).numel())).view(*shape).double()


SPATIAL = SpatialAttribution(torch.tensor([[1, 2]]), [r(1, 2, 3, 3), None, r(1, 2, 2, 2)], r(1, 3, 2), r(1, 3, 2),
                             r(1, 3), (False, False, True), (False, True, False))  # fmt: skip
LOO = AblationResult(r(1), torch.tensor([1]), r(1, 3), r(1, 3), torch.tensor([[1, 2, 1]]), None, r(1, 5), r(1, 5))
RESULTS = {
    "patch": (PatchEffects(r(2, 5), r(2, 3, 5), r(2, 4), None, torch.eye(3, 4).bool(), r(2, 5)),
              ["base_alpha", "base_logits", "logits", "masks", "source_logits"], {}),
    "ablation": (BlockAblation(r(2, 4), torch.ones(2, 4).long(), torch.ones(2).long(), r(2), 7, ("skip",), (True,)),
                 ["ablated_predictions", "drops", "prediction", "probability"],
                 {"references": 7, "methods": ["skip"], "residual": [True]}),
    "network": (NetworkExplanation(("a",), ("s",), "unit", ("resample",), (False,), r(1), torch.tensor([1]), 3, 0.5, 8,
                                   "src", ("u",), r(1, 4, 4), 3, r(1, 5), r(5), "tuned lens", "mlp", True,
                                   (2,)),
                ["ablated", "cam", "drops", "log_p", "log_q"],
                {"names": ["a"], "stages": ["s"], "granularity": "unit", "methods": ["resample"], "residual": [False],
                 "prediction": 3, "probability": 0.5, "references": 8, "reference_source": "src", "units": ["u"],
                 "cam_class": 3, "lens_source": "tuned lens", "branch": "mlp", "branched": True,
                 "layers": [2]}),
    "explanation": (Explanation("ck", ("c0", "c1"), ("l0", "l1", "l2"), torch.zeros(3, 8, 8, dtype=torch.uint8),
                                r(3, 8, 8), r(2), 1, "mean", LOO, {"alpha": r(3)}, "alpha", SPATIAL, {"msp": 0.5},
                                {"backbone": 0.1}),
                    ["image", "loo.base_logits", "loo.base_prob", "loo.base_probs", "loo.drops", "loo.prediction",
                     "loo.predictions_after", "loo.probs_after", "model_input", "probs", "scores.alpha",
                     "spatial.classes", "spatial.map.0", "spatial.map.2", "spatial.offsets", "spatial.terms",
                     "spatial.weights"],
                    {"checkpoint": "ck", "classes": ["c0", "c1"], "layer_names": ["l0", "l1", "l2"], "prediction": 1,
                     "mode": "mean", "methods": ["alpha"], "intrinsic": "alpha",
                     "spatial": {"layers": 3, "approximate": [False, False, True], "deferred": [False, True, False]},
                     "ood_scores": {"msp": 0.5}, "seconds": {"backbone": 0.1}, "fit_note": None}),
    "class maps": (ClassMaps(("all", "correct", "incorrect"), 32, torch.ones(3, 5).long(), [None, r(3, 5, 4, 4)],
                             r(3, 5, 2), r(3, 5, 2)),
                   ["counts", "map.1", "offsets", "terms"], {"subsets": ["all", "correct", "incorrect"], "size": 32,
                                                            "layers": 2}),
    "input depth": (InputDepth(LogitAttribution(r(1, 3, 5), r(5)), Readouts(r(1, 3, 5), torch.tensor([2])),
                               {"msp": 0.1}, "own classifier", "the fit cannot be used"),
                    ["attribution.bias", "attribution.terms", "readouts.final", "readouts.probs"],
                    {"scores": {"msp": 0.1}, "readout_kind": "own classifier", "fit_note": "the fit cannot be used"}),
}  # fmt: skip


@pytest.mark.parametrize("name", list(RESULTS))
def test_results_keep_their_stored_keys_and_round_trip(name: str) -> None:
    result, keys, expected = RESULTS[name]
    tensors, values = result.to_tensors()
    assert sorted(tensors) == keys and values == expected
    copy = type(result).from_tensors(*wire(tensors, values))
    again = copy.to_tensors()
    assert again[1] == values and all(torch.equal(again[0][k], tensors[k]) for k in tensors)
    assert list(again[0]) == list(tensors)


def test_patch_masks_travel_as_uint8_and_come_back_bool() -> None:
    effects = RESULTS["patch"][0]
    tensors, values = effects.to_tensors()
    assert tensors["masks"].dtype == torch.uint8
    assert torch.equal(PatchEffects.from_tensors(tensors, values).masks, effects.masks)


def test_depth_fit_tensors_keep_their_names() -> None:
    maha = Mahalanobis([r(5, 3), r(5, 2)], [r(3, 3), r(2, 2)], r(2, 2))
    probes = LayerProbes([r(5, 3), r(5, 2)], r(2, 5))
    assert sorted(maha.to_tensors()) == ["maha_mean_0", "maha_mean_1", "maha_precision_0", "maha_precision_1",
                                         "maha_scale"]  # fmt: skip
    assert sorted(probes.to_tensors()) == ["probe_bias", "probe_weight_0", "probe_weight_1"]
    assert all(torch.equal(a, b) for a, b in zip(Mahalanobis.from_tensors(maha.to_tensors()).precisions,
                                                 maha.precisions, strict=True))  # fmt: skip
    with pytest.raises(ValueError, match="Mahalanobis.precisions: no tensor 'maha_precision_1'"):
        Mahalanobis.from_tensors({k: v for k, v in maha.to_tensors().items() if k != "maha_precision_1"})


@pytest.mark.parametrize("head", ["laya", "concat"])  # with and without an alpha profile
def test_bundled_depth_fits_are_saved_again_byte_for_byte(head: str, tmp_path: Path) -> None:
    """A bundled ``depth_fit.safetensors`` loads, and saving it again writes the very same file."""
    directory = MODELS / "fashion-mnist-mlp" / head
    fit = DepthFit.load(directory)
    assert fit.probes is not None and (fit.alpha_profile is None) == (head == "concat")
    fit.save(tmp_path)
    assert (tmp_path / FIT_FILE).read_bytes() == (directory / FIT_FILE).read_bytes()
