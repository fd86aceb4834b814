#!/usr/bin/env bash
# One self-limiting GPU call (~4 min): where the cold compile of the training
# program goes on the GPU (trace, lower, XLA's HLO passes and backend), per loop layout and
# rollout unroll, beside rejax 0.1.3, one fresh process per cell
# (benchmarks/experiments/compile_split.py; the same cells on the 2-core CPU:
# docs/guides/gpu-design.md, "Where the compile time goes").
#
#   BUDGET_S=240 bash benchmarks/gpu/compile_split.sh
#
# Writes $OUT/compile-split-gpu.jsonl (one JSON row per cell, XLA's timers included) and
# $OUT/device.txt.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
BUDGET_S="${BUDGET_S:-240}"
OUT_DIR="${OUT:-/tmp/compile-split}"
mkdir -p "$OUT_DIR"
source benchmarks/gpu/sites.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT_DIR/device.txt"
timeout "$BUDGET_S" "$PY" -m benchmarks.experiments.compile_split --timeout 90 \
  --ours-pythonpath "$OURS" --peer-python "$PY" --peer-pythonpath "$REJAX" \
  --jsonl "$OUT_DIR/compile-split-gpu.jsonl" \
  --cells unrolled/base compact/base rejax unrolled/ru=4 unrolled/ru=2 unrolled/values=loop \
  unrolled/nofused 2>&1 | grep -v -i warning | tail -12
