"""The paper's-definition verdicts of a setting with seed 0's rows replaced by its re-evaluated bundled reports.

    python scripts/seed0_sensitivity.py models/fashion-mnist-mlp

A sensitivity check while a multi-seed summary predates a change in the post-hoc methods (issue 18: float64
gradients): seed 0 comes from ``models/<setting>/<head>/report.json`` (current), seeds 1.. from ``results.csv``
(stale). Not a verdict of its own: it shows how far re-evaluating one seed moves the stale one.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python scripts/...` from a checkout
from laya.training.suite import results_table
from scripts.readme_tables import paper_definition


def main() -> None:
    for setting in map(Path, sys.argv[1:]):
        stale = pd.read_csv(setting / "results.csv")
        current = results_table(sorted(p.parent for p in setting.glob("*/report.json")))
        mixed = pd.concat([stale[stale["seed"] != 0], current[current["method"].isin(set(stale["method"]))]])
        with tempfile.TemporaryDirectory() as folder:
            mixed.to_csv(Path(folder) / "results.csv", index=False)
            methods = ("integrated_gradients", "input_x_gradient", "saliency")
            print(f"{setting.name}, stale summary: {paper_definition(setting)}")
            print(f"{setting.name}, seed 0 re-evaluated: {paper_definition(Path(folder), methods)}")


if __name__ == "__main__":
    main()
