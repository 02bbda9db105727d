#!/usr/bin/env bash
# Depth analytics for every bundled checkpoint (python -m laya depth), skipping those whose depth.json
# is newer than their weights. Usage: scripts/depth_all.sh [MODELS_DIR] [extra flags for laya depth]
set -euo pipefail
models=${1:-models}
shift || true
python=${PYTHON:-python}
for dir in "$models"/*/*/; do
  dir=${dir%/}
  [ -f "$dir/model.json" ] || continue
  if [ -f "$dir/depth.json" ] && [ "$dir/depth.json" -nt "$dir/model.safetensors" ]; then
    echo "skip $dir (depth.json is up to date)"
    continue
  fi
  echo "== $dir"
  "$python" -m laya depth --checkpoint "$dir" --train-limit 5000 --limit 2000 "$@"
done
