"""Every command in README.md and docs/ is checked, and run unless the docs mark what it needs.

Static checks, for every command, marked or not (they need nothing): a ``python -m laya`` / ``laya`` /
``torchrun -m laya`` command parses against ``laya.cli.build_parser()`` without running (inline mentions in
prose: the subcommand and each ``--flag`` exist); a script, test file or app it names exists; a ``make``
target exists; Python code compiles. Then every command whose block does not mark a need
(``# needs: gpu`` ...; the vocabulary is ``doc_commands.NEEDS``) runs for real, time-boxed, in a scratch copy
of the checkout. ``needs: fashion-mnist`` runs where Fashion-MNIST is installed and skips with the reason
otherwise. See docs/decisions/tested-doc-commands.md.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from laya.cli import build_parser
from tests.docs.doc_commands import NEEDS, ROOT, Command, all_commands, extract, laya_arguments, simple_commands

RUN_TIMEOUT_S = 600  # a hang, not a slow machine: the slowest (depth on Fashion-MNIST) takes ~30 CPU-s
DATASET_TAGS = {"fashion-mnist": "Fashion-MNIST"}
COMMANDS = all_commands()


def _id(command: Command) -> str:
    return f"{command.where}:{command.text.splitlines()[0][:40]}"


def _unique(commands: list[Command]) -> list[Command]:
    """One of each identical command (the README and docs/index.md share theirs)."""
    seen, out = set(), []
    for command in commands:
        if (command.language, command.text, command.needs) not in seen:
            seen.add((command.language, command.text, command.needs))
            out.append(command)
    return out


def parse_error(args: list[str]) -> str | None:
    """What ``laya.cli``'s parser says about ``args`` (None when they parse), without running the command."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(args)
    except SystemExit as exit_:
        return None if exit_.code == 0 else stderr.getvalue().strip().splitlines()[-1]
    return None


def mention_error(args: list[str]) -> str | None:
    """For a command named in prose (often partial): the subcommand and every ``--flag`` exist."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    words = [w for w in args if not re.fullmatch(r"…|\.\.\.|<.*>|\[.*\]", w)]  # placeholders
    while words and words[0].startswith("-"):
        option = words.pop(0).split("=")[0]
        if option not in parser._option_string_actions:
            return f"no option {option}"
        if parser._option_string_actions[option].nargs != 0 and words and not words[0].startswith("-"):
            words.pop(0)
    if not words:
        return None
    if words[0] not in subparsers.choices:
        return f"no subcommand {words[0]!r} (laya has: {', '.join(subparsers.choices)})"
    options = subparsers.choices[words[0]]._option_string_actions
    unknown = [w.split("=")[0] for w in words[1:] if w.startswith("--") and w.split("=")[0] not in options]
    return f"{words[0]}: no option {', '.join(unknown)}" if unknown else None


def _make_targets() -> set[str]:
    return set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.M))


def static_errors(command: Command) -> list[str]:
    """What is wrong with a command without running it."""
    if command.language == "indented":
        return ["an indented code block: fence it (```bash for commands, a bare ``` for output)"]
    if command.language == "python":
        try:
            compile(command.text, command.where, "exec")
        except SyntaxError as error:
            return [f"does not compile: {error}"]
        return []
    errors = []
    for words in simple_commands(command.text):
        args = laya_arguments(words)
        if args is not None:
            problem = mention_error(args) if command.language == "inline" else parse_error(args)
            errors += [f"`{' '.join(words)}`: {problem}"] if problem else []
            continue
        program = Path(words[0]).name
        named = []
        if re.fullmatch(r"python[0-9.]*", program) and len(words) > 1:
            if words[1] == "-c" and len(words) > 2:
                try:
                    compile(words[2], command.where, "exec")
                except SyntaxError as error:
                    errors.append(f"python -c: does not compile: {error}")
            elif words[1:3] == ["-m", "pytest"]:
                named = [w.split("::")[0] for w in words[3:] if w.startswith("tests/")]
            elif not words[1].startswith("-"):
                named = [words[1]]
        elif program in {"bash", "sh"} and len(words) > 1:
            named = [words[1]]
        elif program == "streamlit" and words[1:2] == ["run"]:
            named = words[2:3]
        elif words[0].startswith(("scripts/", "benchmarks/", "./")):
            named = [words[0]]
        elif program == "make":
            errors += [f"no make target {t!r}" for t in words[1:] if "=" not in t and t not in _make_targets()]
        errors += [f"`{' '.join(words)}`: no file {name}" for name in named
                   if not Path(name).is_absolute() and not (ROOT / name).exists()]  # fmt: skip
    return errors


# ---------------------------------------------------------------- the convention itself


def test_the_docs_have_commands():
    languages = {c.language for c in COMMANDS}
    assert {"shell", "python", "inline"} <= languages
    assert any(c.path.name == "README.md" and not c.needs for c in COMMANDS), "the README's example runs"


@pytest.mark.parametrize("command", _unique([c for c in COMMANDS if c.needs]), ids=_id)
def test_marks_are_known(command):
    unknown = command.needs - set(NEEDS) - set(DATASET_TAGS)
    assert not unknown, f"{command.where}: unknown `needs:` tag(s) {sorted(unknown)}; known: {sorted(NEEDS)}"


@pytest.mark.parametrize("command", _unique(COMMANDS), ids=_id)
def test_command_is_valid(command):
    """Static: parses against laya's CLI, names files and make targets that exist, compiles."""
    errors = static_errors(command)
    if "pending" in command.needs:
        assert errors, f"{command.where}: `{command.text}` works now: remove its `needs: pending` mark"
        pytest.xfail(f"pending: {'; '.join(errors)}")
    assert not errors, f"{command.where}: " + "; ".join(errors)


