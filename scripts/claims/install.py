"""How long an install takes and how big it is: the runs of ``bash scripts/install_size.sh cpu|gpu``
(``docs/install/*.json``)."""

from __future__ import annotations

import json

from claims.common import ROOT


ROUTES = {"cpu": "CPU (CPU torch first)", "gpu": "GPU (`pip install .`)"}  # install_size.sh's routes, in order


def installs(folder: str) -> list[dict]:
    """The measurements ``bash scripts/install_size.sh ROUTE`` wrote to ``folder/ROUTE.json``, CPU first."""
    return [json.loads((ROOT / folder / f"{route}.json").read_text()) for route in ROUTES]


def _size(record: dict) -> str:
    return f"{record['bytes'] / 1e9:.1f} GB"


def install_table(arg: str) -> str:
    """docs/installing.md's table of ``bash scripts/install_size.sh cpu|gpu`` runs (docs/install/*.json)."""
    runs = installs(arg)
    rows = [
        f"| {ROUTES[r['route']]} | {r['seconds']} s | {_size(r)} | {r['torch']} | {r['torchvision']}{' (does not import)' if r['torchvision_error'] else ''} | "
        f"{r['cuda_packages']} | {r['load_before']:.1f} → {r['load_after']:.1f} |"
        for r in runs
    ]
    local = [f"`TORCH_CPU=\"{' '.join(r['torch_cpu_args'])}\"`" for r in runs if r["torch_cpu_args"]]
    return "\n".join(
        [
            "| route | time | size | torch | torchvision | CUDA packages (nvidia-*, triton) | load (1 min), start → end |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"One run each, by `bash scripts/install_size.sh cpu` and `bash scripts/install_size.sh gpu` from a "
            f"{runs[0]['source']}, on {runs[0]['cores']} CPU cores, pip's cache off"
            + (f"; the CPU index's wheels replaced by {', '.join(local)}." if local else "."),
        ]
    ) + "\n"


def install_summary(arg: str) -> str:
    """The Installing page's one line: each route's measured time and size (docs/install/*.json)."""
    runs = installs(arg)
    parts = [f"{r['route'].upper()} {r['seconds']} s and {_size(r)}" for r in runs]
    loads = [x for r in runs for x in (r["load_before"], r["load_after"])]
    return (f"Measured here into a fresh virtualenv by `bash scripts/install_size.sh cpu|gpu`: {', '.join(parts)}, "
            f"on {runs[0]['cores']} shared cores (load {min(loads):.0f}–{max(loads):.0f}) "
            "from a local PyPI mirror.\n")  # fmt: skip



CLAIMS = {"install-table": install_table, "install-summary": install_summary}
