"""train -> checkpoint -> evaluate -> explain on every device this machine has (``cpu`` always, ``cuda`` when
present), so the same suite checks CUDA on a GPU machine; and bf16 autocast."""

import pytest
import torch

from laya.analysis.evaluate import EvalOptions, evaluate
from laya.analysis.head.explain import explain
from laya.cli import main
from laya.data.datasets import load_dataset
from laya.model.checkpoint import load_checkpoint
from laya.training.train import TrainConfig, train
from tests.conftest import tiny_config

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _numbers(report: dict) -> dict:
    """The report without what legitimately differs between runs (timings, paths)."""
    return {k: v for k, v in report.items() if k not in ("timing", "checkpoint")}


@pytest.mark.parametrize("device", DEVICES)
def test_train_checkpoint_evaluate_explain_on_device(device, image_folder, tmp_path):
    out = train(tiny_config(image_folder, tmp_path / "run", device=device))
    # the checkpoint is device-independent: it loads on every device, parameters and buffers there
    loaded = {d: load_checkpoint(out, map_location=d) for d in DEVICES}
    for d, ck in loaded.items():
        assert {t.device.type for t in [*ck.model.parameters(), *ck.model.buffers(), *ck.preprocess.buffers()]} == {d}
    assert loaded[device].meta.metrics["test_accuracy"] > 0.9
    test = load_dataset(str(image_folder), "test", image_size=8)
    options = EvalOptions(ig_steps=4, batch_size=10)
    report, on_cpu = evaluate(loaded[device], test, options), evaluate(loaded["cpu"], test, options)
    assert report["accuracy"] == on_cpu["accuracy"] == pytest.approx(loaded[device].meta.metrics["test_accuracy"])
    assert report["timing"]["n"] == len(test)
    for mode in report["modes"]:
        for reduction in report["reductions"]:
            for method in report["methods"]:
                a, b = (r["faithfulness"][mode][reduction][method] for r in (report, on_cpu))
                assert (a["n_testable"], a["n_spearman"], a["status"]) == (
                    b["n_testable"],
                    b["n_spearman"],
                    b["status"],
                )
                for metric in ("spearman", "top1", "deletion_at_1"):
                    if a[metric] is not None:
                        assert a[metric]["estimate"] == pytest.approx(b[metric]["estimate"], abs=1e-4)
    e, e_cpu = explain(loaded[device], test.image(0)), explain(loaded["cpu"], test.image(0))
    assert e.probs.device.type == e.drops.device.type == "cpu"  # handed over on the CPU whatever the device
    assert e.prediction == e_cpu.prediction and torch.allclose(e.probs, e_cpu.probs, atol=1e-5)
    assert torch.allclose(e.drops, e_cpu.drops, atol=1e-5)


def test_bf16_autocast_trains_and_evaluates(image_folder, tmp_path):
    device = DEVICES[-1]
    out = train(tiny_config(image_folder, tmp_path / "bf16", device=device, precision="bf16"))
    ck = load_checkpoint(out, map_location=device)
    assert ck.meta.train["precision"] == "bf16" and ck.meta.metrics["test_accuracy"] > 0.9
    assert all(p.dtype == torch.float32 for p in ck.model.parameters())  # weights stay float32
    test = load_dataset(str(image_folder), "test", image_size=8)
    half = evaluate(ck, test, EvalOptions(ig_steps=4, precision="bf16"))
    full = evaluate(ck, test, EvalOptions(ig_steps=4))
    assert half["accuracy"] == pytest.approx(full["accuracy"], abs=1 / len(test))
    entry = half["faithfulness"]["zero"]["signed"]["laya_alpha"]
    assert entry["n"] == len(test) and entry["n_spearman"] <= len(test)
    assert entry["spearman"] is None or -1 <= entry["spearman"]["estimate"] <= 1


def test_unavailable_device_is_a_clear_error(image_folder, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA is not available"):
        train(tiny_config(image_folder, tmp_path / "x", device="cuda"))
    with pytest.raises(ValueError, match="precision = 'fp16': must be one of"):
        TrainConfig.from_dict({"precision": "fp16"})


def test_cli_device_precision_and_stream_flags(tiny_models, tmp_path, capsys):
    checkpoint = str(tiny_models / "colours-mlp" / "laya")
    flags = ["evaluate", "--checkpoint", checkpoint, "--ig-steps", "2", "--limit", "5", "--out", str(tmp_path)]
    assert main([*flags, "--device", DEVICES[-1], "--precision", "bf16", "--stream"]) == 0
    assert (tmp_path / "report.json").is_file()
    assert main([*flags, "--device", "tpu"]) == 2
    assert "unknown device 'tpu'; expected auto, cpu, cuda or cuda:N" in capsys.readouterr().err
