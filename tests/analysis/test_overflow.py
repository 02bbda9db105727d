"""Finite weights whose output overflows float32 are refused with one message by every analysis a page shows, in
the server and in a worker's answers; NaN weights loaded anyway are not an overflow."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

from laya.analysis.depth.input_depth import input_depth
from laya.analysis.head.explain import explain_bytes
from laya.analysis.overflow import OutputOverflow, check_output
from laya.analysis.patching import patch_bytes
from laya.data.images import load_image_tensor
from laya.model.checkpoint import load_checkpoint
from laya.sandbox import protocol
from laya.sandbox.serve import serve
from tests.hostile import write_nan_weights, write_scaled_weights

OVERFLOWED = "The model's output overflowed: its logits are not finite"


@pytest.fixture(scope="module")
def huge(tiny_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scaled_weights(tiny_models / "colours-mlp" / "laya", tmp_path_factory.mktemp("huge") / "laya")


@pytest.fixture(scope="module")
def image(tiny_models: Path) -> bytes:
    return min((tiny_models / "colours-mlp" / "examples").iterdir()).read_bytes()


def test_weights_scaled_to_1e18_load_and_every_analysis_says_the_output_overflowed(huge: Path, image: bytes) -> None:
    checkpoint = load_checkpoint(huge)  # finite: loads without a choice
    assert not checkpoint.warnings
    largest = max(float(t.abs().max()) for t in checkpoint.model.state_dict().values() if t.is_floating_point())
    assert 1e18 <= largest < 1e20
    calls = {
        "explain": lambda: explain_bytes(checkpoint, image),
        "depth": lambda: input_depth(checkpoint, load_image_tensor(image, 3, 8), None),
        "patch (head)": lambda: patch_bytes(checkpoint, image, image, "head"),
        "patch (backbone)": lambda: patch_bytes(checkpoint, image, image, "backbone"),
    }
    for name, call in calls.items():
        with pytest.raises(OutputOverflow) as raised:
            call()
        assert str(raised.value).startswith(OVERFLOWED), name
        assert f"the largest has magnitude {largest:.1e}" in str(raised.value), name


def test_the_worker_answers_an_overflow_refusal_and_serves_on(huge: Path, image: bytes) -> None:
    index, pair = protocol.join_files({"target": image, "source": image})
    model = {"path": str(huge)}
    requests = io.BytesIO(
        protocol.encode({"op": "explain", **model, "mode": "mean", "posthoc": []}, image)
        + protocol.encode({"op": "depth", **model}, image)
        + protocol.encode({"op": "patch", **model, "where": "head", "files": index}, pair)
        + protocol.encode({"op": "load", **model})
    )
    out = io.BytesIO()
    serve(requests, out, {"network": "test"}, cpu_seconds=0)  # 0: no RLIMIT_CPU on the test process
    out.seek(0)
    replies = [protocol.read_frame(out)[0] for _ in range(5)][1:]  # after the hello
    for reply in replies[:3]:
        assert reply["ok"] is False and reply["kind"] == "overflow" and reply["error"].startswith(OVERFLOWED)
    assert replies[3]["ok"] and replies[3]["info"]["path"] == str(huge)


def test_nan_weights_loaded_anyway_and_finite_outputs_are_not_an_overflow(
    tiny_models: Path, tmp_path: Path, image: bytes
) -> None:
    write_nan_weights(tiny_models / "colours-mlp" / "laya", tmp_path / "nan")
    nan = load_checkpoint(tmp_path / "nan", allow_nonfinite=True)
    assert nan.warnings and not explain_bytes(nan, image).probs.isfinite().all()  # the pages' warning says so
    model = torch.nn.Linear(2, 2)
    check_output(model, torch.zeros(3, 2), None)  # finite: nothing to say
    with pytest.raises(OutputOverflow, match="magnitude"):
        check_output(model, torch.tensor([0.0, float("inf")]))
