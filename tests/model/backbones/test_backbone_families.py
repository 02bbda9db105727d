"""The backbone families beyond mlp/cnn/timm: torchvision, transformers and a wrapped nn.Module.

Each is built small, checked against the library's own outputs, run through LOO, and round-tripped
through a checkpoint; hostile configs naming them are refused before anything is imported or built.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torchvision
from torch import nn

from laya.analysis.head.ablation import leave_one_out
from laya.data.datasets import InputSpec
from laya.model.backbones import (
    BACKBONES,
    Backbone,
    BackboneConfig,
    build_backbone,
    family,
    pool_hidden,
    register_backbone,
    wrap,
)
from laya.model.checkpoint import CheckpointError, CheckpointMeta, Confinement, load_checkpoint, save_checkpoint
from laya.model.classifier import LayerwiseClassifier
from laya.model.heads import HeadConfig, build_head

TINY_TRANSFORMERS = {
    "vit": {
        "hidden_size": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "patch_size": 8,
    },
    "deit": {
        "hidden_size": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "patch_size": 8,
    },
    "swin": {"embed_dim": 8, "depths": [1, 1], "num_heads": [1, 2], "window_size": 4, "patch_size": 4},
    "convnext": {"hidden_sizes": [8, 16], "depths": [1, 1]},
    "resnet": {"hidden_sizes": [8, 16], "depths": [1, 1], "embedding_size": 8, "layer_type": "basic"},
}


def round_trip(backbone: Backbone, tmp_path: Path, **load_options) -> tuple[LayerwiseClassifier, LayerwiseClassifier]:
    """LAYA on ``backbone``, saved and loaded; both models in eval mode."""
    torch.manual_seed(0)
    config = backbone.config
    head = HeadConfig(d_star=8, scorer_hidden=8)
    model = LayerwiseClassifier(backbone, build_head(head, backbone.layer_dims, 3)).eval()
    channels, size = config.in_channels, config.input_size
    meta = CheckpointMeta(
        backbone=config, head=head, classes=("a", "b", "c"), dataset="toy",
        input=InputSpec(channels=channels, source_size=size, size=size, mean=(0.5,) * channels, std=(0.25,) * channels),
    )  # fmt: skip
    loaded = load_checkpoint(save_checkpoint(model, meta, tmp_path / "ckpt"), **load_options).model
    return model, loaded


def assert_same_and_loo(model: LayerwiseClassifier, loaded: LayerwiseClassifier) -> None:
    config = model.backbone.config
    x = torch.randn(2, config.in_channels, config.input_size, config.input_size)
    with torch.no_grad():
        a, b = model(x), loaded(x)
        torch.testing.assert_close(a.logits, b.logits)
        loo = leave_one_out(model.head, a.hidden)
    assert loo.drops.shape == (2, len(model.backbone.layer_dims)) and torch.isfinite(loo.drops).all()


def test_registry_names_every_family_and_refuses_duplicates():
    assert {"mlp", "cnn", "timm", "torchvision", "transformers", "wrapped"} <= set(BACKBONES)
    assert family("timm").__name__ == "TimmBackbone"
    with pytest.raises(ValueError, match="already registered"):
        register_backbone("mlp")(type("Other", (Backbone,), {}))
    with pytest.raises(CheckpointError, match="backbone.name = 'os.system': unknown backbone"):
        BackboneConfig.from_dict({"name": "os.system"})


def test_pool_hidden_rules():
    maps, tokens = torch.randn(2, 4, 3, 3), torch.randn(2, 5, 4)
    torch.testing.assert_close(pool_hidden(maps), maps.mean(dim=(2, 3)))
    torch.testing.assert_close(pool_hidden(tokens, "cls"), tokens[:, 0])
    torch.testing.assert_close(pool_hidden(tokens, "avg", prefix_tokens=1), tokens[:, 1:].mean(dim=1))


def test_torchvision_resnet_stages_are_the_feature_extractors_pooled_outputs(tmp_path: Path):
    config = BackboneConfig(name="torchvision", model="resnet18", in_channels=3, input_size=32)
    backbone = build_backbone(config).eval()
    assert backbone.layer_names == ("layer1", "layer2", "layer3", "layer4")
    assert backbone.layer_dims == (64, 128, 256, 512)
    x = torch.randn(2, 3, 32, 32)
    net = torchvision.models.resnet18()
    net.load_state_dict(backbone.model.state_dict(), strict=False)  # the extractor holds all but fc
    net.eval()
    with torch.no_grad():
        h = net.maxpool(net.relu(net.bn1(net.conv1(x))))
        expected = []
        for stage in (net.layer1, net.layer2, net.layer3, net.layer4):
            h = stage(h)
            expected.append(h.mean(dim=(2, 3)))
        for got, want in zip(backbone(x), expected, strict=True):
            torch.testing.assert_close(got, want)
    assert_same_and_loo(*round_trip(backbone, tmp_path))


@pytest.mark.parametrize(
    "model, layers, dims",
    [
        ("mobilenet_v3_small", ["features.1", "features.3"], (16, 24)),
        ("vit_b_16", None, (768,) * 13),  # 12 encoder layers (CLS token) + the final norm
    ],
)
def test_torchvision_named_layers_and_vit_at_another_size(model, layers, dims, tmp_path: Path):
    config = BackboneConfig(name="torchvision", model=model, in_channels=1, input_size=32, layers=layers)
    backbone = build_backbone(config).eval()
    assert backbone.layer_dims == dims
    if model == "vit_b_16":
        assert backbone.pool == "cls" and backbone.layer_names[-1] == "encoder.ln"
        assert backbone.layer_names[:2] == ("block 1", "block 2")  # not encoder.layers.encoder_layer_0
        assert backbone.layers[0] == "encoder.layers.encoder_layer_0"  # the graph node it reads
    else:
        assert backbone.layer_names == tuple(layers)  # named by the config: kept as given
    assert_same_and_loo(*round_trip(backbone, tmp_path))


def test_torchvision_default_layers_have_readable_names():
    from laya.model.backbones.torchvision import layer_label

    backbone = build_backbone(BackboneConfig(name="torchvision", model="mobilenet_v3_small", in_channels=3,
                                             input_size=32))  # fmt: skip
    assert backbone.layers[7] == "features.7" and backbone.layer_names[7] == "block 7"
    assert [layer_label(n) for n in ("layer1", "trunk_output.block2", "features.denseblock1", "stem")] == [
        "layer1", "block2", "denseblock1", "stem"
    ]  # fmt: skip


def test_torchvision_unknown_layer_and_model_are_clear_errors():
    with pytest.raises(ValueError, match="has no layer"):
        build_backbone(
            BackboneConfig(name="torchvision", model="resnet18", in_channels=3, input_size=32, layers=["nope"])
        )
    with pytest.raises(CheckpointError, match="not a torchvision classification model"):
        BackboneConfig.from_dict({"name": "torchvision", "model": "fasterrcnn_resnet50_fpn"})


@pytest.mark.parametrize("model_type", sorted(TINY_TRANSFORMERS))
def test_transformers_hidden_states_pooled_and_round_tripped(model_type: str, tmp_path: Path):
    from transformers import AutoConfig, AutoModel

    config = BackboneConfig.from_dict(
        {"name": "transformers", "model": model_type, "in_channels": 3, "input_size": 32,
         "model_kwargs": TINY_TRANSFORMERS[model_type]}
    )  # fmt: skip
    backbone = build_backbone(config).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        states = backbone.model(pixel_values=x, output_hidden_states=True).hidden_states
        hidden = backbone(x)
    assert len(hidden) == len(states) - 1  # the embeddings are skipped
    cls = model_type in ("vit", "deit")
    for got, state in zip(hidden, states[1:], strict=True):
        want = state[:, 0] if cls else (state.mean(dim=1) if state.ndim == 3 else state.mean(dim=(2, 3)))
        torch.testing.assert_close(got, want)
    assert isinstance(backbone.model, type(AutoModel.from_config(AutoConfig.for_model(model_type))))
    assert_same_and_loo(*round_trip(backbone, tmp_path))


def test_transformers_size_it_cannot_take_is_refused_with_sizes_that_work():
    """Swin's windows at 64 px raised a raw RuntimeError (tensor a (16) vs b (49)); now a ValueError names the
    model, the size and sides that build and run (tried on the meta device), as timm's refusal does."""
    tiny_swin = {"embed_dim": 8, "depths": [1, 1, 1, 1], "num_heads": [1, 1, 1, 1]}  # window 7, patch 4
    config = BackboneConfig(name="transformers", model="swin", in_channels=3, input_size=64, model_kwargs=tiny_swin)
    with pytest.raises(ValueError, match=r"transformers model_type 'swin' cannot take 64x64 inputs") as refused:
        build_backbone(config)
    sizes = [int(s) for s in re.search(r"sizes that work: ([\d, ]+)", str(refused.value)).group(1).split(", ")]
    assert 224 in sizes and 64 not in sizes and "(native: 224)" in str(refused.value)
    built = build_backbone(BackboneConfig(**{**config.to_dict(), "input_size": sizes[0]}))
    assert built(torch.zeros(1, 3, sizes[0], sizes[0]))[-1].shape == (1, built.layer_dims[-1])


