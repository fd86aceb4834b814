#!/usr/bin/env bash
# The GPU speed table in one self-limiting GPU call: bench_cartpole.py, purejaxppo (its
# default loop layout on a GPU, "unrolled") and rejax 0.1.3 in the same invocation at
# 1 / 1024 / 4096 agents, then purejaxppo alone at 16384 agents, the full standard
# workload (500k env steps per agent), one run per cell. Writes
# $OUT/cartpole-gpu-<time>.json/.csv and rows.jsonl (row by row).  ~8 min on an H100.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT_DIR="${OUT:-benchmarks/results}"; mkdir -p "$OUT_DIR"
source benchmarks/gpu/sites.sh
timeout "${BUDGET_S:-505}" "$PY" -m benchmarks.bench_cartpole --agents 1 1024 4096 16384 \
  --peer-only-agents 1 1024 4096 --repeats 1 --cell-timeout "${CELL_S:-225}" \
  --ours-pythonpath "$OURS" --peer-python "$PY" --peer-pythonpath "$REJAX" \
  --out-dir "$OUT_DIR" --jsonl "$OUT_DIR/rows.jsonl" 2>&1 | grep -v Warning | tail -40
