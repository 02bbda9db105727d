"""Run the offline tutorial (docs/tutorial.md) as written and time each step: ``python scripts/tutorial.py``.

Every line of the page's ``bash`` blocks runs in a fresh temporary folder (``--keep DIR`` to keep it) with
this checkout's ``laya`` on the path; the last one (the dashboard) is started on a free local port and
stopped once it answers HTTP 200. ``--write`` puts the measured times, the machine's load and the test
accuracies into the page between its ``tutorial-times`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
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


def subcommand(command: str) -> str:
    """The ``laya`` subcommand of a ``python -m laya [--threads N] SUB ...`` line (e.g. ``"depth"``)."""
    words = command.split()[3:]
    return words[2] if words[:1] == ["--threads"] else words[0]


def _laya(command: str) -> list[str]:
    words = shlex.split(command)
    if words[:3] != ["python", "-m", "laya"]:
        raise RuntimeError(f"the tutorial runs something other than `python -m laya`: {command}")
    return [sys.executable, *words[1:]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(command: str, folder: Path, env: dict, timeout: float) -> tuple[int, str]:
    """Start the dashboard ``command`` in ``folder`` on a free local port, wait for HTTP 200 on its page, stop it.
    Returns ``(port, html)``; raises TimeoutError (with what the server printed) if no 200 within ``timeout``."""
    port = _free_port()
    server = subprocess.Popen([*_laya(command), "--port", str(port), "--address", "127.0.0.1"], cwd=folder, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as health:
                    if health.status == 200:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
                            if page.status == 200:
                                return port, page.read().decode()
            except OSError:
                time.sleep(0.3)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        printed = server.communicate(timeout=30)[0]
    raise TimeoutError(f"`{command}` gave no HTTP 200 within {timeout:.0f} s; it printed:\n{printed[-3000:]}")


def run(folder: Path, timeout: float = 600.0, text: str | None = None) -> list[tuple[str, float]]:
    """Run every tutorial command in ``folder``, the last one (the dashboard) until it serves HTTP 200;
    ``(command, seconds)`` each. Raises RuntimeError with the command's stderr if one fails, TimeoutError past
    ``timeout`` in all."""
    *steps, dashboard = commands(text if text is not None else TUTORIAL.read_text())
    env = {**os.environ, "PYTHONPATH": str(REPO), "LAYA_CACHE": str(folder / ".cache")}
    deadline, times = time.monotonic() + timeout, []
    for command in steps:
        argv, started = _laya(command), time.monotonic()
        try:
            done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=max(deadline - started, 1))  # fmt: skip
        except subprocess.TimeoutExpired as error:
            raise TimeoutError(f"the tutorial ran past {timeout:.0f} s at: {command}") from error
        if done.returncode != 0:
            raise RuntimeError(f"{command}\n{done.stderr[-3000:]}")
        times.append((command, time.monotonic() - started))
    started = time.monotonic()
    serve(dashboard, folder, env, max(deadline - started, 1))
    return times + [(dashboard, time.monotonic() - started)]


def accuracies(folder: Path, text: str | None = None) -> dict[str, dict]:
    """``head -> accuracy_ci`` (estimate, low, high) from the report of each checkpoint the tutorial evaluates."""
    found = {}
    for command in commands(text if text is not None else TUTORIAL.read_text()):
        if " evaluate " in command:
            checkpoint = command.split("--checkpoint ")[1].split()[0]
            found[Path(checkpoint).name] = json.loads((folder / checkpoint / "report.json").read_text())["accuracy_ci"]
    return found


def _label(command: str) -> str:
    head = f" · {command.split('--head ')[1].split()[0]}" if "--head " in command else ""
    target = command.split("--checkpoint ")[1].split()[0].rsplit("/", 1)[-1] if "--checkpoint " in command else ""
    return f"`{subcommand(command)}`{head}{' · ' + target if target else ''}"


def table(times: list[tuple[str, float]], load: tuple[float, float], accuracy: dict[str, dict]) -> str:
    """The page's measured-times section: the machine, its load, one row per step, and the test accuracies."""
    rows = [f"| {_label(c)}{' (until it serves HTTP 200)' if i == len(times) - 1 else ''} | {s:.0f} |"
            for i, (c, s) in enumerate(times)]  # fmt: skip
    acc = ", ".join(f"{head} {a['estimate']:.3f} [{a['low']:.3f}, {a['high']:.3f}]" for head, a in accuracy.items())
    return "\n".join(
        [
            f"Measured with `python scripts/tutorial.py --write` on {platform.machine()} Linux, "
            f"{os.cpu_count()} CPU cores, one run. Load average (1 min) {load[0]:.1f} before and {load[1]:.1f} "
            f"after the run{' (other jobs shared the cores: an upper bound)' if max(load) > 1.5 else ''}.",
            "",
            "| step | seconds |",
            "|---|---|",
            *rows,
            f"| **total** | **{sum(s for _, s in times):.0f}** |",
            "",
            f"Test accuracy on the 80 test images (95 % bootstrap CI): {acc}.",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    parser.add_argument("--write", action="store_true", help="write the times into docs/tutorial.md")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole tutorial")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        before = os.getloadavg()[0]
        times = run(folder, args.timeout)
        load, accuracy = (before, os.getloadavg()[0]), accuracies(folder)
    for command, seconds in times:
        print(f"{seconds:7.1f} s  {command}")
    print(f"load average {load[0]:.1f} -> {load[1]:.1f}; accuracy {accuracy}")
    if args.write:
        text = TUTORIAL.read_text()
        head, rest = text.split(START, 1)
        TUTORIAL.write_text(f"{head}{START}\n{table(times, load, accuracy)}\n{END}{rest.split(END, 1)[1]}")
        print(f"times written to {TUTORIAL}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
