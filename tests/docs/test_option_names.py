"""One name per option: where laya's command line accepts an option under two spellings (``--model`` and its
alias ``--timm-model``), the README, the docs pages, the CLI's help and laya's messages write the first one.
The decision records (docs/decisions/) may name an alias when they say what it replaced."""

import argparse
import re
from pathlib import Path

from laya.cli import build_parser
from tests.docs.doc_commands import ROOT, doc_files


def parsers() -> list[argparse.ArgumentParser]:
    root = build_parser()
    subparsers = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    return [root, *subparsers.choices.values()]


def aliases() -> dict[str, str]:
    """``alias -> first spelling`` for every option with several long spellings (none that is also some other
    option's first spelling; a ``--no-x`` of ``argparse.BooleanOptionalAction`` is the opposite, not an alias)."""
    found, first = {}, set()
    for parser in parsers():
        for action in parser._actions:
            long = [s for s in action.option_strings if s.startswith("--")]
            if long:
                first.add(long[0])
                found.update({alias: long[0] for alias in long[1:] if alias != "--no-" + long[0][2:]})
    return {alias: name for alias, name in found.items() if alias not in first}


def mentions(text: str, names: dict[str, str]) -> list[str]:
    """``line: alias (write first)`` for every alias written as a whole option in ``text``."""
    return [f"{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)} (write {names[m.group(0)]})"
            for m in re.finditer(r"(?<![\w-])--[\w-]+(?![\w-])", text) if m.group(0) in names]  # fmt: skip


def test_the_cli_has_aliases_to_check():
    assert aliases().get("--timm-model") == "--model"


def test_docs_and_messages_write_each_option_one_way():
    names = aliases()
    records = ROOT / "docs" / "decisions"
    pages = [p for p in doc_files() if not p.is_relative_to(records)]
    sources = [p for p in sorted((ROOT / "laya").rglob("*.py")) if p != ROOT / "laya" / "cli" / "train.py"]
    found = [f"{p.relative_to(ROOT)}:{m}" for p in pages + sources for m in mentions(p.read_text(), names)]
    helps = " ".join(a.help or "" for parser in parsers() for a in parser._actions) + " ".join(
        p.epilog or "" for p in parsers())
    found += [f"laya.cli help: {m}" for m in mentions(helps, names)]
    assert not found, "an option spelled by its alias:\n" + "\n".join(found)


def test_the_check_can_fail():
    names = {"--timm-model": "--model"}
    text = "python -m laya train --model a\n`--timm-model resnet18` and --timm-model=vit, not --timm-models\n"
    assert mentions(text, names) == ["2: --timm-model (write --model)", "2: --timm-model (write --model)"]
    assert mentions(Path(__file__).read_text().replace("--timm-model", ""), names) == []
