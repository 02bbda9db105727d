#!/usr/bin/env bash
# Time and disk size of a fresh install of laya into a new virtualenv (README.md, "Install"):
#   bash scripts/install_size.sh gpu [SRC]   pip install SRC: PyPI's torch, with its CUDA wheels
#   bash scripts/install_size.sh cpu [SRC]   torch + torchvision from PyTorch's CPU index first, then SRC
# SRC: a checkout or a wheel (default: this checkout). TORCH_CPU replaces the CPU step's pip arguments
# (e.g. a local torch+cpu wheel where download.pytorch.org cannot be reached). pip's cache is not used.
set -euo pipefail
route=${1:?usage: install_size.sh gpu|cpu [SRC]}
src=$(realpath "${2:-$(dirname "$0")/..}")
work=$(mktemp -d "${TMPDIR:-/tmp}/laya-install-XXXXXX")
python3 -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip install --no-cache-dir --quiet)
start=$(date +%s)
if [ "$route" = cpu ]; then
    # shellcheck disable=SC2086 # TORCH_CPU is a list of pip arguments
    "${pip[@]}" ${TORCH_CPU:-torch torchvision --index-url https://download.pytorch.org/whl/cpu}
    "$work/venv/bin/python" -c "import torch; print('torch==' + torch.__version__)" > "$work/pin.txt"
    "${pip[@]}" -c "$work/pin.txt" "$src"   # keeps that torch: no CUDA wheels
else
    "${pip[@]}" "$src"
fi
end=$(date +%s)
echo "$route install: $((end - start)) s, $(du -sh "$work/venv" | cut -f1) in $work/venv ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo "CUDA packages: $("$work/venv/bin/python" -m pip list 2>/dev/null | grep -c -i -E '^(nvidia|triton)' || true)"
"$work/venv/bin/python" -c "import torch; print('torch', torch.__version__)"
"$work/venv/bin/python" -c "import torchvision; print('torchvision', torchvision.__version__)" 2>&1 | tail -1 || true  # fails beside a CPU torch of another build
