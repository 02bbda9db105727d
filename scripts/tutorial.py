"""Run the offline tutorial (docs/tutorial.md) as written and time each step: ``python scripts/tutorial.py``.

Every line of the page's ``bash`` blocks runs in a fresh temporary folder (``--keep DIR`` to keep it) with
this checkout's ``laya`` on the path; the last one (the dashboard) is not started. ``--write`` puts the
measured times into the page between its ``tutorial-times`` markers.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TUTORIAL = REPO / "docs" / "tutorial.md"
START, END = "<!-- tutorial-times:start -->", "<!-- tutorial-times:end -->"


def commands(text: str) -> list[str]:
    """Every command line of the ``bash`` code blocks, in order (continuation lines joined, comments dropped)."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        found += [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]
    return found


def run(folder: Path, timeout: float = 1500.0, text: str | None = None) -> list[tuple[str, float]]:
    """Run every tutorial command but the last (the dashboard) in ``folder``; ``(command, seconds)`` each.
    Raises RuntimeError with the command's stderr if one fails, TimeoutError past ``timeout`` in all."""
    *steps, _dashboard = commands(text if text is not None else TUTORIAL.read_text())
    env = {**os.environ, "PYTHONPATH": str(REPO), "LAYA_CACHE": str(folder / ".cache")}
    deadline, times = time.monotonic() + timeout, []
    for command in steps:
        words = shlex.split(command)
        if words[:3] != ["python", "-m", "laya"]:
            raise RuntimeError(f"the tutorial runs something other than `python -m laya`: {command}")
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, *words[1:]], cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=max(deadline - started, 1))  # fmt: skip
        except subprocess.TimeoutExpired as error:
            raise TimeoutError(f"the tutorial ran past {timeout:.0f} s at: {command}") from error
        if done.returncode != 0:
            raise RuntimeError(f"{command}\n{done.stderr[-3000:]}")
        times.append((command, time.monotonic() - started))
    return times


def table(times: list[tuple[str, float]]) -> str:
    rows = [f"| `{' '.join(c.split()[3:5])}` {'· ' + c.split('--head ')[1].split()[0] if '--head ' in c else ''} "
            f"| {s:.0f} |" for c, s in times]  # fmt: skip
    return "\n".join(
        [
            f"Measured with `python scripts/tutorial.py --write` on {platform.machine()} Linux, "
            f"{os.cpu_count()} CPU cores shared with other jobs (one run; a loaded machine, so an upper bound).",
            "",
            "| step | seconds |",
            "|---|---|",
            *rows,
            f"| **total** | **{sum(s for _, s in times):.0f}** |",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    parser.add_argument("--write", action="store_true", help="write the times into docs/tutorial.md")
    parser.add_argument("--timeout", type=float, default=1500.0, help="seconds for the whole tutorial")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        times = run(folder, args.timeout)
    for command, seconds in times:
        print(f"{seconds:7.1f} s  {command}")
    if args.write:
        text = TUTORIAL.read_text()
        head, rest = text.split(START, 1)
        TUTORIAL.write_text(f"{head}{START}\n{table(times)}\n{END}{rest.split(END, 1)[1]}")
        print(f"times written to {TUTORIAL}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
