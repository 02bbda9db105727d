"""The worker wire format: frames round-trip, hostile headers are refused before any allocation, and the
results the pages need (Explanation, InputDepth, ModelInfo) survive JSON + safetensors unchanged."""

from __future__ import annotations

import io
import json
from dataclasses import fields
from pathlib import Path

import pytest
import torch

from laya.analysis.depth.input_depth import InputDepth, input_depth
from laya.analysis.head.explain import Explanation, explain
from laya.analysis.head.spatial import SUBSETS, ClassMaps, SpatialAttribution, sample_class_maps
from laya.data.images import load_image_tensor
from laya.model.checkpoint import load_checkpoint
from laya.sandbox import protocol
from laya.sandbox.info import ModelInfo
from laya.sandbox.protocol import ProtocolError


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and values, NaN where NaN."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    return torch.equal(a, b)


def wire(tensors: dict[str, torch.Tensor], values: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """What the other side of the pipe gets: one frame, read back."""
    stream = io.BytesIO(protocol.encode({"values": values}, protocol.pack(tensors)))
    message, blob = protocol.read_frame(stream)
    return protocol.unpack(blob), message["values"]


def test_frames_round_trip_and_refuse_bad_headers() -> None:
    stream = io.BytesIO(protocol.encode({"op": "x", "n": [1, 2.5, None, float("nan")]}, b"\x00\xffdata"))
    message, blob = protocol.read_frame(stream)
    assert message["op"] == "x" and message["n"][:3] == [1, 2.5, None] and blob == b"\x00\xffdata"
    with pytest.raises(EOFError):
        protocol.read_frame(stream)
    huge = protocol.HEADER.pack(b"LAYA", 10, protocol.MAX_BLOB + 1)  # asks for > 1 GiB: refused unread
    for head in (huge, protocol.HEADER.pack(b"PKL\x80", 2, 0), protocol.HEADER.pack(b"LAYA", 2, 0) + b"[]"):
        with pytest.raises(ProtocolError):
            protocol.read_frame(io.BytesIO(head + b"{}"))
    with pytest.raises(EOFError):  # cut mid-frame
        protocol.read_frame(io.BytesIO(protocol.encode({"a": 1}, b"12345")[:-2]))
    with pytest.raises(ProtocolError):
        protocol.unpack(b"\x80\x04\x95 not safetensors")


def test_files_join_and_split() -> None:
    files = {"model.json": b"{}", "model.safetensors": b"\x01\x02\x03", "empty": b""}
    index, blob = protocol.join_files(files)
    assert protocol.split_files(json.loads(json.dumps(index)), blob) == files
    with pytest.raises(ProtocolError):
        protocol.split_files(index, blob + b"x")


@pytest.fixture(scope="module")
def checkpoints(tiny_models: Path) -> dict:
    return {head: load_checkpoint(tiny_models / "colours-mlp" / head) for head in ("laya", "concat", "lastlayer")}


@pytest.fixture(scope="module")
def image(tiny_models: Path) -> torch.Tensor:
    path = sorted((tiny_models / "colours-mlp" / "examples").iterdir())[0]
    return load_image_tensor(path, 3, 8)


@pytest.mark.parametrize("head", ["laya", "lastlayer"])
def test_explanation_round_trip_is_exact(checkpoints: dict, image: torch.Tensor, head: str) -> None:
    original = explain(checkpoints[head], image, "mean", posthoc=("saliency",), ig_steps=4)
    copy = Explanation.from_tensors(*wire(*original.to_tensors()))
    for f in fields(Explanation):
        a, b = getattr(original, f.name), getattr(copy, f.name)
        if isinstance(a, torch.Tensor):
            assert same(a, b), f.name
        elif f.name == "loo":
            pairs = [(getattr(a, g.name), getattr(b, g.name)) for g in fields(a)]
            assert all((x is None and y is None) or same(x, y) for x, y in pairs)
        elif f.name == "scores":
            assert list(a) == list(b) and all(same(a[m], b[m]) for m in a)
        elif f.name == "spatial":
            assert (a is None and b is None) or assert_same_spatial(a, b) is None
        else:
            assert a == b, f.name
    assert copy.layer_table().equals(original.layer_table()) and copy.summary().equals(original.summary())


def assert_same_spatial(a: SpatialAttribution, b: SpatialAttribution) -> None:
    assert a.approximate == b.approximate and a.kinds == b.kinds
    assert all(same(getattr(a, k), getattr(b, k)) for k in ("classes", "offsets", "terms", "weights"))
    assert all((x is None and y is None) or same(x, y) for x, y in zip(a.maps, b.maps, strict=True))


MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.mark.parametrize("setting", ["cifar10-cnn", "cifar10-vit", "fashion-mnist-mlp"])
def test_explanation_spatial_maps_round_trip_exact_approximate_or_none(setting: str) -> None:
    checkpoint = load_checkpoint(MODELS / setting / "laya")
    path = sorted((MODELS / setting / "examples").iterdir())[0]
    spec = checkpoint.meta.input
    original = explain(checkpoint, load_image_tensor(path, spec.channels, spec.source_size))
    copy = Explanation.from_tensors(*wire(*original.to_tensors()))
    if setting == "fashion-mnist-mlp":  # no layer has positions: no maps at all
        assert original.spatial is None and copy.spatial is None
        return
    assert_same_spatial(original.spatial, copy.spatial)
    assert set(copy.spatial.kinds) == {"exact" if setting == "cifar10-cnn" else "approximate"}


def test_class_maps_round_trip_is_exact() -> None:
    original = sample_class_maps(load_checkpoint(MODELS / "cifar10-cnn" / "lastlayer"))
    copy = ClassMaps.from_tensors(*wire(*original.to_tensors()))
    assert (copy.subsets, copy.size) == (original.subsets, original.size) == (SUBSETS, 32)
    assert all(same(getattr(original, k), getattr(copy, k)) for k in ("counts", "offsets", "terms"))
    assert all(same(x, y) for x, y in zip(original.maps, copy.maps, strict=True))


def test_explanation_round_trip_keeps_nan(checkpoints: dict, image: torch.Tensor) -> None:
    original = explain(checkpoints["laya"], image)
    original.probs[0] = float("nan")
    assert torch.isnan(Explanation.from_tensors(*wire(*original.to_tensors())).probs[0])


@pytest.mark.parametrize("head", ["laya", "concat"])  # without readouts, and with the head's own readouts
def test_input_depth_round_trip_is_exact(checkpoints: dict, image: torch.Tensor, head: str) -> None:
    original = input_depth(checkpoints[head], image, None)
    copy = InputDepth.from_tensors(*wire(*original.to_tensors()))
    assert same(copy.attribution.terms, original.attribution.terms)
    assert same(copy.attribution.bias, original.attribution.bias)
    assert (copy.readouts is None) == (original.readouts is None)
    if original.readouts is not None:
        assert same(copy.readouts.probs, original.readouts.probs) and same(copy.readouts.final, original.readouts.final)
    assert copy.scores == original.scores and copy.score_table().equals(original.score_table())
    assert copy.exit_layer(0.9) == original.exit_layer(0.9)


def test_model_info_round_trip(checkpoints: dict) -> None:
    checkpoint = checkpoints["laya"]
    info = ModelInfo.of(checkpoint)
    params = sum(p.numel() * 4 for p in checkpoint.model.parameters())
    assert info.nbytes >= params > 0 and info.name == checkpoint.name and info.modes == checkpoint.model.head.modes
    assert info.layer_dims == tuple(checkpoint.model.backbone.layer_dims) and len(info.layer_dims) == len(info.layer_names)
    assert ModelInfo.from_dict(json.loads(json.dumps(info.to_dict()))) == info
