"""Fixtures of the browser tests: Debian's Chromium (or a skip that says how to install it) and one dashboard
server per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.screenshots import CHROMIUM, serve

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def chromium() -> None:
    """Skip the module's browser tests (before their servers start) where the system Chromium is missing."""
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (make system-deps) to run the browser test")


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, models: Path) -> Iterator[str]:
    """The dashboard on the module's ``models`` folder, started once for the module's tests (each opens it in a
    browser of its own); its output goes to ``test-artifacts/<module>.log``."""
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(models, log=ARTIFACTS / f"{request.module.__name__.rsplit('.', 1)[-1]}.log") as url:
        yield url
