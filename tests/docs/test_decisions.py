"""Design decisions are short records filed by topic (docs/decisions/<topic>.md), each listed in the index, which
is the nav's one entry for them (the records are ``not_in_nav``): a record's file name and headings name no issue,
it has Context, Decision and Consequences, and it stays short."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "docs" / "decisions"
MAX_WORDS = 900  # the records aim at 600; past 900 a record holds more than one decision
SECTIONS = ("context", "decision", "consequences")
ISSUE = re.compile(r"issue[\s_-]*\d+|§", re.I)


def records() -> list[Path]:
    return sorted(p for p in RECORDS.glob("*.md") if p.name != "index.md")


def headings(text: str) -> list[tuple[int, str]]:
    """``(level, title)`` of every ATX heading outside fenced code."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [(len(m.group(1)), m.group(2).strip()) for m in re.finditer(r"^(#{1,6}) (.+)$", text, re.M)]


def problems(record: Path, index: str, nav: set[str]) -> list[str]:
    """What is wrong with one record, given the index page's text and the nav's ``decisions/…`` entries."""
    text, name, found = record.read_text(), record.name, []
    if ISSUE.search(record.stem):
        found.append(f"{name}: the file name names an issue; name it by its topic")
    found += [f"{name}: heading {title!r} names an issue" for _, title in headings(text) if ISSUE.search(title)]
    titles = [t.lower() for level, t in headings(text) if level == 2]
    missing = [s for s in SECTIONS if s not in titles]
    if missing:
        found.append(f"{name}: no '## {'/'.join(m.capitalize() for m in missing)}' heading (has: {titles})")
    elif [t for t in titles if t in SECTIONS] != list(SECTIONS):
        found.append(f"{name}: sections in the order {titles}, expected Context, Decision, Consequences")
    if [level for level, _ in headings(text)].count(1) != 1:
        found.append(f"{name}: expected one '# title' heading")
    words = len(text.split())
    if words > MAX_WORDS:
        found.append(f"{name}: {words} words (> {MAX_WORDS}); split it by topic")
    if f"({name})" not in index:
        found.append(f"{name}: not linked from docs/decisions/index.md")
    if f"decisions/{name}" not in nav:
        found.append(f"{name}: not in mkdocs.yml's nav nor behind the index (not_in_nav)")
    return found


def behind_the_index() -> set[str]:
    """The records the site builds without a nav entry: those ``not_in_nav`` names (``/decisions/*.md``)."""
    from fnmatch import fnmatch

    patterns = yaml.safe_load((ROOT / "mkdocs.yml").read_text()).get("not_in_nav", "").split()
    return {f"decisions/{r.name}" for r in records() if any(fnmatch(f"/decisions/{r.name}", p) for p in patterns)}


def nav_entries() -> set[str]:
    def walk(node) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for v in node.values() for p in walk(v)]
        return [p for v in node for p in walk(v)]

    return set(walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]))


def test_decision_records_are_short_and_filed_by_topic():
    index, nav = (RECORDS / "index.md").read_text(), nav_entries() | behind_the_index()
    assert len(records()) >= 30, f"expected the decision records in {RECORDS}, found {len(records())}"
    found = [p for record in records() for p in problems(record, index, nav)]
    assert not found, "\n".join(found)
    assert not (ROOT / "docs" / "decisions.md").exists(), "docs/decisions.md is back: file decisions by topic"


def test_the_nav_names_the_index_and_no_record():
    entries = nav_entries()
    assert "decisions/index.md" in entries
    assert sorted(e for e in entries if e.startswith("decisions/") and e != "decisions/index.md") == []


def test_index_rows_are_records():
    """Every link of the index's table names a record that exists."""
    index = (RECORDS / "index.md").read_text()
    rows = re.findall(r"^\|.*\]\(([^)#]+\.md)[^)]*\).*\|$", index, re.M)
    assert rows, "no rows in docs/decisions/index.md"
    assert [r for r in rows if not (RECORDS / r).is_file()] == []


def test_the_check_can_fail(tmp_path):
    bad = tmp_path / "issue-12-gpus.md"
    bad.write_text("# Issue 12 §3: GPUs\n\n## Context\n\nx\n\n## Decisions\n\n" + "word " * 950 + "\n")
    found = " ".join(problems(bad, "", set()))
    for problem in ("file name names an issue", "heading 'Issue 12 §3: GPUs' names an issue", "'## Decision/Consequences'",
                    "words (> 900)", "not linked", "not in mkdocs.yml"):  # fmt: skip
        assert problem in found, found
    good = tmp_path / "gpus.md"
    good.write_text("# GPUs\n\n## Context\n\nx\n\n```bash\n# Issue 3 in a comment\n```\n\n## Decision\n\ny\n\n"
                    "## Consequences\n\nz\n")  # fmt: skip
    assert problems(good, "[GPUs](gpus.md)", {"decisions/gpus.md"}) == []
    swapped = tmp_path / "swapped.md"
    swapped.write_text("# S\n\n## Decision\n\n## Context\n\n## Consequences\n")
    assert "order" in " ".join(problems(swapped, "(swapped.md)", {"decisions/swapped.md"}))
