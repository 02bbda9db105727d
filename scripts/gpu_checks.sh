#!/usr/bin/env bash
# The GPU checks as one script: run it on a machine with a CUDA GPU, from a checkout with laya installed.
#
#   bash scripts/gpu_checks.sh                 # the log: /tmp/gpu-checks/gpu-checks.log (OUT=DIR to choose)
#   DRY_RUN=1 bash scripts/gpu_checks.sh       # print the steps only
#
# A machine without internet access: `bash scripts/gpu_prepare.sh` elsewhere first writes the wheels and the
# CIFAR-10 archive into .gpu/ (ignored), which this script installs and uses when present.
#
# Every step's output goes to $OUT/gpu-checks.log (and the terminal); a failing step is reported and
# the script goes on, so one run records everything. Steps are ordered cheapest-first and each has its
# own time limit, so the whole run stays bounded. DRY_RUN=1 prints the steps instead.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu-checks}"
mkdir -p "$OUT"
LOG="$OUT/gpu-checks.log"
: >"$LOG"
export PYTHONUNBUFFERED=1 LAYA_CACHE=/tmp/laya-cache

if [ -d .gpu/whl ] && [ -z "${DRY_RUN:-}" ]; then  # the packages the machine's image lacks (gpu_prepare.sh)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
[ -d .gpu/data ] && export LAYA_DATA="$PWD/.gpu/data"

step() {  # step SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2
    shift 2
    echo "=== $what ($(date -u +%H:%M:%S), limit ${limit}s): $*" | tee -a "$LOG"
    if [ -n "${DRY_RUN:-}" ]; then return 0; fi
    local start=$SECONDS
    timeout "$limit" "$@" 2>&1 | sed -u 's/.*\r//' | tee -a "$LOG"  # a progress bar: its last state only
    local rc=${PIPESTATUS[0]}
    echo "=== exit $rc after $((SECONDS - start)) s" | tee -a "$LOG"
}

CNN=(--dataset cifar10 --backbone cnn --widths 32,64,128,128,256 --head laya)
step 20 "machine" nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
step 20 "torch" python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.device_count())"
step 90 "unit profile on cuda: first and each further input against U + 1 forwards (issue 35, section 7)" \
    python3 benchmarks/unit_profile_speed.py --device cuda --rounds 5 --out "$OUT/speed-cuda"
step 120 "device tests" python3 -m pytest -q -x -p no:cacheprovider tests/training/test_device_pipeline.py \
    tests/model/test_devices.py tests/analysis/test_evaluate_distributed.py
step 90 "train on cuda (the issue's crash)" python3 -m laya train "${CNN[@]}" --augment flip_crop --max-epochs 4 \
    --device cuda --out /tmp/gpu-cnn
step 60 "evaluate on cuda" python3 -m laya evaluate --checkpoint /tmp/gpu-cnn --device cuda --out /tmp/gpu-eval-cuda
step 120 "the same checkpoint evaluated on the cpu" python3 -m laya --threads 16 evaluate --checkpoint /tmp/gpu-cnn \
    --device cpu --out /tmp/gpu-eval-cpu
step 10 "cuda vs cpu report" python3 - <<'EOF'
import json
a, b = (json.load(open(f"/tmp/gpu-eval-{d}/report.json")) for d in ("cuda", "cpu"))
print("accuracy cuda", a["accuracy"], "cpu", b["accuracy"])
for mode, by_reduction in a["faithfulness"].items():
    x, y = by_reduction["signed"][a["primary_method"]], b["faithfulness"][mode]["signed"][b["primary_method"]]
    print(mode, {m: (x[m]["estimate"], y[m]["estimate"]) for m in ("spearman_eps", "top1") if m in x and x[m]})
EOF
step 60 "bf16 training" python3 -m laya train "${CNN[@]}" --max-epochs 2 --device cuda --precision bf16 \
    --out /tmp/gpu-cnn-bf16
step 60 "torchrun, 2 processes on 1 GPU (gloo + warning)" torchrun --nproc_per_node 2 -m laya evaluate \
    --checkpoint /tmp/gpu-cnn --out /tmp/gpu-eval-torchrun
step 60 "a generated 5,000-image ImageFolder" python3 benchmarks/make_image_folder.py /tmp/laya-epoch --train 5000 \
    --test 500 --size 32
step 60 "epoch time, cpu vs cuda, in memory vs streamed" python3 benchmarks/data_paths.py epoch --dataset /tmp/laya-epoch
step 240 "whole suite minus the browser test" python3 -m pytest -q -p no:cacheprovider -m "not e2e" \
    --ignore=tests/training/test_bundled_models.py
cp /tmp/gpu-eval-cuda/report.json "$OUT/report-cuda.json" 2>/dev/null || true
cp /tmp/gpu-eval-cpu/report.json "$OUT/report-cpu.json" 2>/dev/null || true
echo "=== done $(date -u +%H:%M:%S)" | tee -a "$LOG"
