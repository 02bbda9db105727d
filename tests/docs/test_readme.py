"""README.md stays a short front page: ≤ 80 lines and 1,500 words, links that resolve; the results overview it
once held is a generated table of docs/results.md."""

import importlib.util
import re
from pathlib import Path

from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results.md"
MAX_WORDS, MAX_LINES = 1500, 80
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
OVERVIEW = re.compile(r"<!-- results-overview:start -->\n(.*?)\n<!-- results-overview:end -->", re.S)


def anchors(markdown: Path) -> set[str]:
    """Heading anchors as MkDocs' toc (and GitHub, for headings without markup) writes them."""
    text = re.sub(r"```.*?```", "", markdown.read_text(), flags=re.S)
    return {slugify(m.group(1).strip(), "-") for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def relative_links(markdown: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", markdown.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_readme_fits_on_a_screen():
    """Counted as ``wc -w`` does: whitespace-separated tokens of the Markdown, code and tables included."""
    words = len(README.read_text().split())
    assert words <= MAX_WORDS, f"README.md has {words} words (> {MAX_WORDS}): move the detail into a docs/ page"
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines (> {MAX_LINES}): move the detail into a docs/ page"


def test_readme_links_resolve():
    links = relative_links(README)
    assert any(t.startswith("docs/") for t in links)
    for target in links:
        path, _, anchor = target.partition("#")
        file = (README.parent / path) if path else README
        assert file.exists(), f"README.md links to {target}: no such file"
        if anchor and file.suffix == ".md":
            assert anchor in anchors(file), f"README.md links to {target}: {path or 'README.md'} has no such heading"


def test_anchor_check_can_fail(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Results\n\n## cifar10-cnn\n\n## The paper's claims\n\n```bash\n# not a heading\n```\n")
    assert anchors(page) == {"results", "cifar10-cnn", "the-papers-claims"}


def test_results_overview_table_is_generated():
    """The results page's overview between the markers is what ``scripts/readme_tables.py --overview`` prints for
    its settings."""
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    match = OVERVIEW.search(RESULTS.read_text())
    assert match, "docs/results.md has no results-overview markers"
    table = match.group(1)
    settings = [ROOT / "models" / name for name in re.findall(r"^\| \[([\w.-]+)\]\(#", table, re.M)]
    assert len(settings) == 4
    command = "python scripts/readme_tables.py --overview " + " ".join(f"models/{s.name}" for s in settings)
    assert table == module.overview(settings, docs_page=""), f"docs/results.md's overview table is stale: paste the output of `{command}`"


def test_readme_commands_are_make_targets():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("dashboard", "test", "docs"):
        assert f"make {target}" in README.read_text()
        assert re.search(rf"^{target}:", makefile, re.M), f"`make {target}` is in README.md but not in the Makefile"
