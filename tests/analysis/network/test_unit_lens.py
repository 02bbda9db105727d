"""The network's own lens: logit lens on a ViT's blocks, tuned lens on any network (fitted to the network's own
final distribution), per-input profiles, prediction depth, class x unit tables, storage."""

import json
import re
import time

import plotly.graph_objects as go
import pytest
import timm
import torch
import torchvision
from torch import nn

from laya.analysis.network.lens import (
    TunedLens,
    TunedLensConfig,
    class_unit_figure,
    class_unit_table,
    fit_tuned_lens,
    lens_profile,
    load_tuned_lens,
    logit_lens,
    own_readout,
    prediction_depth,
    profile_figure,
    save_tuned_lens,
    unit_lens,
)
from laya.model.attached_files import AttachedFileError
from tests.hostile import LENS_CASES, LENS_FILES, attached_setting
from tests.model.test_own_head import TINY_VIT

VIT_UNITS = [f"blocks.{i}" for i in range(6)]
CNN_UNITS = ["blocks.0", "blocks.1", "blocks.2"]
CLASSES = ["a", "b", "c", "d"]


class SmallCNN(nn.Module):
    """Three conv units, then a head that is not the last unit's average: a 1x1 conv head (as EfficientNet's),
    average pooling and the classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Conv2d(i, o, 3, stride=2, padding=1), nn.BatchNorm2d(o),
                                                    nn.ReLU()) for i, o in [(3, 8), (8, 16), (16, 16)]])  # fmt: skip
        self.conv_head = nn.Sequential(nn.Conv2d(16, 24, 1), nn.ReLU())
        self.fc = nn.Linear(24, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv_head(self.blocks(x)).mean((2, 3)))


def images(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Class c: a bright quadrant c in noise, ``(n, 3, 16, 16)``."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 4
    x = torch.randn(n, 3, 16, 16, generator=g) * 0.5
    for i, c in enumerate(labels.tolist()):
        x[i, :, 8 * (c // 2) : 8 * (c // 2) + 8, 8 * (c % 2) : 8 * (c % 2) + 8] += 1.0
    return x, labels


@pytest.fixture(scope="module")
def cnn() -> SmallCNN:
    torch.manual_seed(0)
    net = SmallCNN()
    x, y = images(512, 0)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(60):
        optimizer.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        optimizer.step()
    net.zero_grad(set_to_none=True)
    return net.eval()


@pytest.fixture(scope="module")
def vit() -> nn.Module:
    torch.manual_seed(0)
    return timm.create_model("test_vit", num_classes=4, img_size=16, patch_size=4).eval()


def test_logit_lens_of_the_last_block_is_the_network(vit):
    x, _ = images(8, 1)
    lens = logit_lens(vit, x, VIT_UNITS)
    assert lens.log_q.shape == (8, 6, 4) and lens.source == "logit lens"
    assert torch.allclose(lens.log_q[:, -1], lens.log_p, atol=1e-5)  # norm + CLS + head of the last block
    assert lens.kl[:, -1].abs().max() < 1e-6
    assert (prediction_depth(lens) <= 6).all()  # the last unit always agrees


def test_logit_lens_of_a_transformers_vit_s_last_layer_is_the_network():
    """A transformers ViT's layers write into the stream that its ``layernorm`` and ``classifier`` read on the CLS
    token: the logit lens applies, and at the last layer it is the network's own distribution."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    network = ViTForImageClassification(ViTConfig(**TINY_VIT, image_size=16, num_labels=4)).eval()
    layers = next(n for n, m in network.named_modules() if isinstance(m, nn.ModuleList))  # the installed version's
    units = [f"{layers}.{i}" for i in range(TINY_VIT["num_hidden_layers"])]
    readout = own_readout(network)
    assert (readout.space, readout.pool, readout.classifier, readout.width) == ("residual", "cls", "classifier", 32)
    x, _ = images(8, 1)
    lens = logit_lens(network, x, units)
    with torch.no_grad():
        logits = network(x).logits
    assert lens.log_q.shape == (8, 2, 4) and lens.source == "logit lens"
    assert torch.allclose(lens.log_p, torch.log_softmax(logits.double(), -1), atol=1e-5)
    assert torch.allclose(lens.log_q[:, -1], lens.log_p, atol=1e-5) and lens.kl[:, 0].max() > 1e-4


def test_logit_lens_is_refused_where_units_are_not_in_the_classifier_space(cnn):
    assert own_readout(cnn).space == "pre-logits"
    assert own_readout(torchvision.models.resnet18(num_classes=4)).space == "pre-logits"
    with pytest.raises(ValueError, match="logit lens does not apply"):
        logit_lens(cnn, images(2, 1)[0], CNN_UNITS)


def test_tuned_lens_last_unit_reproduces_the_network(cnn):
    x, y = images(1024, 2)
    before = {n: p.clone() for n, p in cnn.state_dict().items()}
    tuned = fit_tuned_lens(cnn, x, CNN_UNITS, y, TunedLensConfig([], [], 1, 1, epochs=30, lr=1e-2), command="test")
    assert all(p.grad is None for p in cnn.parameters())
    assert all(torch.equal(before[n], p) for n, p in cnn.state_dict().items())
    assert tuned.config.dims == [8, 16, 16] and tuned.config.width == 24 and tuned.config.command == "test"
    test_x, _ = images(400, 3)
    lens = unit_lens(cnn, test_x, CNN_UNITS, tuned)
    agreement = (lens.log_q[:, -1].argmax(-1) == lens.final).double().mean()
    assert agreement >= 0.99
    kl = lens.kl.mean(0)
    assert kl[-1] < 0.05 and kl[-1] <= kl[0]  # deeper units read closer to the final distribution
    assert tuned.config.fit["last_unit_agreement"] >= 0.99