@pytest.mark.parametrize(
    "backbone, message",
    [
        ({"name": "transformers", "model": "auto_map"}, "must be a transformers model_type"),
        (
            {"name": "transformers", "model": "vit", "model_kwargs": {"trust_remote_code": True}},
            "not an allowed argument",
        ),
        ({"name": "transformers", "model": "vit", "model_kwargs": {"name_or_path": "http://x"}}, "names files"),
        ({"name": "transformers", "model": "vit", "model_kwargs": {"hidden_size": 10**9}}, "must be in"),
        ({"name": "torchvision", "model": "resnet18", "model_kwargs": {"weights": "DEFAULT"}}, "names files, weights"),
        ({"name": "torchvision", "model": "resnet18", "model_kwargs": {"dropout": 0.5}},
         "allowed: groups, num_classes, width_per_group, zero_init_residual"),  # its class's plain arguments
        ({"name": "torchvision", "model": "googlenet", "model_kwargs": {"aux_logits": "os.system"}}, "must be a boolean"),
        ({"name": "torchvision", "model": "googlenet", "model_kwargs": {"dropout": 1e9}}, "must be in"),
        ({"name": "torchvision", "model": "resnet18", "model_kwargs": {"num_classes": 1}}, "must be in"),
        ({"name": "torchvision", "model": "resnet18", "layers": ["x" * 300]}, "at most 200 characters"),
        ({"name": "wrapped", "layers": ["a"], "model": "os:system; rm"}, "must be an import path"),
        ({"name": "wrapped", "model": "os:getcwd"}, "needs the names of the layers"),
        ({"name": "wrapped", "layers": ["a"], "model_kwargs": {"x": [1, 2]}}, "backbone.model_kwargs"),
    ],
)
def test_hostile_family_configs_are_refused(backbone, message):
    with pytest.raises(CheckpointError, match=message):
        BackboneConfig.from_dict(backbone)


