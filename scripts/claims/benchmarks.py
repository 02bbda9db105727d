"""The benchmarks' tables: the pixel benchmark and its sanity check (``benchmarks/spatial_maps.py``,
``map_sanity.py``), the page costs, and the sandbox's raw logs (``worker_overhead.py``, ``upload_memory.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from claims.common import ROOT, wrapped


def spatial_maps(arg: str) -> str:
    """The tables of ``python benchmarks/spatial_maps.py`` from its CSVs in folder ``arg``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from spatial_maps import markdown_tables

    return wrapped(markdown_tables(ROOT / arg))


def map_sanity(arg: str) -> str:
    """The tables of ``python benchmarks/map_sanity.py`` (the cascading randomisation test) from its CSVs in ``arg``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from map_sanity import markdown

    return wrapped(markdown(ROOT / arg))



def page_costs(arg: str) -> str:
    """The tables of ``python benchmarks/page_costs.py --out`` (and ``load_test.py --out``) in folder ``arg``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from page_costs import markdown_tables as page_tables

    return page_tables(ROOT / arg)


def raw_runs(path: Path) -> list[tuple[str, list[dict]]]:
    """``(command line, its JSON records)`` of every run in a raw benchmark log such as ``docs/sandbox-benchmarks.txt``:
    a ``python benchmarks/...`` line, then one JSON object per line or one indented object."""
    runs: list[tuple[str, list[dict]]] = []
    chunk: list[str] = []

    def flush() -> None:
        text = "\n".join(chunk).strip()
        if runs and text:
            runs[-1][1].extend([json.loads(text)] if text.startswith("{\n") else [json.loads(x) for x in text.splitlines()])
        chunk.clear()

    for line in path.read_text().splitlines():
        if line.startswith("python benchmarks/"):
            flush()
            runs.append((line, []))
        elif not line.startswith("#"):
            chunk.append(line)
    flush()
    return runs


def worker_overhead(arg: str) -> str:
    """``worker-overhead FILE [verdict]``: the verdict and table of ``python benchmarks/worker_overhead.py`` in raw log
    FILE (``verdict``: the verdict line alone)."""
    arg, _, part = arg.partition(" ")
    (records,) = [r for command, r in raw_runs(ROOT / arg) if "worker_overhead.py" in command]
    rows, total = [r for r in records if "setting" in r], next(r for r in records if "max_added_ms" in r)
    lines = [f"**Verdict:** a sandboxed worker adds at most {total['max_added_ms']:.1f} ms to an interaction (goal: at "
             f"most {total['goal_ms']} ms: {'met' if total['max_added_ms'] <= total['goal_ms'] else 'not met'}); a "
             f"worker's start-up took {total['worker_startup_s']:.1f} s (fastest of {total['rounds']}, "
             f"{total['threads']} thread, `{arg}`).", "",
             "| setting | Inspect in process / worker (ms) | added | Depth analytics in process / worker (ms) | added "
             "| first load in process / in worker (s) |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r['setting']} | {r['explain_in_process_ms']:.1f} / {r['explain_worker_ms']:.1f} | "
                     f"{r['explain_added_ms']:+.1f} | {r['depth_in_process_ms']:.1f} / {r['depth_worker_ms']:.1f} | "
                     f"{r['depth_added_ms']:+.1f} | {r['load_in_process_s']:.3f} / {r['first_load_in_worker_s']:.3f} |")
    return wrapped(lines[0] + "\n" if part == "verdict" else "\n".join(lines) + "\n")


def upload_memory(arg: str) -> str:
    """``upload-memory FILE``: the server's RSS in every ``python benchmarks/upload_memory.py`` run of raw log FILE."""
    runs = [(command.split("#", 1)[1].strip() if "#" in command else command, r[0])
            for command, r in raw_runs(ROOT / arg) if "upload_memory.py" in command]  # fmt: skip
    keys = {"server_rss_start_mb": "start (one session on a bundled model)",
            "server_rss_after_uploads_mb": "after the uploads, each shown on Inspect", "server_peak_mb": "peak",
            "server_rss_when_clean_mb": "when the upload folders were empty and the workers ended",
            "seconds_until_clean": "seconds from closing the browsers until then",
            "server_rss_after_sessions_mb": "after the sessions (older runs)", "server_rss_end_mb": "end",
            "workers_rss_mb": "the worker holding the models"}  # fmt: skip
    lines = ["| server RSS (MB) | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |",
             "|---|" + "---|" * len(runs)]
    for key, label in keys.items():
        if any(key in r for _, r in runs):
            lines.append(f"| {label} | " + " | ".join("–" if r.get(key) is None else f"{r[key]:g}" for _, r in runs) + " |")
    notes = "; ".join(f"run {i + 1}: {r['uploads']} uploads, {r['weights_mb_total']} MB of weights, {what}"
                      for i, (what, r) in enumerate(runs))  # fmt: skip
    return wrapped("\n".join(lines) + f"\n\nRuns (`{arg}`): {notes}.\n")


CLAIMS = {"spatial-maps": spatial_maps, "map-sanity": map_sanity, "page-costs": page_costs,
          "worker-overhead": worker_overhead, "upload-memory": upload_memory}  # fmt: skip