def test_tuned_lens_of_a_vit_starts_at_the_logit_lens(vit):
    x, y = images(64, 4)
    untrained = fit_tuned_lens(vit, x, VIT_UNITS, y, TunedLensConfig([], [], 1, 1, epochs=0))
    assert untrained.config.space == "residual"
    assert torch.allclose(unit_lens(vit, x, VIT_UNITS, untrained).log_q, logit_lens(vit, x, VIT_UNITS).log_q)
    tuned = fit_tuned_lens(vit, x, VIT_UNITS, y, TunedLensConfig([], [], 1, 1, epochs=20, lr=1e-2))
    assert unit_lens(vit, x, VIT_UNITS, tuned).kl.mean() < logit_lens(vit, x, VIT_UNITS).kl.mean()


def test_stored_beside_a_checkpoint_and_checked_on_load(cnn, tmp_path):
    x, y = images(64, 5)
    tuned = fit_tuned_lens(cnn, x, CNN_UNITS, y, TunedLensConfig([], [], 1, 1, epochs=2), command="laya attach …")
    save_tuned_lens(tuned, tmp_path)
    loaded = load_tuned_lens(tmp_path, cnn)
    assert loaded.config.to_dict() == tuned.config.to_dict()
    assert torch.equal(unit_lens(cnn, x, CNN_UNITS, loaded).log_q, unit_lens(cnn, x, CNN_UNITS, tuned).log_q)
    assert json.loads((tmp_path / "tuned_lens.json").read_text())["command"] == "laya attach …"
    assert load_tuned_lens(tmp_path / "none") is None
    record = json.loads((tmp_path / "tuned_lens.json").read_text())
    (tmp_path / "tuned_lens.json").write_text(json.dumps(record | {"dims": [8, 16, 32]}))
    with pytest.raises(ValueError, match="does not fit its config"):
        load_tuned_lens(tmp_path)
    (tmp_path / "tuned_lens.json").write_text(json.dumps(record | {"pickle": "x"}))
    with pytest.raises(ValueError, match="not a tuned lens config"):
        load_tuned_lens(tmp_path)
    with pytest.raises(ValueError, match="fitted for units"):
        unit_lens(cnn, x, CNN_UNITS[:2], tuned)


def test_profile_depth_and_class_table_numbers(vit):
    x, labels = images(12, 6)
    lens = logit_lens(vit, x, VIT_UNITS)
    profile = lens_profile(lens, 0, CLASSES, VIT_UNITS)
    q = lens.log_q[0].exp()
    assert list(profile.columns) == ["unit", "unit_index", "predicted", "prob", "kl", "agrees"]
    assert profile["prob"].tolist() == pytest.approx(q[:, lens.final[0]].tolist())
    assert profile["predicted"].tolist() == [CLASSES[c] for c in q.argmax(-1).tolist()]
    agrees = torch.tensor(profile["agrees"].tolist())
    trailing = int(agrees.flip(0).long().cumprod(0).sum())
    assert int(prediction_depth(lens)[0]) == 6 - trailing + 1
    table = class_unit_table(lens, labels, CLASSES, VIT_UNITS, "prob")
    assert list(table.index) == ["all", *CLASSES] and table.loc["all", "n"] == 12 and table.loc["b", "n"] == 3
    assert table.loc["all", "blocks.2"] == pytest.approx(float(lens.prob[:, 2].mean()))
    assert table.loc["c", "blocks.5"] == pytest.approx(float(lens.prob[labels == 2, 5].mean()))
    agree = class_unit_table(lens, labels, CLASSES, VIT_UNITS, "agrees")
    assert agree.loc["all", "blocks.5"] == 1.0
    with pytest.raises(ValueError, match="unknown lens metric"):
        class_unit_table(lens, labels, CLASSES, VIT_UNITS, "depth")


def test_figures_are_built_not_shown(vit):
    x, labels = images(8, 7)
    lens = logit_lens(vit, x, VIT_UNITS)
    strip = profile_figure(lens_profile(lens, 0, CLASSES, VIT_UNITS), int(prediction_depth(lens)[0]))
    assert isinstance(strip, go.Figure) and [t.type for t in strip.data] == ["bar", "scatter"]
    assert len(strip.data[0].x) == 6
    heatmap = class_unit_figure(class_unit_table(lens, labels, CLASSES, VIT_UNITS, "kl"), "kl")
    assert heatmap.data[0].type == "heatmap" and len(heatmap.data[0].y) == 5 and len(heatmap.data[0].x) == 6


@pytest.mark.parametrize("case", LENS_CASES, ids=lambda c: c.name)
def test_hostile_lens_files_are_refused_naming_the_file_before_anything_is_built(case, tmp_path, monkeypatch):
    """Every hostile ``tuned_lens.*`` (a copy of the bundled own head's, broken one way) gets one AttachedFileError
    naming its file, in well under a second and before a translator is allocated (a width of 6,000 took 71 s and
    1.4 GB when the lens was built before its weights' header was compared with it)."""
    own = attached_setting(tmp_path, LENS_FILES)
    assert load_tuned_lens(own).config.units[0] == "bn1"  # the copy loads as it is
    case.write(own)

    def built(*args, **kwargs):
        raise AssertionError("a TunedLens was built from a refused file")

    monkeypatch.setattr(TunedLens, "__init__", built)
    start = time.monotonic()
    with pytest.raises(AttachedFileError, match=re.escape(case.message)) as refused:
        load_tuned_lens(own)
    assert time.monotonic() - start < 2.0
    message = str(refused.value)
    assert refused.value.file == case.file and case.file in message and str(tmp_path) not in message
