#!/usr/bin/env bash
# Time and disk size of a fresh install of laya into a new virtualenv (docs/installing.md, "Measured time and size"):
#   bash scripts/install_size.sh gpu [SRC [JSON]]   pip install SRC: PyPI's torch, with its CUDA wheels
#   bash scripts/install_size.sh cpu [SRC [JSON]]   torch + torchvision from PyTorch's CPU index first, then SRC
# SRC: a checkout or a wheel (default: this checkout). TORCH_CPU replaces the CPU step's pip arguments
# (e.g. a local torch+cpu wheel and its torchvision where download.pytorch.org cannot be reached). pip's cache
# is not used. The measurement goes to JSON (default docs/install/<route>.json), which the docs quote
# (python scripts/prose_claims.py --write); it fails if torch or laya does not import, and records whether
# torchvision's compiled operators load.
set -euo pipefail
route=${1:?usage: install_size.sh gpu|cpu [SRC [JSON]]}
[ "$route" = cpu ] || [ "$route" = gpu ] || { echo "route must be gpu or cpu, got $route" >&2; exit 2; }
here=$(dirname "$0")/..
src=$(realpath "${2:-$here}")
json=${3:-$here/docs/install/$route.json}
work=$(mktemp -d "${TMPDIR:-/tmp}/laya-install-XXXXXX")
python3 -m venv "$work/venv"
py="$work/venv/bin/python"
pip=("$py" -m pip install --no-cache-dir --quiet)
load_before=$(cut -d' ' -f1 /proc/loadavg)
start=$(date +%s)
if [ "$route" = cpu ]; then
    # shellcheck disable=SC2086 # TORCH_CPU is a list of pip arguments
    "${pip[@]}" ${TORCH_CPU:-torch torchvision --index-url https://download.pytorch.org/whl/cpu}
    "$py" -c "from importlib.metadata import version as v; print(f'torch=={v(\"torch\")}\ntorchvision=={v(\"torchvision\")}')" > "$work/pin.txt"
    "${pip[@]}" -c "$work/pin.txt" "$src"   # keeps that torch and torchvision: no CUDA wheels
else
    "${pip[@]}" "$src"
fi
end=$(date +%s)
load_after=$(cut -d' ' -f1 /proc/loadavg)
cuda=$("$py" -m pip list 2>/dev/null | grep -c -i -E '^(nvidia|triton)' || true)
mkdir -p "$(dirname "$json")"
ROUTE=$route SECONDS_TAKEN=$((end - start)) BYTES=$(du -sb "$work/venv" | cut -f1) CUDA=$cuda \
LOAD_BEFORE=$load_before LOAD_AFTER=$load_after CORES=$(nproc) SRC_KIND=$([ -d "$src" ] && echo checkout || echo wheel) \
TORCH_ARGS=${TORCH_CPU:-} "$py" - "$json" <<'PY'
import json, os, sys
from importlib.metadata import version

import torch, laya  # the install works: both import

try:  # torchvision's compiled operators load only beside the torch build it was built for
    from torchvision.ops import nms

    nms(torch.zeros(1, 4), torch.ones(1), 0.5)
    torchvision_error = None
except Exception as error:  # e.g. PyPI's CUDA torchvision beside a CPU torch: "operator torchvision::nms does not exist"
    torchvision_error = f"{type(error).__name__}: {error}"
e = os.environ
record = {
    "route": e["ROUTE"], "seconds": int(e["SECONDS_TAKEN"]), "bytes": int(e["BYTES"]),
    "torch": torch.__version__, "torchvision": version("torchvision"), "torchvision_error": torchvision_error,
    "laya": laya.__version__,
    "cuda_packages": int(e["CUDA"]), "cores": int(e["CORES"]),
    "load_before": float(e["LOAD_BEFORE"]), "load_after": float(e["LOAD_AFTER"]),
    "source": e["SRC_KIND"], "torch_cpu_args": [os.path.basename(a) for a in e["TORCH_ARGS"].split()] or None,
    "command": f"bash scripts/install_size.sh {e['ROUTE']}",
}
with open(sys.argv[1], "w") as f:
    json.dump(record, f, indent=1)
    f.write("\n")
print(json.dumps(record))
PY
echo "venv kept at $work/venv"