class Tiny(nn.Module):
    """A user's own module: two conv stages and a token stage returning a tuple."""

    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.stage = nn.Sequential(nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU())
        self.mix = nn.MultiheadAttention(2 * width, 1, batch_first=True)
        self.fc = nn.Linear(2 * width, 10)

    def forward(self, x):
        h = self.stage(self.stem(x)).flatten(2).transpose(1, 2)
        h, _ = self.mix(h, h, h)
        return self.fc(h.mean(dim=1))


def make_tiny(width: int = 4) -> Tiny:
    return Tiny(width)


def test_wrapped_module_hooks_early_exit_and_checkpoint(tmp_path: Path):
    torch.manual_seed(0)
    backbone = wrap(Tiny(), layers=["stem", "stage", "mix"], input_size=8).eval()
    assert backbone.layer_dims == (4, 8, 8) and backbone.layer_names == ("stem", "stage", "mix")
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        hidden = backbone(x)
        net = backbone.model
        stem = net.stem(x)
        torch.testing.assert_close(hidden[0], stem.mean(dim=(2, 3)))
        tokens = net.stage(stem).flatten(2).transpose(1, 2)
        torch.testing.assert_close(hidden[2], net.mix(tokens, tokens, tokens)[0].mean(dim=1))
        for k, h in enumerate(hidden):
            torch.testing.assert_close(backbone.forward_to(x, k), h)
    model, loaded = round_trip(backbone, tmp_path, module=Tiny())
    assert_same_and_loo(model, loaded)
    with pytest.raises(CheckpointError, match=r"load_checkpoint\(path, module="):
        load_checkpoint(tmp_path / "ckpt")


def test_wrapped_import_path_only_with_an_explicit_opt_in(tmp_path: Path):
    backbone = wrap(make_tiny(6), layers=["stem", "stage"], input_size=8, import_path=f"{__name__}:make_tiny", width=6)
    model, loaded = round_trip(backbone, tmp_path, allow_import=True)
    assert_same_and_loo(model, loaded)
    with pytest.raises(CheckpointError, match="allow_import=True"):
        load_checkpoint(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match="rebuilt only from Python"):
        load_checkpoint(tmp_path / "ckpt", confine=Confinement(tmp_path), allow_import=True)


