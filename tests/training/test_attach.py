"""``attach``: a user's trained classifier, as it is, beside depth-aware heads on its frozen features."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from laya.analysis.depth.report import DepthOptions
from laya.analysis.evaluate import EvalOptions
from laya.analysis.network.report import NetworkOptions
from laya.analysis.network.report_files import load_network_report
from laya.analysis.sample import Sample
from laya.model.checkpoint import load_checkpoint
from laya.model.own_head import OWN, is_own_head
from laya.training.attach import AttachConfig, attach, own_checkpoint, summary
from tests.model.test_own_head import _save, logits_of, networks

torch.set_num_threads(1)
QUICK = {
    "evaluation": EvalOptions(modes=("mean",), resamples=50, ig_steps=4),
    "depth": DepthOptions(limit=24, train_limit=48, resamples=50, random_orders=1, timing_batch=4, timing_repeats=1),
    "network": NetworkOptions(limit=6, references=2, ig_steps=2, resamples=50, lens_sample=24, lens_epochs=1,
                              gradcam_sample=6, timing_repeats=1),
}


def _config(config, image_folder: Path, out: Path, **changes) -> AttachConfig:
    kwargs = {k: v for k, v in config.model_kwargs.items() if k not in ("num_classes", "num_labels")}
    changes = {"model_kwargs": kwargs, **changes}
    return AttachConfig(family=config.name, model=config.model, weights=config.weights, dataset=str(image_folder),
                        out=str(out), image_size=32, **changes)  # fmt: skip


def _retarget(network: nn.Module, classes: int) -> nn.Module:
    """The network with a classifier of ``classes`` outputs (the fixture's networks have 5)."""
    from laya.model.backbones.pre_logits import final_linear

    name = final_linear(network)
    parent, _, leaf = name.rpartition(".")
    old = network.get_submodule(name)
    setattr(network.get_submodule(parent) if parent else network, leaf, nn.Linear(old.in_features, classes))
    return network


def test_own_checkpoint_predicts_what_the_network_predicts(tmp_path: Path, image_folder: Path) -> None:
    for name, network, config in networks(tmp_path):
        network = _retarget(network, 3).eval()  # the image folder has 3 classes
        config.weights = _save(network, Path(config.weights))
        path = own_checkpoint(_config(config, image_folder, tmp_path), tmp_path / name.replace(" ", "-"))
        checkpoint = load_checkpoint(path)
        assert is_own_head(checkpoint.meta.train) and checkpoint.meta.head.name == "lastlayer"
        images = checkpoint.load_data("test").images[:6]
        x = checkpoint.preprocess(images)
        with torch.no_grad():
            got, expected = checkpoint.model(x).logits, logits_of(network, x)
        assert torch.allclose(got, expected, atol=1e-5, rtol=0), f"{name}: {(got - expected).abs().max():.2e}"


def test_a_network_with_other_classes_is_refused(tmp_path: Path, image_folder: Path) -> None:
    _, _, config = next(networks(tmp_path))  # 5 outputs; the folder has 3 classes
    with pytest.raises(ValueError, match=r"the weights' classifier has 5 outputs; the dataset .* has 3 classes"):
        own_checkpoint(_config(config, image_folder, tmp_path), tmp_path / "x")
    with pytest.raises(ValueError, match="5 outputs; the dataset .* has 3 classes"):
        own_checkpoint(_config(config, image_folder, tmp_path, model_kwargs={"num_classes": 5}), tmp_path / "x")


def test_attach_writes_four_heads_a_summary_and_depth(
    tmp_path: Path, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import timm

    torch.manual_seed(0)
    network = timm.create_model("resnet10t", num_classes=3).eval()
    weights = _save(network, tmp_path / "mine.safetensors")
    config = AttachConfig(family="timm", model="resnet10t", weights=weights, dataset=str(image_folder),
                          out=str(tmp_path / "models"), image_size=32, max_epochs=2, patience=1, lr=1e-3,
                          **QUICK)  # fmt: skip
    from laya.training import attach as attach_module
    from laya.training import bundle as bundle_module

    written: list[str] = []  # each head's browser sample, by folder: once each, a depth head's after its fit
    for module in (bundle_module, attach_module):
        write = module.write_sample
        monkeypatch.setattr(module, "write_sample", lambda ck, *a, write=write, **k: written.append(ck.path.name)
                            or write(ck, *a, **k))  # fmt: skip
    attached = attach(config)
    assert list(attached.heads) == [OWN, "laya", "scalarmix", "concat"]
    assert sorted(written) == sorted(attached.heads) and written[-2:] == [OWN, "laya"]
    setting = attached.setting
    assert (setting / "backbone.safetensors").is_file() and (setting / "summary.csv").is_file()
    for head, path in attached.heads.items():
        checkpoint = load_checkpoint(path)
        assert checkpoint.meta.backbone.weights == "../backbone.safetensors", head
        assert (path / "report.json").is_file() and (path / "sample.safetensors").is_file(), head
        expected = json.loads((path / "expected.json").read_text())  # the regression record of every example
        assert sorted(expected) == sorted(p.name for p in (setting / "examples").iterdir()) and expected, head
    for head in (OWN, "laya"):
        assert (attached.heads[head] / "depth.json").is_file(), head
        table = Sample.load(attached.heads[head]).table  # the browser's sample, written after the depth fit
        assert "depth" in table and "detection/mahalanobis" in table, head
    lens = json.loads((attached.heads[OWN] / "tuned_lens.json").read_text())
    assert lens["command"].startswith("laya.training.attach.attach(") and lens["sample"] == 24
    report = load_network_report(attached.heads[OWN])
    assert report.units[-1] == "layer4.0" and report.drops.shape == (6, len(report.units))
    assert report.last_unit_agreement >= 0.99 and attached.network_error is None
    assert report.lesion.n == 6 and report.lesion.curve["k"].iloc[-1] == sum(report.residual)  # the lesion study too
    assert report.gradcam.n == 6 and list(report.gradcam.units["unit"]) == report.units  # every unit's Grad-CAM tested
    own = load_checkpoint(attached.heads[OWN])
    x = own.preprocess(own.load_data("test").images)
    with torch.no_grad():
        assert torch.allclose(own.model(x).logits, network(x), atol=1e-5, rtol=0)
    from laya.app.catalog import find_checkpoints
    from laya.app.labels import OWN_TITLE, entry_label

    entries = find_checkpoints(tmp_path / "models")
    assert [e.head for e in entries] == [OWN, "concat", "scalarmix", "laya"]  # the own head first, labelled
    assert entry_label(entries[0]).startswith(f"{OWN_TITLE} · acc ")
    text = summary(attached, resamples=50)
    assert "own head (the network as it is)" in text and "vs own" in text and "LAYA attends to" in text
    assert "Holm-corrected over the 3" in text and text.count("Holm p = ") == 3
    assert f"laya dashboard --models {setting.parent}" in text
    assert "layer4.0 100.0% (identity translator: equal by construction)" in text  # the last unit's lens
    trusted = "Cheap score to trust against resample" in text
    assert trusted or "No cheap per-unit score is to be trusted against resample" in text
    assert "Grad-CAM to use: " in text or "Grad-CAM: no unit's map beats a random one" in text
    assert len(text.splitlines()) <= 24  # one screen
    _own_head_shows_its_block_ablation_at_once(tmp_path / "models", attached.heads[OWN], monkeypatch)


def _own_head_shows_its_block_ablation_at_once(models: Path, own: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard opens the attached folder with the own head first, and Inspect shows that unchanged network
    explained by its units at once (resample, each bar named by module and by its intervention), never the stage
    mean-ablation that made two inputs predicted alike differ by one constant; resnet10t's residual units (all
    but the stem, three through a projection shortcut) are skipped on request, and their bars
    say so (tests/pages/test_own_pages.py: every page)."""
    from streamlit.testing.v1 import AppTest

    from laya.app.network_views import UNIT_PROFILE_TITLE
    from laya.app.text import unplain

    monkeypatch.setenv("LAYA_MODELS", str(models))
    app = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=120).run()
    app.sidebar.radio[1].set_value(str(own)).run()
    assert not app.exception, app.exception

    def profile() -> dict:
        """The unit profile's bars, the units that keep the input first, then those drawn apart (the stem)."""
        charts = [json.loads(c.proto.spec) for c in app.get("plotly_chart")]
        [chart] = [c for c in charts if unplain(c["layout"].get("title", {}).get("text", "")) == UNIT_PROFILE_TITLE]
        return {k: [v for trace in chart["data"] for v in trace[k]] for k in ("x", "text")}

    assert profile()["x"] == ["layer1.0", "layer2.0", "layer3.0", "layer4.0", "bn1"]
    assert not [t for t in app.toggle if str(t.key).endswith("block_ablation_on")]
    app.radio(key="inspect_network_method").set_value("skip").run()
    assert not app.exception, app.exception
    assert profile()["text"] == ["skip", "skip", "skip", "skip", "resample"]  # the stem alone has no shortcut


def test_a_wrapped_module_as_it_is(tmp_path: Path, image_folder: Path) -> None:
    import torchvision

    torch.manual_seed(0)
    network = torchvision.models.resnet18(num_classes=3).eval()
    config = AttachConfig(family="wrapped", model=None, weights=None, dataset=str(image_folder), image_size=32,
                          layers=["layer2", "layer4"])  # fmt: skip
    checkpoint = load_checkpoint(own_checkpoint(config, tmp_path / "own", network), module=network)
    assert checkpoint.layer_names == ("layer2", "layer4", "pre-logits")
    x = checkpoint.preprocess(checkpoint.load_data("test").images[:6])
    with torch.no_grad():
        assert torch.allclose(checkpoint.model(x).logits, network(x), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="exactly when family='wrapped'"):
        attach(config)


def _trainer_folder(folder: Path, **changes) -> nn.Module:
    """A tiny ViT classifier of 3 classes saved as a Hugging Face Trainer saves it (config.json + model.safetensors)."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    settings = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
                "image_size": 32, "patch_size": 8, "num_labels": 3}  # fmt: skip
    config = ViTConfig(**{**settings, **changes})
    network = ViTForImageClassification(config).eval()
    network.save_pretrained(folder)
    return network


def test_a_trainer_folder_attaches_by_its_folder(tmp_path: Path, image_folder: Path, capsys) -> None:
    network = _trainer_folder(tmp_path / "trainer-out")
    config = AttachConfig(family="transformers", model=None, weights=str(tmp_path / "trainer-out"),
                          dataset=str(image_folder))  # fmt: skip
    assert (config.model, Path(config.weights).name, config.image_size) == ("vit", "trainer-out", 32)
    assert config.model_kwargs == {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                                   "intermediate_size": 64, "patch_size": 8}  # fmt: skip
    checkpoint = load_checkpoint(own_checkpoint(config, tmp_path / "own"))
    printed = capsys.readouterr().err
    assert "weights: read the Trainer folder trainer-out/ (model.safetensors with config.json's settings)" in printed
    assert "LOAD REPORT" not in printed and "Loading weights" not in printed
    x = checkpoint.preprocess(checkpoint.load_data("test").images[:4])
    with torch.no_grad():
        got, expected = checkpoint.model(x).logits, network(pixel_values=x).logits
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), f"{(got - expected).abs().max():.2e}"


def test_a_trainer_folder_with_a_setting_no_kwarg_records_is_refused(tmp_path: Path, image_folder: Path) -> None:
    _trainer_folder(tmp_path / "eps", layer_norm_eps=1e-6)
    with pytest.raises(ValueError, match=r"config.json sets layer_norm_eps=1e-06 \(default 1e-12\), which a "
                       "transformers backbone cannot record"):  # fmt: skip
        AttachConfig(family="transformers", model="vit", weights=str(tmp_path / "eps"), dataset=str(image_folder))
    with pytest.raises(ValueError, match="--model 'deit' but eps/config.json is of model_type 'vit'"):
        AttachConfig(family="transformers", model="deit", weights=str(tmp_path / "eps"), dataset=str(image_folder))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="weights folder 'empty' has no config.json"):
        AttachConfig(family="transformers", model="vit", weights=str(tmp_path / "empty"), dataset=str(image_folder))


def test_a_trainer_folder_of_another_class_count_is_refused_with_both(tmp_path: Path, image_folder: Path) -> None:
    from laya.training.preflight import preflight

    _trainer_folder(tmp_path / "five", num_labels=5)
    config = AttachConfig(family="transformers", model="vit", weights=str(tmp_path / "five"), dataset=str(image_folder))
    with pytest.raises(ValueError, match="the weights' classifier has 5 outputs; the dataset .* has 3 classes"):
        preflight(config, echo=False)


@pytest.mark.parametrize("stop", [RuntimeError("a late step failed"), KeyboardInterrupt()], ids=["error", "interrupt"])
def test_a_failed_or_interrupted_attach_leaves_out_as_it_was(
    stop: BaseException, tmp_path: Path, image_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The own head is written, then the summary step stops: what was written goes, the setting that was there
    before comes back, and no temporary folder is left (the system's, nor beside the setting); once the run ends
    whole, it replaces the earlier setting."""
    import tempfile

    import timm

    from laya.training import attach as attach_module

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where attach's fitting runs go
    out = tmp_path / "out"
    (out / "mine").mkdir(parents=True)
    (out / "mine" / "earlier.txt").write_text("an earlier attach")
    weights = _save(timm.create_model("resnet10t", num_classes=3).eval(), tmp_path / "mine.safetensors")
    config = AttachConfig(family="timm", model="resnet10t", weights=weights, dataset=str(image_folder), out=str(out),
                          setting="mine", overwrite=True, image_size=32, heads=(), depth_heads=(),
                          **{**QUICK, "network": None})  # fmt: skip
    written = attach_module.write_summary

    def stopped(*args, **kwargs):
        assert (out / "mine" / OWN / "report.json").is_file()  # the setting was being written
        raise stop

    monkeypatch.setattr(attach_module, "write_summary", stopped)
    with pytest.raises(type(stop)):
        attach(config)
    assert [p.name for p in out.iterdir()] == ["mine"] and [p.name for p in (out / "mine").iterdir()] == ["earlier.txt"]
    assert list(scratch.iterdir()) == []
    monkeypatch.setattr(attach_module, "write_summary", written)
    attached = attach(config)
    assert [p.name for p in out.iterdir()] == ["mine"] and not (out / "mine" / "earlier.txt").exists()
    assert (attached.heads[OWN] / "report.json").is_file() and list(scratch.iterdir()) == []
