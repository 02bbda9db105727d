"""The worker's request loop without a subprocess: the byte-capped model cache and the replies to requests."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from laya.model.checkpoint import CheckpointError
from laya.sandbox import protocol
from laya.sandbox.info import ModelInfo
from laya.sandbox.serve import ModelCache, serve


def test_model_cache_is_capped_by_bytes_not_count(tiny_models: Path) -> None:
    paths = [str(tiny_models / "colours-mlp" / head) for head in ("laya", "concat", "scalarmix")]
    sizes = [ModelInfo.of(ModelCache(2**40).get({"path": p})).nbytes for p in paths]
    cache = ModelCache(sizes[0] + sizes[1])
    for path in paths[:2]:
        cache.get({"path": path})
    assert [k[0] for k in cache.models] == paths[:2]
    cache.get({"path": paths[0]})  # used again: now the most recent
    cache.get({"path": paths[2]})  # over the cap: the least recently used goes
    assert paths[1] not in [k[0] for k in cache.models] and sum(s for _, s in cache.models.values()) <= cache.cap
    assert cache.forget(paths[0]) == 1
    with pytest.raises(CheckpointError, match="MB of uploaded models per worker"):
        ModelCache(sizes[0] - 1).get({"path": paths[0]})


def test_serve_answers_refusals_and_unknown_ops_and_stays_up(tiny_models: Path) -> None:
    good = str(tiny_models / "colours-mlp" / "laya")
    requests = io.BytesIO(
        protocol.encode({"op": "load", "path": good})
        + protocol.encode({"op": "explain", "path": good, "mode": "mean", "posthoc": []}, b"not an image")
        + protocol.encode({"op": "no-such-op"})
        + protocol.encode({"op": "forget", "path": good})
    )
    out = io.BytesIO()
    serve(requests, out, {"network": "test"}, cpu_seconds=0)  # 0: no RLIMIT_CPU on the test process
    out.seek(0)
    replies = [protocol.read_frame(out)[0] for _ in range(5)]
    assert replies[0]["op"] == "hello" and replies[1]["ok"] and replies[1]["info"]["path"] == good
    assert replies[2] == {"ok": False, "kind": "image", "error": replies[2]["error"]} and replies[2]["error"]
    assert not replies[3]["ok"] and replies[4] == {"ok": True, "models": 0}


def test_patch_request_needs_a_target_and_a_source(tiny_models: Path) -> None:
    good = str(tiny_models / "colours-mlp" / "laya")
    image = min((tiny_models / "colours-mlp" / "examples").iterdir()).read_bytes()
    index, blob = protocol.join_files({"target": image, "other": image})
    requests = io.BytesIO(protocol.encode({"op": "patch", "path": good, "where": "head", "files": index}, blob))
    out = io.BytesIO()
    serve(requests, out, {"network": "test"}, cpu_seconds=0)
    out.seek(0)
    protocol.read_frame(out)  # hello
    reply = protocol.read_frame(out)[0]
    assert not reply["ok"] and "exactly a target and a source" in reply["error"]


def test_maps_op_answers_the_class_maps_of_the_checkpoints_sample() -> None:
    import torch

    from laya.analysis.head.spatial import ClassMaps, sample_class_maps
    from laya.model.checkpoint import load_checkpoint

    path = str(Path(__file__).resolve().parents[2] / "models" / "cifar10-cnn" / "scalarmix")
    requests = io.BytesIO(protocol.encode({"op": "maps", "path": path}))
    out = io.BytesIO()
    serve(requests, out, {"network": "test"}, cpu_seconds=0)
    out.seek(0)
    protocol.read_frame(out)  # hello
    reply, blob = protocol.read_frame(out)
    assert reply["ok"], reply
    got = ClassMaps.from_tensors(protocol.unpack(blob), reply["values"])
    expected = sample_class_maps(load_checkpoint(path))
    assert torch.equal(got.counts, expected.counts) and int(got.counts[0].sum()) == 1000
    assert all(torch.allclose(a, b, equal_nan=True) for a, b in zip(got.maps, expected.maps, strict=True))


def test_an_exception_of_the_models_code_is_answered_and_the_loop_goes_on(
    tiny_models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the ``indices: [0, 0, 0]`` ViT did deep in laya/analysis/head/spatial.py: an ``IndexError``."""
    from laya.sandbox import serve as serving

    def fails(*args, **kwargs):
        raise IndexError("index 1 is out of bounds for dimension 1 with size 1 (/srv/secret/file)")

    monkeypatch.setattr(serving, "explain_bytes", fails)
    good = str(tiny_models / "colours-mlp" / "laya")
    requests = io.BytesIO(
        protocol.encode({"op": "explain", "path": good, "mode": "mean", "posthoc": []}, b"image")
        + protocol.encode({"op": "load", "path": good})
    )
    out = io.BytesIO()
    serve(requests, out, {"network": "test"}, cpu_seconds=0)
    out.seek(0)
    replies = [protocol.read_frame(out)[0] for _ in range(3)][1:]
    expected = "the model failed while explaining the image (IndexError in laya/sandbox/serve.py)"  # the last laya file
    assert replies[0] == {"ok": False, "kind": "error", "error": expected}
    assert "secret" not in replies[0]["error"] and replies[1]["ok"] and replies[1]["info"]["path"] == good


