"""docs/deploying.md and docs/sandboxed-workers.md list the LAYA_* variables as generated blocks printed from
laya.settings.SETTINGS (scripts/claims/environment.py): current, and every variable listed once."""

import re
import sys
from pathlib import Path

import pytest

from laya.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from claims.environment import settings_table  # noqa: E402

PAGES = {"server": ROOT / "docs" / "deploying.md", "workers": ROOT / "docs" / "sandboxed-workers.md"}


@pytest.mark.parametrize("group", sorted(PAGES))
def test_the_settings_tables_are_current(group: str) -> None:
    """Fix: `python scripts/prose_claims.py --write` (it rewrites every generated block)."""
    page = PAGES[group].read_text()
    block = page.split(f"<!-- generated: settings-table {group} -->\n")[1].split("<!-- /generated -->")[0]
    assert block == settings_table(group), f"{PAGES[group].relative_to(ROOT)}: settings-table {group} is stale"


def test_every_variable_is_listed_once_in_the_docs() -> None:
    listed = [m for page in PAGES.values() for m in re.findall(r"^\| `(LAYA_\w+)` \|", page.read_text(), re.M)]
    assert sorted(listed) == sorted(SETTINGS)


def test_an_unknown_group_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no settings in group 'x'; expected one of \\['server', 'workers'\\]"):
        settings_table("x")
