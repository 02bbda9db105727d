import json
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from laya.data.datasets import InputSpec
from laya.model.backbones import BackboneConfig
from laya.model.checkpoint import CheckpointError, CheckpointMeta, build_model, load_checkpoint, save_checkpoint
from laya.model.heads import HeadConfig


def make_meta(**backbone) -> CheckpointMeta:
    return CheckpointMeta(
        backbone=BackboneConfig(**{"name": "mlp", "in_channels": 1, "input_size": 6, "widths": (8, 5), **backbone}),
        head=HeadConfig(name="laya", d_star=4, scorer_hidden=6),
        classes=("a", "b", "c"),
        dataset="toy",
        input=InputSpec(channels=1, source_size=6, size=6, mean=(0.5,), std=(0.25,)),
        seed=3,
        metrics={"test_accuracy": 0.5},
    )


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, torch.nn.Module]:
    torch.manual_seed(0)
    meta = make_meta()
    model = build_model(meta).eval()
    model.head.set_references([torch.randn(8), torch.randn(5)])
    return save_checkpoint(model, meta, tmp_path / "ckpt"), model


def test_round_trip_gives_identical_outputs(saved):
    path, model = saved
    ck = load_checkpoint(path)
    x = torch.randn(4, 1, 6, 6)
    with torch.no_grad():
        a, b = model(x), ck.model(x)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.layer_scores, b.layer_scores)
    assert all(torch.equal(r, s) for r, s in zip(model.head.references, ck.model.head.references))
    assert ck.meta.classes == ("a", "b", "c") and ck.meta.seed == 3 and ck.meta.input.mean == (0.5,)
    assert ck.layer_names == ("block 1", "block 2")
    # either file or the directory names the checkpoint
    assert load_checkpoint(path / "model.json").meta.dataset == "toy"
    assert load_checkpoint(path / "model.safetensors").meta.dataset == "toy"


def test_float16_storage_stays_close(saved, tmp_path: Path):
    _, model = saved
    path = save_checkpoint(model, make_meta(), tmp_path / "half", dtype=torch.float16)
    assert json.loads((path / "model.json").read_text())["weights"]["dtype"] == "float16"
    x = torch.randn(4, 1, 6, 6)
    with torch.no_grad():
        assert torch.allclose(model(x).probs, load_checkpoint(path).model(x).probs, atol=5e-3)


def test_loading_never_unpickles(saved, monkeypatch):
    path, _ = saved

    def refuse(*args, **kwargs):
        raise AssertionError("unpickling attempted")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    load_checkpoint(path)


def test_truncated_weights_are_detected(saved):
    path, _ = saved
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="truncated, corrupted or belongs to another checkpoint"):
        load_checkpoint(path)
    record = json.loads((path / "model.json").read_text())
    record["weights"].pop("sha256")
    (path / "model.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="not a valid safetensors file: its header claims"):  # header read first
        load_checkpoint(path)


def test_foreign_and_damaged_metadata(saved, tmp_path: Path):
    path, _ = saved
    with pytest.raises(CheckpointError, match="expected a directory holding model.json"):
        load_checkpoint(tmp_path / "nowhere")
    (path / "model.json").write_text("{ not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(path)
    (path / "model.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(CheckpointError, match="not a LAYA checkpoint"):
        load_checkpoint(path)


def test_weights_of_another_architecture_are_refused(saved):
    path, _ = saved
    record = json.loads((path / "model.json").read_text())
    record["backbone"]["widths"] = [8, 7]  # metadata says another model than the weights hold
    (path / "model.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="does not fit the model described"):
        load_checkpoint(path)


def test_foreign_safetensors_file_is_refused(saved):
    path, _ = saved
    save_file({"encoder.weight": torch.zeros(2, 2)}, str(path / "model.safetensors"))
    record = json.loads((path / "model.json").read_text())
    record["weights"].pop("sha256")
    (path / "model.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="missing .*unexpected \\['encoder.weight'\\]"):
        load_checkpoint(path)


def test_invalid_metadata_values(saved):
    path, _ = saved
    record = json.loads((path / "model.json").read_text())
    record["head"]["name"] = "transformer"
    (path / "model.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="head.name = .transformer.: must be one of .laya., .scalarmix."):
        load_checkpoint(path)


def test_frozen_backbone_is_stored_once_and_pinned(tmp_path: Path):
    torch.manual_seed(0)
    from laya.model.backbones import build_backbone

    source = build_backbone(BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=16))
    save_file({k: v.contiguous() for k, v in source.model.state_dict().items()}, str(tmp_path / "backbone.safetensors"))
    meta = make_meta(
        name="timm", model="test_resnet", in_channels=3, input_size=16, weights="../backbone.safetensors", freeze=True
    )
    meta.input = InputSpec(channels=3, source_size=16, size=16, mean=(0.5,) * 3, std=(0.5,) * 3)
    (tmp_path / "head").mkdir()
    model = build_model(meta, tmp_path / "head").eval()
    path = save_checkpoint(model, meta, tmp_path / "head")
    stored = json.loads((path / "model.json").read_text())
    assert stored["backbone_sha256"] == model.backbone.fingerprint()
    from safetensors import safe_open

    with safe_open(str(path / "model.safetensors"), "pt") as f:
        assert not any(k.startswith("backbone.") for k in f.keys())  # noqa: SIM118 - safe_open is not iterable
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.allclose(load_checkpoint(path).model(x).logits, model(x).logits)
    # a different backbone file under the same name is detected
    tampered = {k: v + 1 if v.is_floating_point() else v for k, v in source.model.state_dict().items()}
    save_file({k: v.contiguous() for k, v in tampered.items()}, str(tmp_path / "backbone.safetensors"))
    with pytest.raises(CheckpointError, match="differ from those the head"):
        load_checkpoint(path)


def test_written_files_are_readable_by_others(saved):
    path, _ = saved
    for name in ("model.json", "model.safetensors"):
        assert (path / name).stat().st_mode & 0o044 == 0o044  # not the 0600 of a bare mkstemp


def test_an_input_spec_that_does_not_fit_its_channels_is_a_refusal(saved: tuple[Path, torch.nn.Module]) -> None:
    """Found by the fuzzer: ``input.mean = []`` raised a bare ValueError from the input spec."""
    import json

    record = json.loads((saved[0] / "model.json").read_text())
    record["input"]["mean"] = []
    with pytest.raises(CheckpointError, match="mean/std must have 1 entries"):
        CheckpointMeta.from_dict(record)


def test_tensors_sharing_memory_are_written_each_whole(tmp_path: Path) -> None:
    """Tied weights and a traced graph's shared constants (torchvision MaxViT, issue 47's breadth run) are written,
    each as its own copy, and read back with the same values; safetensors refuses shared memory."""
    from safetensors.torch import load_file

    from laya.model.checkpoint import atomic_write_tensors

    base = torch.arange(12.0).view(3, 4)
    tensors = {"a": base, "tied": base, "row": base[1], "column": base[:, 0], "own": torch.ones(2)}
    with pytest.raises(RuntimeError, match="share memory"):
        save_file({k: v.contiguous() for k, v in tensors.items()}, tmp_path / "plain.safetensors")
    atomic_write_tensors(tmp_path / "w.safetensors", tensors)
    back = load_file(tmp_path / "w.safetensors")
    assert back.keys() == tensors.keys() and all(torch.equal(back[k], v) for k, v in tensors.items())
