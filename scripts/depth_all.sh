#!/usr/bin/env bash
# Depth analytics (python -m laya depth) for every bundled checkpoint whose depth.json is older than its
# weights, then the docs' generated blocks. Usage: scripts/depth_all.sh [MODELS_DIR] [extra flags for laya depth]
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
  "$python" -m laya --threads 1 depth --checkpoint "$dir" --train-limit 3000 --limit 2000 "$@"
done
"$python" scripts/prose_claims.py --write  # the docs' generated blocks: depth tables and facts (measured exits: python -m laya exits)
