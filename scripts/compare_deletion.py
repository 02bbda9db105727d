"""Head vs head Deletion@1 on a bundled setting: paired bootstrap over the same test inputs.

    python scripts/compare_deletion.py models/cifar10-efficientnet-lite0 [--mode mean] [--reduction signed]

Reads each bundled head's ``per_input.safetensors`` (written by ``python -m laya bundle`` / ``reproduce``)
and compares LAYA's α with the other heads' primary scores on raw and oracle-normalised Deletion@1. Inputs
where a head has no testable ranking are NaN there and left out of that head's mean.
"""

import argparse
import json
import sys
from pathlib import Path

from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python scripts/...` from a checkout
from laya.analysis.statistics import paired_bootstrap, verdict

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("setting", type=Path)
parser.add_argument("--mode", default="mean")
parser.add_argument("--reduction", default="signed")
args = parser.parse_args()
for name in ("per_input.safetensors", "report.json"):
    for head in ("laya", "concat", "scalarmix"):
        if not (args.setting / head / name).is_file():
            parser.error(
                f"{args.setting / head / name} not found: the per-input arrays are not committed; "
                f"write them with `python -m laya bundle {args.setting}`"
            )
arrays = {h: load_file(args.setting / h / "per_input.safetensors") for h in ("laya", "concat", "scalarmix")}
primary = {h: json.loads((args.setting / h / "report.json").read_text())["primary_method"] for h in arrays}
for other in ("concat", "scalarmix"):
    for metric in ("deletion_at_1", "deletion_at_1_norm"):
        a, b = (arrays[h][f"faithfulness/{args.mode}/{args.reduction}/{primary[h]}/{metric}"] for h in ("laya", other))
        print(f"{metric}: {verdict(paired_bootstrap(a, b), 'LAYA ' + primary['laya'], other + ' ' + primary[other])}")
