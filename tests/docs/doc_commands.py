"""The commands written in the docs (README.md and docs/**/*.md), with what they need.

A command is a line (backslash continuations joined) of a fenced ```bash / ```sh / ```shell / ```console block;
a ```python / ```py block is one program. What a command needs is written in the block as a comment,
``needs: <tag>[, <tag> ...]``:

* in the comment at the end of a command's line, it applies to that command;
* on a comment line of its own, it applies to the commands below it, up to the next blank line of the block or
  the next ``needs:`` line.

tests/docs/test_commands.py checks every command statically (a ``python -m laya`` command parses against
``laya.cli``'s parser, a script it names exists, a ``make`` target exists) and runs every command that is not
marked. A command is run in a scratch copy of the checkout, so it may write into ``models/`` or ``runs/``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]

#: what a command may need; a command with any of them is checked, not run
NEEDS = {
    "gpu": "a CUDA device",
    "internet": "a download (hub weights, a dataset through torchvision)",
    "data": "a dataset or a file the docs do not make: Fashion-MNIST, CIFAR-10, your ImageFolder or config, "
    "a run written by an earlier command",
    "long": "longer than the test's time box (training, re-evaluating bundled settings, the whole test suite)",
    "server": "starts a server that runs until stopped (the dashboard)",
    "docker": "Docker",
    "install": "installs into the Python environment (pip)",
    "checkout": "moves or rewrites files of the checkout itself",
    "sketch": "Python to adapt, not to run as written (it is compiled)",
    "pending": "a command an open issue adds: its static check must fail until then, and the test fails once it "
    "passes, so the mark is removed when the command lands",
}
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
PYTHON_LANGUAGES = {"python", "py"}
MARKDOWN = MarkdownIt("commonmark").enable("table")
MARKER = re.compile(r"needs:\s*([\w-]+(?:\s*,\s*[\w-]+)*)")
INLINE = re.compile(r"(?:python -m laya|laya) \S")


@dataclass(frozen=True)
class Command:
    """One command of the docs: its text, the file and line it is on, its language and its ``needs:`` tags."""

    text: str
    path: Path
    line: int
    language: str  # "shell" | "python" | "inline"
    needs: frozenset[str] = field(default_factory=frozenset)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _tags(comment: str) -> frozenset[str]:
    found = MARKER.search(comment)
    return frozenset(t.strip() for t in found.group(1).split(",")) if found else frozenset()


def _comment(line: str) -> str:
    """The comment at the end of a shell line (a ``#`` that starts a word, outside quotes), or ''."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[i + 1 :]
    return ""


def shell_commands(body: str, path: Path, first_line: int) -> list[Command]:
    commands, block_needs, pending, start = [], frozenset(), "", 0
    for offset, raw in enumerate(body.splitlines()):
        line = raw.rstrip()
        if line.startswith("$ "):
            line = line[2:]
        if not pending:
            start = offset
            if not line.strip():
                block_needs = frozenset()
                continue
            if line.lstrip().startswith("#"):
                block_needs = _tags(line) or block_needs
                continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        commands.append(Command(text.strip(), path, first_line + start, "shell", block_needs | _tags(_comment(text))))
    return commands


def python_program(body: str, path: Path, first_line: int) -> Command:
    needs = frozenset().union(*(_tags(line) for line in body.splitlines() if line.lstrip().startswith("#")))
    return Command(body, path, first_line, "python", needs)


def extract(path: Path) -> list[Command]:
    """Every fenced command and program of one Markdown file, its inline ``python -m laya ...`` spans, and its
    indented code blocks (language ``indented``: commands must be fenced, so these are reported)."""
    commands = []
    for token in MARKDOWN.parse(path.read_text()):
        line = token.map[0] + 1 if token.map else 0
        if token.type == "fence":
            language = token.info.strip().split(" ")[0].lower()
            if language in SHELL_LANGUAGES:
                commands += shell_commands(token.content, path, line + 1)
            elif language in PYTHON_LANGUAGES:
                commands.append(python_program(token.content, path, line + 1))
        elif token.type == "code_block":
            commands.append(Command(token.content, path, line, "indented"))
        elif token.type == "inline":
            spans = [c.content for c in token.children or () if c.type == "code_inline"]
            commands += [Command(s, path, line, "inline") for s in spans if INLINE.match(s)]
    return commands


def simple_commands(text: str) -> list[list[str]]:
    """``a --x 1 && b | c; d`` -> ``[[a, --x, 1], [b], [c], [d]]``, comments dropped, ``NAME=value`` prefixes
    dropped."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    parts, current = [], []
    for token in lexer:
        if token in {"&&", "||", ";", "|", "&"}:
            parts.append(current)
            current = []
        else:
            current.append(token)
    parts.append(current)
    out = []
    for words in parts:
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]
        if words:
            out.append(words)
    return out


def laya_arguments(words: list[str]) -> list[str] | None:
    """The arguments given to laya's CLI by ``python -m laya ...``, ``laya ...`` or ``torchrun ... -m laya ...``;
    None for any other program."""
    program = Path(words[0]).name
    if program == "laya":
        return words[1:]
    if re.fullmatch(r"python[0-9.]*|torchrun", program) and "-m" in words:
        i = words.index("-m")
        if i + 1 < len(words) and words[i + 1] == "laya":
            return words[i + 2 :]
    return None


def all_commands(root: Path = ROOT) -> list[Command]:
    return [c for path in doc_files(root) for c in extract(path)]


__all__ = ["NEEDS", "ROOT", "Command", "all_commands", "doc_files", "extract", "laya_arguments", "simple_commands"]
