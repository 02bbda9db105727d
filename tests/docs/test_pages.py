"""Docs pages that describe the code's structure list what is there."""

import pkgutil
import re
import sys
from importlib import import_module
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_library_page_lists_every_module():
    """docs/library.md's package table names every module of each subpackage, and no module that is gone."""
    text = (ROOT / "docs" / "library.md").read_text()
    rows = dict(re.findall(r"^\| `(laya(?:\.\w+)+)` \| ([^|]+) \|", text, re.M))
    assert set(rows) == {"laya.model", "laya.data", "laya.analysis", "laya.analysis.head", "laya.analysis.network",
                         "laya.analysis.depth", "laya.training", "laya.app", "laya.sandbox", "laya.cli"}  # fmt: skip
    for package, cell in rows.items():
        listed = set(re.findall(r"`(\w+)`", cell))
        present = {m.name for m in pkgutil.iter_modules(import_module(package).__path__)}
        assert listed == present, f"docs/library.md, {package}: missing {present - listed}, gone {listed - present}"


def test_the_layout_record_draws_every_folder_of_the_package_once():
    """docs/decisions/package-layout.md's tree has one line per folder of ``laya/`` (a package: its
    ``__init__.py``), none that is gone, and the library page a row for each of them but the backbone families
    (listed as ``backbones`` under ``laya.model``)."""
    text = (ROOT / "docs" / "decisions" / "package-layout.md").read_text()
    tree = re.search(r"```\n(laya/ .*?)```", text, re.S).group(1)
    drawn = [line.split()[0] for line in tree.splitlines() if line.startswith("laya/")]
    folders = sorted(f"{p.parent.relative_to(ROOT).as_posix()}/" for p in (ROOT / "laya").rglob("__init__.py"))
    assert sorted(drawn) == folders and len(drawn) == len(set(drawn))
    library = (ROOT / "docs" / "library.md").read_text()
    rows = set(re.findall(r"^\| `(laya(?:\.\w+)+)` \|", library, re.M))
    assert rows == {f[:-1].replace("/", ".") for f in folders} - {"laya", "laya.model.backbones"}


def test_dashboard_page_lists_every_page():
    text = (ROOT / "docs" / "dashboard.md").read_text()
    titles = {re.search(r'st\.title\("([^"]+)"\)', p.read_text()).group(1) for p in (ROOT / "pages").glob("*.py")
              if "st.title(" in p.read_text()}  # fmt: skip
    assert titles, "no page titles found"
    shown = set(re.findall(r"^\| \*\*([^*]+)\*\* \|", text, re.M))
    assert titles <= shown, f"docs/dashboard.md does not describe {titles - shown}"


def test_home_page_counts_the_dashboard_pages():
    """docs/index.md's "the N pages" is the number of pages in pages/ (one st.title each)."""
    words = {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}
    count = sum("st.title(" in p.read_text() for p in (ROOT / "pages").glob("*.py"))
    said = re.findall(r"the (\w+) pages", (ROOT / "docs" / "index.md").read_text())
    assert said == [words.get(count, str(count))], f"docs/index.md says the {said} pages; pages/ has {count}"


def test_repository_paths_in_the_docs_exist():
    """A file of the repository named in the docs (``scripts/…``, ``tests/…``, ``laya/…``) is there."""
    pattern = re.compile(r"(?<![\w/.-])((?:scripts|benchmarks|tests|laya|pages|docs)/[\w./-]*\w)")
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text()
        for match in pattern.finditer(text):
            path = ROOT / match.group(1)
            if not (path.exists() or path.with_suffix(".py").exists()):
                missing.append(f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1} {match.group(1)}")
    assert not missing, "paths that do not exist: " + ", ".join(missing)


def test_no_page_is_a_wall_of_text():
    """Docs split by topic: every page's hand-written text (its generated blocks aside, like the API reference's
    tables) stays under about 3,000 words. depth-analytics.md held 10,626 before it was split."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import prose_claims

    long = {str(p.relative_to(ROOT)): n for p in prose_claims.pages()
            if (n := len(prose_claims.BLOCK.sub("", p.read_text()).split())) > 3000}  # fmt: skip
    assert not long, f"pages over 3,000 hand-written words (split them by topic): {long}"
