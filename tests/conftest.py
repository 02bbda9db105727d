"""Shared fixtures: tiny datasets and tiny trained models that the tests make themselves."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from laya.analysis.evaluate import EvalOptions
from laya.app.catalog import example_images
from laya.data.datasets import load_dataset
from laya.model.backbones import BackboneConfig
from laya.model.heads import HeadConfig
from laya.training.bundle import bundle, export_examples
from laya.training.settings import HEAD_NAMES
from laya.training.train import TrainConfig, train

torch.set_num_threads(1)
if os.environ.get("PYTEST_XDIST_WORKER"):  # n workers on n cores: their subprocesses (attach, torchrun) one thread each
    os.environ.setdefault("OMP_NUM_THREADS", "1")
CLASSES = ("blue", "green", "red")
DURATIONS = Path(__file__).with_name("durations.json")  # seconds per test file, written by --store-durations
SECONDS: Counter[str] = Counter()  # this run's, per test file (under xdist the controller sees every worker's)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help=f"write this run's seconds per test file to {DURATIONS.name} (make test-durations)")  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest test files first, by their seconds in :data:`DURATIONS` (new files last): ``make test`` hands
    files to its two workers in this order (``--no-loadscope-reorder``), so that no long file starts last and
    leaves one worker running it alone (the longest-first rule of scheduling)."""
    if not DURATIONS.is_file():
        return
    seconds = json.loads(DURATIONS.read_text())
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))  # stable: a file keeps its order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    SECONDS[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """``--store-durations``: this run's files replace their entries; the others' stay unless the file is gone."""
    if session.config.getoption("store_durations") and not os.environ.get("PYTEST_XDIST_WORKER"):
        root = Path(session.config.rootpath)
        stored = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
        merged = {name: s for name, s in stored.items() if (root / name).is_file()} | dict(SECONDS)
        ranked = sorted(merged.items(), key=lambda item: -item[1])
        DURATIONS.write_text(json.dumps({name: round(s, 1) for name, s in ranked}, indent=0) + "\n")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep decoded arrays and feature caches out of the user's ~/.cache."""
    os.environ["LAYA_CACHE"] = str(tmp_path_factory.mktemp("laya-cache"))


def make_image_folder(root: Path, size: int = 8, train: int = 24, test: int = 8, seed: int = 0) -> Path:
    """A 3-class RGB ImageFolder (``root/{train,test}/<class>/*.png``): each class is one dominant colour."""
    rng = np.random.default_rng(seed)
    for split, n in (("train", train), ("test", test)):
        for c, name in enumerate(CLASSES):
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                pixels = rng.integers(0, 90, size=(size, size, 3))
                pixels[:, :, 2 - c] += rng.integers(100, 160)
                Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(folder / f"{i:03d}.png")
    return root


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_image_folder(tmp_path_factory.mktemp("colours"))


def tiny_config(dataset: Path, out: Path, head: str = "laya", **overrides) -> TrainConfig:
    defaults = {
        "dataset": str(dataset),
        "backbone": BackboneConfig(name="mlp", widths=(16, 12, 8)),
        "head": HeadConfig(name=head, d_star=8, scorer_hidden=16),
        "out": str(out),
        "batch_size": 16,
        "max_epochs": 4,
        "patience": 2,
        "lr": 3e-3,
        "val_fraction": 0.25,
        "image_size": 8,
    }
    return TrainConfig(**{**defaults, **overrides})


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory, image_folder: Path) -> Path:
    """A models/ folder like the bundled one: 4 heads on one tiny MLP setting, with reports and examples."""
    root = tmp_path_factory.mktemp("models")
    runs = tmp_path_factory.mktemp("runs")
    setting = root / "colours-mlp"
    test = load_dataset(str(image_folder), "test", image_size=8)
    export_examples(test, setting / "examples")
    for head in HEAD_NAMES:
        train(tiny_config(image_folder, runs / head, head))
        bundle(runs / head, setting / head, test, EvalOptions(ig_steps=4))
    return root


@pytest.fixture(scope="module")
def setting(tiny_models: Path) -> Path:
    """The tiny models' one setting: four heads on one MLP."""
    return tiny_models / "colours-mlp"


@pytest.fixture(scope="module")
def example(setting: Path) -> bytes:
    """The setting's first example image, as uploaded."""
    return example_images(setting / "laya")[0].read_bytes()


@pytest.fixture(scope="session")
def attached_resnet(tmp_path_factory: pytest.TempPathFactory, image_folder: Path):
    """A torchvision ResNet-18 attached on the tiny image folder (its own head first, the tuned lens and the network
    report beside it): one run for the attach-family tests and the own-network pages, which only read it."""
    from tests.training.test_attach_families import attach_family

    return attach_family("torchvision", tmp_path_factory.mktemp("attach-torchvision"), image_folder)


@pytest.fixture(scope="session")
def attached_vit(tmp_path_factory: pytest.TempPathFactory, image_folder: Path):
    """timm's ``test_vit`` (six blocks, each with an attention and an MLP branch) attached on the tiny image folder,
    as :func:`attached_resnet`: for the own-network pages of a transformer."""
    from tests.training.test_attach_families import attach_family

    return attach_family("timm vit", tmp_path_factory.mktemp("attach-vit"), image_folder)