class InProcess:
    """The worker's request handler in this process, the request through JSON as on the wire (a pool's ``call``)."""

    def call(self, message, blob, progress=None):
        import json

        from laya.sandbox.serve import handle

        reply, data = handle(json.loads(json.dumps(message)), blob, ModelCache(2**30), io.BytesIO())
        return {"ok": True, **reply}, data


def test_ablate_op_answers_the_block_ablation_of_an_upload(tiny_models: Path) -> None:
    """Block ablation asked of a worker (:meth:`Sandboxed.ablate`, an upload's route) is the one computed in process;
    a request without references is refused as malformed."""
    import torch

    from laya.analysis.block_ablation import ablate_bytes
    from laya.model.checkpoint import load_checkpoint
    from laya.sandbox.client import Sandboxed

    path = str(tiny_models / "colours-mlp" / "lastlayer")
    images = [p.read_bytes() for p in sorted((tiny_models / "colours-mlp" / "examples").iterdir())]
    got = Sandboxed(InProcess(), path).ablate(images[0], images[1:], skip=True)
    expected = ablate_bytes(load_checkpoint(path), images[0], images[1:], skip=True)
    assert got.references == expected.references == len(images) - 1 and got.methods == expected.methods
    assert got.residual == expected.residual and torch.allclose(got.drops, expected.drops, atol=1e-12)
    assert torch.equal(got.ablated_predictions, expected.ablated_predictions) and got.drops.abs().max() > 1e-6
    index, blob = protocol.join_files({"input": images[0]})
    out = io.BytesIO()
    serve(io.BytesIO(protocol.encode({"op": "ablate", "path": path, "files": index}, blob)), out, {}, cpu_seconds=0)
    out.seek(0)
    protocol.read_frame(out)  # hello
    refused = protocol.read_frame(out)[0]
    assert not refused["ok"] and "at least one reference image" in refused["error"]


def test_network_op_answers_the_unit_profile_on_the_branch_asked(tmp_path: Path, image_folder: Path) -> None:
    """The unit profile of an attached ViT asked of a worker on its MLP branch (:meth:`Sandboxed.network`) is the one
    computed in process, each bar naming the branch."""
    import torch

    from laya.analysis.network.explain import network_bytes
    from laya.model.checkpoint import load_checkpoint
    from laya.sandbox.client import Sandboxed
    from laya.training.attach import own_checkpoint
    from tests.model.test_own_head import _save, networks
    from tests.training.test_attach import _config, _retarget

    _, network, config = next(n for n in networks(tmp_path) if n[0] == "timm test_vit")
    config.weights = _save(_retarget(network, 3).eval(), Path(config.weights))
    path = own_checkpoint(_config(config, image_folder, tmp_path), tmp_path / "own")
    image = next((image_folder / "test").rglob("*.png")).read_bytes()
    got = Sandboxed(InProcess(), str(path)).network(image, branch="mlp")
    expected = network_bytes(load_checkpoint(path), image, branch="mlp")
    assert got.branch == expected.branch == "mlp" and got.branched and got.methods == expected.methods
    assert set(got.methods) == {"resample of MLP"} and len(got.methods) == 6
    assert torch.allclose(got.drops, expected.drops, atol=1e-6) and got.drops.abs().max() > 1e-6


