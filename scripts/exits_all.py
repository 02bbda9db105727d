"""Re-measure the readout exits of every bundled report older than ``EXITS_FORMAT`` (resumable: a report already
of that format is skipped, so an interrupted pass continues where it stopped).

    nice -n 5 python scripts/exits_all.py [--models models] [--dry-run]

Each report is re-run with its own recorded command plus ``--readout-only``
(:func:`laya.analysis.depth.measured.merge_exits`: the trained exits and truncation, unchanged by the format, are
kept). Reports without readout exits of the head's own (Concat/LastLayer: probes, whose head input is ``h_k`` itself)
are skipped: the format does not change them.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python scripts/...` from a checkout
from laya.analysis.depth.exits_record import EXITS_FILE  # noqa: E402
from laya.analysis.depth.measured import EXITS_FORMAT  # noqa: E402


def stale(models: Path) -> list[tuple[Path, list[str]]]:
    """``(report, command)`` of every report to re-run, cheapest recorded run first."""
    todo = []
    for path in sorted(models.glob(f"*/*/{EXITS_FILE}")):
        report = json.loads(path.read_text())
        if report.get("format", 1) >= EXITS_FORMAT or not any(r["exits"] == "readout" for r in report["runs"]):
            continue
        command = shlex.split((report.get("kept") or report)["command"])
        command = [c for c in command if c != "--readout-only"]
        todo.append((report["seconds"], path, [sys.executable, *command[1:], "--readout-only"]))
    return [(path, command) for _, path, command in sorted(todo, key=lambda t: t[0])]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", type=Path, default=Path("models"))
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args()
    for path, command in stale(args.models):
        print(f"== {path.parent}: {shlex.join(command)}", flush=True)
        if not args.dry_run:
            subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
