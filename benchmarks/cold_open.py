"""A cold open of an attached network's own head against a bundled LAYA head, in one run.

    python benchmarks/cold_open.py [--models models] [--setting cifar10-resnet18-half] [--rounds 3] [--out docs/speed]

Each case is a fresh interpreter (a cold server: no model, no cache of Streamlit's) that runs ``app.py`` through
Streamlit's AppTest, as a server does, opened by a link to one checkpoint (``?model=<setting>/<head>``) on its first
example, until the Inspect page has drawn its charts. Wall seconds from the process's launch, so that the imports,
loading the model and every call of the page count; ``LAYA_THREADS=1``. Cases:

* ``LAYA head``: the setting's LAYA head (a bundled head, the reference);
* ``own head``: its own classifier explained by its units (unit profile, lens, Grad-CAM), its references stored
  beside it by ``laya attach`` (``references.safetensors``);
* ``own head, references drawn from the training split``: the same head in a copy of the setting without that
  file, the training split on this machine (what every cold open did before the references were stored).

The cases take turns, ``--rounds`` times after one warm-up round (the OS's file cache and ``$LAYA_CACHE``'s
size estimates warm for all alike); the median of each is reported. Goal: the own head's first chart within
:data:`GOAL` times the LAYA head's. Writes ``cold_open.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
GOAL = 1.5  # the own head's cold first chart, at most this many times the LAYA head's
CASES = ("LAYA head", "own head", "own head, references drawn from the training split")


def child(models: str, model: str) -> None:
    """In this fresh interpreter: open ``model`` (relative to ``models``) on Inspect; print the time its charts are
    drawn (``time.time()``) and what the page says about the references, as JSON."""
    os.environ.update({"LAYA_MODELS": models, "LAYA_THREADS": "1"})
    sys.path.insert(0, str(ROOT))
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=900)
    at.query_params["model"] = model
    at.run()
    ready = time.time()
    if at.exception or at.error or not at.get("plotly_chart"):
        raise SystemExit(f"{model}: the page drew no charts: {[e.value for e in [*at.exception, *at.error]]}")
    captions = [str(c.value) for c in at.caption if "references from" in str(c.value)]
    print(json.dumps({"ready": ready, "charts": len(at.get("plotly_chart")), "references": captions[:1]}))


def _open(models: Path, model: str) -> dict:
    launched = time.time()
    out = subprocess.run([sys.executable, __file__, "--child", str(models), model], capture_output=True, text=True,
                         check=False)  # fmt: skip
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:] or out.stdout[-2000:])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {"wall_s": result["ready"] - launched, "charts": result["charts"], "references": result["references"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=str(ROOT / "models"), help="folder of bundled checkpoints")
    p.add_argument("--setting", default="cifar10-resnet18-half", help="an attached setting (own and laya heads)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds, after one warm-up round (default: 3)")
    p.add_argument("--out", help="folder to write cold_open.json into")
    p.add_argument("--child", nargs=2, metavar=("MODELS", "MODEL"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(*args.child)
    models = Path(args.models).resolve()
    setting = models / args.setting
    if not (setting / "own" / "references.safetensors").is_file():
        raise SystemExit(f"{setting}/own has no stored references: run `python -m laya network --checkpoint "
                         f"{setting}/own` first")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="laya-cold-open-") as tmp:
        drawn = Path(tmp) / "models"
        shutil.copytree(setting, drawn / args.setting)  # the same setting, its references not stored
        (drawn / args.setting / "own" / "references.safetensors").unlink()
        where = {CASES[0]: (models, f"{args.setting}/laya"), CASES[1]: (models, f"{args.setting}/own"),
                 CASES[2]: (drawn, f"{args.setting}/own")}  # fmt: skip
        runs: dict[str, list[dict]] = {case: [] for case in CASES}
        load_start = os.getloadavg()
        for round_ in range(args.rounds + 1):
            for case, (folder, model) in where.items():
                run = _open(folder, model)
                print(f"round {round_}{' (warm-up)' if not round_ else ''}  {case:<52} {run['wall_s']:6.1f} s")
                if round_:
                    runs[case].append(run)
    median = {case: statistics.median(r["wall_s"] for r in rs) for case, rs in runs.items()}
    ratio = median[CASES[1]] / median[CASES[0]]
    print("\nmedian wall s: " + ", ".join(f"{c} {v:.1f}" for c, v in median.items()))
    print(f"own head / LAYA head: {ratio:.2f}x (goal <= {GOAL}x: {'met' if ratio <= GOAL else 'not met'}); "
          f"references drawn from the split / stored: {median[CASES[2]] / median[CASES[1]]:.2f}x")
    if args.out:
        record = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
            "load_average": {"start": load_start, "end": os.getloadavg()}, "setting": args.setting,
            "rounds": args.rounds, "goal": GOAL, "median_wall_s": median, "ratio": ratio,
            "runs": runs, "command": "python benchmarks/cold_open.py " + " ".join(sys.argv[1:]),
        }  # fmt: skip
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "cold_open.json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