def test_a_head_trains_on_a_wrapped_module_and_evaluate_reads_it(image_folder: Path, tmp_path: Path):
    """The docs' recipe: train(config, module=...), then load with the module and evaluate."""
    from laya.analysis.evaluate import EvalOptions, evaluate
    from tests.conftest import tiny_config

    layers = ["stem", "stage", "mix"]
    config = tiny_config(image_folder, tmp_path / "run", max_epochs=2)
    config.backbone = BackboneConfig(name="wrapped", layers=layers, freeze=True, model=f"{__name__}:Tiny")
    torch.manual_seed(0)
    net = Tiny()
    out = train_with_module(config, net)
    checkpoint = load_checkpoint(out, module=Tiny())
    assert checkpoint.layer_names == tuple(layers) and checkpoint.meta.backbone.name == "wrapped"
    torch.testing.assert_close(checkpoint.model.backbone.model.stem.weight, net.stem.weight)
    report = evaluate(checkpoint, checkpoint.load_data("test"), EvalOptions(ig_steps=2, resamples=50))
    assert 0 <= report["accuracy_ci"]["estimate"] <= 1 and len(report["layer_names"]) == 3
    from laya.cli import main

    evaluate_args = ["evaluate", "--checkpoint", str(out), "--resamples", "20", "--ig-steps", "2", "--modes", "mean"]
    assert main(evaluate_args) == 2  # the module's code is not imported without the opt-in
    assert main([*evaluate_args, "--allow-import"]) == 0 and (out / "report.json").is_file()


def train_with_module(config, module: nn.Module) -> Path:
    from laya.training.train import train

    return train(config, module=module)


def test_dashboard_loads_a_wrapped_checkpoint_only_from_the_operators_folder_with_the_opt_in(tmp_path, monkeypatch):
    """``laya dashboard --allow-import`` (LAYA_ALLOW_IMPORT=1): wrapped checkpoints in LAYA_MODELS load;
    uploads and other roots never import code."""
    from laya.app import deploy

    models, uploads, other = tmp_path / "models", tmp_path / "uploads", tmp_path / "other"
    backbone = wrap(make_tiny(), layers=["stem", "stage"], input_size=8, import_path=f"{__name__}:make_tiny")
    for root in (models, uploads, other):
        round_trip(backbone, root / "setting", module=make_tiny())
    monkeypatch.setenv("LAYA_MODELS", str(models))
    monkeypatch.setenv("LAYA_PATH_ROOTS", str(other))
    loads = {}
    for allow in ("0", "1"):
        monkeypatch.setenv("LAYA_ALLOW_IMPORT", allow)
        for root in (models, uploads, other):
            path = root / "setting" / "ckpt"
            try:
                load_checkpoint(path, confine=deploy.confinement(path, uploads))
                loads[allow, root.name] = True
            except CheckpointError as error:
                assert "rebuilt only from Python" in str(error)
                loads[allow, root.name] = False
    assert loads == {("0", "models"): False, ("0", "uploads"): False, ("0", "other"): False,
                     ("1", "models"): True, ("1", "uploads"): False, ("1", "other"): False}  # fmt: skip


def test_a_torchvision_network_is_written_with_the_keys_its_weights_file_has(tmp_path: Path):
    """MaxViT's traced graph holds its relative position indices as constants under other names: the backbone writes
    the built network's state dict (the keys of the user's weights file), which builds the same backbone again, and
    the network the report hooks takes those indices from it (issue 47's breadth run: the attached setting could
    not be read back, then its network report found no such buffer)."""
    from safetensors.torch import save_file

    from laya.analysis.network.recording import as_network
    from laya.model.checkpoint import atomic_write_tensors

    torch.manual_seed(0)
    network = torchvision.models.maxvit_t(num_classes=3)
    save_file({k: v.contiguous() for k, v in network.state_dict().items()}, tmp_path / "w.safetensors")
    config = BackboneConfig(name="torchvision", model="maxvit_t", in_channels=3, input_size=224,
                            weights=str(tmp_path / "w.safetensors"), model_kwargs={"num_classes": 3},
                            pre_logits=True)  # fmt: skip
    backbone = build_backbone(config).eval()
    assert any(k.startswith("_tensor_constant") for k in backbone.model.state_dict())  # the graph's own names
    assert backbone.network_state().keys() == network.state_dict().keys()
    atomic_write_tensors(tmp_path / "written.safetensors", backbone.network_state())
    again = build_backbone(replace(config, weights=str(tmp_path / "written.safetensors"))).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(backbone(x), again(x), strict=True))
        # the network the report hooks unit by unit, rebuilt around the graph's tensors and those constants
        assert torch.equal(as_network(backbone)(x), network.eval()(x))