def test_extraction_and_checks_can_fail(tmp_path):
    """Markers scope as documented, and a removed subcommand, a wrong flag or a missing script is caught."""
    page = tmp_path / "page.md"
    page.write_text(
        "Run `python -m laya evaluate --no-such-flag` or `python -m laya --threads 1 depth` (`laya …`).\n\n"
        "```bash\n"
        "python -m laya train --dataset fashion-mnist --out runs/x   # needs: data, long\n"
        "python -m laya evaluate --checkpoint models/m \\\n"
        "    --limit 10\n"
        "# needs: gpu\n"
        "python -m laya frobnicate\n"
        "python scripts/no_such_script.py && make no-such-target\n"
        "\n"
        "python -m laya evaluate --checkpoint x --limit ten\n"
        "```\n\n"
        "```python\n# needs: sketch\ndef f(:\n```\n\n"
        "    python -m laya train --dataset x\n"
    )
    commands = extract(page)
    shell = [c for c in commands if c.language == "shell"]
    assert [c.needs for c in shell] == [{"data", "long"}, set(), {"gpu"}, {"gpu"}, set()]
    assert shell[1].text == "python -m laya evaluate --checkpoint models/m      --limit 10" and shell[1].line == 5
    assert static_errors(shell[0]) == [] and static_errors(shell[1]) == []
    assert "invalid choice: 'frobnicate'" in static_errors(shell[2])[0]
    assert static_errors(shell[3]) == ["`python scripts/no_such_script.py`: no file scripts/no_such_script.py",
                                       "no make target 'no-such-target'"]  # fmt: skip
    assert "invalid int value: 'ten'" in static_errors(shell[4])[0]
    inline = [c for c in commands if c.language == "inline"]
    assert static_errors(inline[0]) == ["`python -m laya evaluate --no-such-flag`: evaluate: no option --no-such-flag"]
    assert static_errors(inline[1]) == [] and static_errors(inline[2]) == []  # a partial mention, a placeholder
    python = next(c for c in commands if c.language == "python")
    assert python.needs == {"sketch"} and "does not compile" in static_errors(python)[0]
    indented = next(c for c in commands if c.language == "indented")
    assert "fence it" in static_errors(indented)[0]


# ---------------------------------------------------------------- running the unmarked commands


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A scratch checkout: the code linked, ``models/`` and ``docs/`` copied (commands may rewrite them: a
    benchmark's ``--out docs/speed/…`` must not change the checkout under test), no ``runs/``."""
    root = tmp_path_factory.mktemp("checkout")
    for entry in ROOT.iterdir():
        if entry.name not in {".git", "models", "docs", "runs", "site", "test-artifacts", ".pytest_cache"}:
            (root / entry.name).symlink_to(entry)
    shutil.copytree(ROOT / "models", root / "models", ignore=shutil.ignore_patterns("per_input.safetensors"))
    shutil.copytree(ROOT / "docs", root / "docs")
    return root


def _dataset_present(tag: str) -> bool:
    from laya.data.datasets import DatasetNotFoundError, load_dataset

    try:
        load_dataset(tag, "test")
    except DatasetNotFoundError:
        return False
    return True


RUNNABLE = [
    pytest.param(c, id=_id(c), marks=[pytest.mark.data] if c.needs else [])  # `make test-fast` skips real data
    for c in _unique(COMMANDS)
    if c.language in {"shell", "python"} and not (c.needs - set(DATASET_TAGS))
]


@pytest.mark.parametrize("command", RUNNABLE)
def test_command_runs(command, checkout, tmp_path):
    """Runs as written, from the root of a scratch checkout, with this interpreter first on PATH."""
    for tag in sorted(command.needs & set(DATASET_TAGS)):
        if not _dataset_present(tag):
            pytest.skip(f"{command.where} needs {DATASET_TAGS[tag]}, which is not installed here")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}  # fmt: skip
    if command.language == "python":
        program = tmp_path / "program.py"
        program.write_text(command.text)
        argv = [sys.executable, str(program)]
    else:
        argv = ["bash", "-euo", "pipefail", "-c", command.text]
    done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, f"{command.where}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
