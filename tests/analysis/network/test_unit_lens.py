"""The network's own lens: logit lens on a ViT's blocks, tuned lens on any network (fitted to the network's own
final distribution), per-input profiles, prediction depth, class x unit tables, storage."""

import json
import math
import re
import time
from pathlib import Path

import plotly.graph_objects as go
import pytest
import timm
import torch
import torchvision
from torch import nn

from laya.analysis.depth.layer_lens import Lens
from laya.analysis.network.lens import (
    EPOCHS,
    TunedLens,
    TunedLensConfig,
    class_unit_figure,
    class_unit_table,
    lens_profile,
    load_tuned_lens,
    logit_lens,
    own_readout,
    prediction_depth,
    profile_figure,
    save_tuned_lens,
    unit_lens,
)
from laya.analysis.network.lens_fit import constant_kl, fit_tuned_lens, held_out_split, lens_summary
from laya.analysis.network.units import network_units
from laya.analysis.sample import sample_indices
from laya.data.datasets import DatasetNotFoundError
from laya.model.checkpoint import load_checkpoint
from laya.model.attached_files import AttachedFileError
from tests.hostile import LENS_CASES, LENS_FILES, attached_setting
from tests.model.test_own_head import TINY_VIT

VIT_UNITS = [f"blocks.{i}" for i in range(6)]
CNN_UNITS = ["blocks.0", "blocks.1", "blocks.2"]
CLASSES = ["a", "b", "c", "d"]
BUNDLED = Path(__file__).resolve().parents[3] / "models" / "cifar10-resnet18-half" / "own"


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
    assert (readout.space, readout.pool, readout.classifier, readout.width) == ("residual", "cls", ("classifier",), 32)
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
    assert tuned.config.fit["agreement"][-1] >= 0.99


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
    loaded = load_tuned_lens(tmp_path, cnn, CNN_UNITS)
    assert loaded.config.to_dict() == tuned.config.to_dict()
    other = re.escape("tuned_lens.json was fitted for units ['blocks.0', 'blocks.1', 'blocks.2']; the network's are "
                      "['blocks.0', 'blocks.1']")  # the network's units, not the config's compared with themselves
    with pytest.raises(AttachedFileError, match=f"^{other}"):
        load_tuned_lens(tmp_path, cnn, CNN_UNITS[:2])
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


def test_fit_stops_when_the_held_out_kl_stops_improving_and_keeps_the_best(cnn, tmp_path):
    x, y = images(400, 7)
    config = TunedLensConfig([], [], 1, 1, sample=400, epochs=500, patience=4, lr=3e-2, batch_size=64)
    tuned = fit_tuned_lens(cnn, x, CNN_UNITS, y, config)
    fit = tuned.config.fit
    trained = [i for i, u in enumerate(CNN_UNITS) if u not in fit["exact"]]
    assert trained and fit["split"] == "class-balanced" and (fit["train"], fit["held_out"]) == (320, 80)
    for i in trained:  # each translator stopped on its own, `patience` epochs after its best, long before the cap
        assert 0 < fit["best_epoch"][i] and fit["epochs_run"][i] == fit["best_epoch"][i] + 4 < 500
    chosen = sample_indices(y, 400, 0)
    _, held = held_out_split(400, 0.2, 0, y[chosen])
    lens = unit_lens(cnn, x[chosen][held], CNN_UNITS, tuned)  # the returned lens is the best one recorded
    assert lens.kl.mean(0).tolist() == pytest.approx(fit["kl"], rel=1e-5, abs=1e-7)
    assert fit["agreement"] == pytest.approx((lens.log_q.argmax(-1) == lens.final[:, None]).double().mean(0).tolist())
    assert fit["logit_kl"] is None  # a CNN's units are not in its classifier's space
    save_tuned_lens(tuned, tmp_path)
    record = json.loads((tmp_path / "tuned_lens.json").read_text())
    assert (record["patience"], record["epochs"], record["held_out"]) == (4, 500, 0.2)
    assert record["fit"]["best_epoch"] == fit["best_epoch"] and record["fit"]["epochs_run"] == fit["epochs_run"]


def test_held_out_split_is_seeded_and_class_balanced():
    labels = torch.arange(40) % 4
    train, held = held_out_split(40, 0.2, 3, labels)
    assert torch.bincount(labels[held]).tolist() == [2, 2, 2, 2] and len(train) == 32
    assert sorted([*train.tolist(), *held.tolist()]) == list(range(40))
    assert torch.equal(held, held_out_split(40, 0.2, 3, labels)[1]) and len(held_out_split(40, 0.25, 3)[1]) == 10
    for share in (0.0, 1.0, 0.01):
        with pytest.raises(ValueError, match="held-out share"):
            held_out_split(40, share, 0)


