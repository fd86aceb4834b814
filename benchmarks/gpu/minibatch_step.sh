#!/usr/bin/env bash
# One self-limiting GPU call: one PPO minibatch step of many vmapped agents in
# several formulations of the same math (benchmarks/experiments/minibatch_step.py: XLA's
# vmapped gradient, stacked actor-critic layers, precision, a fused Pallas kernel per
# agent), at 1024, 4096 and 16384 agents; then, budget permitting, the library's GPU
# default against shorter rollout unrolls at 4096 agents (compile time at scale).
#   BUDGET_S=240 bash benchmarks/gpu/minibatch_step.sh
# Writes $OUT/minibatch.json, $OUT/rows.jsonl and $OUT/device.txt.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
BUDGET_S="${BUDGET_S:-240}"; DEADLINE=$((SECONDS + BUDGET_S))
left() { echo $((DEADLINE - SECONDS)); }
OUT_DIR="${OUT:-/tmp/minibatch-step}"; mkdir -p "$OUT_DIR"
source benchmarks/gpu/sites.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT_DIR/device.txt"
PYTHONPATH="$OURS" timeout $(( $(left) * 2 / 3 )) "$PY" -m benchmarks.experiments.minibatch_step \
  --agents 4096 1024 16384 --reps 5 --json "$OUT_DIR/minibatch.json" 2>&1 | grep -v -i warning
if (( $(left) > 60 )); then
  timeout $(( $(left) - 5 )) "$PY" -m benchmarks.bench_cartpole --agents 4096 --repeats 1 \
    --total-timesteps 51200 --cell-timeout 60 --ours-pythonpath "$OURS" --no-peer \
    --out-dir /tmp/minibatch-step-bench --jsonl "$OUT_DIR/rows.jsonl" \
    --note "rollout unroll at 4096 agents" \
    --variants opt=tree+eu=1+ru=4 opt=tree+eu=1+ru=2 2>&1 | grep -v -i warning | tail -6
fi
echo "minibatch_step: done in ${SECONDS}s"
