"""The docs' figures (scripts/doc_figures.py): every one redraws from the committed reports, every committed PNG is
one of them at the size it draws now, and every analysis page shows one with the command that makes it."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
doc_figures = pytest.importorskip("doc_figures")
FIGURES = ROOT / "docs" / "figures"
ANALYSIS_PAGES = ["results", "depth-analytics", "detection", "early-exit", "pruning", "where-and-depth",
                  "spatial-maps", "spatial-maps-benchmark", "patching", "lens", "trained-networks", "lesion-veit"]  # fmt: skip


def _size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise AssertionError(f"{path} is not a PNG")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_every_figure_redraws_and_matches_the_committed_png(tmp_path: Path):
    written = doc_figures.write(tmp_path)
    assert sorted(p.name for p in written) == sorted(p.name for p in FIGURES.glob("*.png"))
    for path in written:
        assert _size(path) == _size(FIGURES / path.name), f"{path.name}: rerun python scripts/doc_figures.py"


def test_unknown_figure_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ValueError, match=r"unknown figure\(s\) \['nope'\]"):
        doc_figures.write(tmp_path, ["nope"])


@pytest.mark.parametrize("page", ANALYSIS_PAGES)
def test_analysis_pages_show_a_figure_with_its_command(page: str):
    text = (ROOT / "docs" / f"{page}.md").read_text()
    images = re.findall(r"!\[[^\]]+\]\(figures/([\w-]+)\.png\)", text)
    assert images, f"docs/{page}.md shows no figure from docs/figures/"
    for name in images:
        assert name in doc_figures.FIGURES and (FIGURES / f"{name}.png").is_file()
        assert f"python scripts/doc_figures.py {name}" in text, f"docs/{page}.md: no command under {name}.png"