def test_the_best_constant_distribution_by_hand():
    log_p = torch.tensor([[0.8, 0.2], [0.4, 0.6]]).log()  # its mean, the best constant, is c = (0.6, 0.4)
    by_hand = [0.8 * math.log(0.8 / 0.6) + 0.2 * math.log(0.2 / 0.4), 0.4 * math.log(0.4 / 0.6) + 0.6 * math.log(1.5)]
    assert constant_kl(log_p, log_p.exp().mean(0)).tolist() == pytest.approx(by_hand)  # 0.0915, 0.0811
    lens = Lens(log_p.view(2, 1, 2).expand(2, 2, 2).log_softmax(-1), log_p, "tuned lens")  # 2 units, both the network
    table = lens_summary(lens, ["a", "b"], torch.tensor([0.6, 0.4]))
    assert table["constant_kl"].tolist() == pytest.approx([sum(by_hand) / 2] * 2)
    assert table["kl"].tolist() == pytest.approx([0, 0], abs=1e-7) and table["agreement"].tolist() == [1, 1]
    assert table["logit_kl"].isna().all() and lens_summary(lens, ["a", "b"])["constant_kl"].isna().all()


def test_the_fit_records_the_mean_final_distribution_of_its_training_part(cnn):
    x, y = images(40, 8)
    tuned = fit_tuned_lens(cnn, x, CNN_UNITS, y, TunedLensConfig([], [], 1, 1, sample=40, epochs=1))
    train, held = held_out_split(40, 0.2, 0, y)
    with torch.no_grad():
        p = cnn(x).softmax(-1)
    assert tuned.config.fit["constant"] == pytest.approx(p[train].mean(0).tolist(), abs=1e-6)
    c = p[train].mean(0)
    assert tuned.config.fit["constant_kl"] == pytest.approx(float((p[held] * (p[held] / c).log()).sum(-1).mean()),
                                                            rel=1e-4)  # fmt: skip


def test_a_lens_stored_before_early_stopping_still_loads():
    record = json.loads((BUNDLED / "tuned_lens.json").read_text())
    lens = load_tuned_lens(BUNDLED)
    assert lens.config.epochs == record["epochs"] and lens.config.fit == record["fit"]


@pytest.mark.data
def test_on_the_bundled_network_twice_the_cap_lowers_held_out_kl_by_under_2_percent():
    """The default fit on the bundled ResNet-18 (a class-balanced sample of 500 CIFAR-10 training inputs, to stay
    fast; ``laya attach`` fits on 2000): with the cap doubled, no unit's held-out KL drops by 2 % or more."""
    checkpoint = load_checkpoint(BUNDLED)
    try:
        train = checkpoint.load_data("train", stream=True)
    except DatasetNotFoundError as error:
        pytest.skip(f"dataset not on this machine: {error}")
    index = sample_indices(train.labels, 500, 0)
    x = torch.cat([checkpoint.preprocess(batch) for batch in train.iter_batches(index.split(250))])
    units = [u.name for u in network_units(checkpoint.model.backbone)]
    fits = [fit_tuned_lens(checkpoint.model.backbone, x, units, train.labels[index],
                           TunedLensConfig([], [], 1, 1, sample=500, epochs=cap)).config.fit
            for cap in (EPOCHS, 2 * EPOCHS)]  # fmt: skip
    for unit, at_cap, at_twice in zip(units, fits[0]["kl"], fits[1]["kl"]):
        assert at_twice >= 0.98 * at_cap, unit
    assert fits[0]["kl"][0] < fits[0]["constant_kl"]  # even the first unit reads more than no input at all


def test_a_fit_on_images_preprocessed_batch_by_batch_is_the_fit_on_their_preprocessed_whole(cnn):
    """``preprocess``: the sample is held as its images and each batch preprocessed when it runs (at 224 px a whole
    float sample was gigabytes); the lens is the same tensor for tensor."""
    x, y = images(96, 5)
    raw = ((x - x.min()) / (x.max() - x.min()) * 255).round().to(torch.uint8)
    preprocess = lambda batch: (batch.float() / 255 - 0.5) / 0.25  # noqa: E731
    config = TunedLensConfig([], [], 1, 1, sample=64, epochs=2, batch_size=16)
    whole = fit_tuned_lens(cnn, preprocess(raw), CNN_UNITS, y, config)
    batched = fit_tuned_lens(cnn, raw, CNN_UNITS, y, config, preprocess=preprocess)
    from laya.data.datasets import ImageArrays

    split = fit_tuned_lens(cnn, ImageArrays(raw, y, tuple("abcd")), CNN_UNITS, y, config, preprocess=preprocess)
    for other in (batched, split):  # a split is read batch by batch as its images are, never copied whole
        assert whole.state_dict().keys() == other.state_dict().keys()
        assert all(torch.equal(whole.state_dict()[k], other.state_dict()[k]) for k in whole.state_dict())
        assert whole.config.fit == other.config.fit
