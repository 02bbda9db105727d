"""Concurrent dashboard sessions: time until each session shows its charts, and the server's memory.

    python benchmarks/sessions.py [--sessions 1 4 8] [--models models]

Starts ``streamlit run app.py`` on 127.0.0.1 only (a free port, ``LAYA_ALLOW_PATHS=0``), opens N
headless Chromium tabs at once on the Inspect page (the bundled default model and example), waits
until each shows its two charts, and reports the median / max seconds to charts and the server's
resident memory (VmRSS after the round, VmHWM peak so far, from /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.screenshots import browser_page, serve, wait_for_charts


def server_memory_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) in MB of this process's streamlit child."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if ppid != os.getpid() or b"streamlit" not in (stat.parent / "cmdline").read_bytes():
                continue
            status = dict(line.split(":", 1) for line in (stat.parent / "status").read_text().splitlines())
        except (OSError, ValueError):
            continue
        return float(status["VmRSS"].split()[0]) / 1024, float(status["VmHWM"].split()[0]) / 1024
    raise RuntimeError("streamlit server process not found")


def sessions(url: str, n: int) -> list[float]:
    """Open ``n`` tabs at once; seconds until each shows the Inspect page's charts."""
    with browser_page() as first:
        pages = [first] + [first.context.browser.new_page() for _ in range(n - 1)]  # one context (session) each
        for page in pages:
            page.set_default_timeout(180_000)
        start = time.perf_counter()
        for page in pages:
            page.goto(url, wait_until="commit")
        times = []
        for page in pages:
            wait_for_charts(page, 2)
            times.append(time.perf_counter() - start)
        return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--models", type=Path, default=ROOT / "models")
    args = parser.parse_args()
    os.environ["LAYA_ALLOW_PATHS"] = "0"
    log = Path(tempfile.gettempdir()) / "laya-sessions-streamlit.log"
    results = []
    with serve(args.models, log=log) as url:
        rss, peak = server_memory_mb()
        results.append({"sessions": 0, "rss_mb": round(rss), "peak_mb": round(peak)})
        for n in args.sessions:
            times = sessions(url, n)
            rss, peak = server_memory_mb()
            results.append({"sessions": n, "median_s": round(statistics.median(times), 2),
                            "max_s": round(max(times), 2), "rss_mb": round(rss), "peak_mb": round(peak)})  # fmt: skip
            print(json.dumps(results[-1]), flush=True)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