def test_units_op_answers_the_patching_by_unit_of_an_upload(tiny_models: Path) -> None:
    """Patching by unit asked of a worker (:meth:`Sandboxed.patch_units`) is the one computed in process. The MLP's
    blocks have no shortcut and the LastLayer head reads none before them: every row is the source's own output, by
    construction; LAYA reads every layer, so only the first block's is."""
    import torch

    from laya.analysis.network.unit_patching import patch_units_bytes
    from laya.model.checkpoint import load_checkpoint
    from laya.sandbox.client import Sandboxed

    images = [p.read_bytes() for p in sorted((tiny_models / "colours-mlp" / "examples").iterdir())]
    for head, fixed in (("lastlayer", [True, True, True]), ("laya", [True, False, False])):
        path = str(tiny_models / "colours-mlp" / head)
        got = Sandboxed(InProcess(), path).patch_units(images[0], images[1])
        expected = patch_units_bytes(load_checkpoint(path), images[0], images[1])
        assert got.units == expected.units and list(got.constructed) == list(expected.constructed) == fixed
        assert torch.allclose(got.effects.logits, expected.effects.logits, atol=1e-12)
        same = (got.effects.logits[0] - got.effects.source_logits).abs().amax(-1) < 1e-5  # the source's, float32
        assert same.tolist() == fixed


def test_a_depth_fit_the_worker_cannot_use_is_named_in_its_reply(tiny_models: Path, tmp_path: Path) -> None:
    """A broken ``depth_fit.*`` cost a worker's answer its probes and statistics without a word (issue 43): the
    depth and explain (OOD scores) replies carry why, naming the file, for the page to show; a head without a
    stored fit gets no note."""
    from laya.analysis.depth.input_depth import InputDepth
    from laya.analysis.head.explain import Explanation

    shutil.copytree(tiny_models / "colours-mlp", tmp_path / "colours-mlp")
    broken, plain = tmp_path / "colours-mlp" / "laya", tmp_path / "colours-mlp" / "concat"
    (broken / "depth_fit.json").write_text("[]")
    (broken / "depth_fit.safetensors").write_bytes(b"\x10\x00" * 40)
    image = min((tmp_path / "colours-mlp" / "examples").iterdir()).read_bytes()
    explain = {"op": "explain", "mode": "mean", "posthoc": [], "ood": True}
    requests = io.BytesIO(b"".join(protocol.encode(request, image) for request in (
        {"op": "depth", "path": str(broken)}, explain | {"path": str(broken)}, {"op": "depth", "path": str(plain)})))
    out = io.BytesIO()
    serve(requests, out, {"network": "test"}, cpu_seconds=0)
    out.seek(0)
    protocol.read_frame(out)  # hello
    replies = [protocol.read_frame(out) for _ in range(3)]
    assert all(reply["ok"] for reply, _ in replies), replies
    results = [kind.from_tensors(protocol.unpack(blob), reply["values"])
               for kind, (reply, blob) in zip((InputDepth, Explanation, InputDepth), replies)]  # fmt: skip
    note = ("The stored depth fit cannot be used (depth_fit.json: (the file) = []: must be a JSON object): shown "
            "without its probes and statistics.")
    assert [r.fit_note for r in results] == [note, note, None]
    assert results[1].ood_scores and "mahalanobis" not in results[1].ood_scores  # scored without the fit
