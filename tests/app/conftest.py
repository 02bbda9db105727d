"""Fixtures of the dashboard's tests: the tiny models' one setting (four heads on one MLP) and an example image."""

from __future__ import annotations

from pathlib import Path

import pytest

from laya.app.catalog import example_images


@pytest.fixture(scope="module")
def setting(tiny_models: Path) -> Path:
    return tiny_models / "colours-mlp"


@pytest.fixture(scope="module")
def example(setting: Path) -> bytes:
    return example_images(setting / "laya")[0].read_bytes()
