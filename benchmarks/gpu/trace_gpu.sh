#!/usr/bin/env bash
# One self-limiting GPU call: where the device time of one update goes at 1024
# and 4096 agents, purejaxppo (its GPU default layout) beside rejax 0.1.3, kernel by kernel
# (benchmarks/trace_update.py: a profiler trace of 10 updates, each kernel charged to the
# phase and component of the source line that built it); then purejaxppo alone at 16384
# agents on the full standard workload (bench_cartpole.py). Writes under $OUT.
#   BUDGET_S=420 bash benchmarks/gpu/trace_gpu.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
BUDGET_S="${BUDGET_S:-420}"; DEADLINE=$((SECONDS + BUDGET_S))
left() { echo $((DEADLINE - SECONDS)); }
OUT_DIR="${OUT:-/tmp/trace-gpu}"; mkdir -p "$OUT_DIR"
source benchmarks/gpu/sites.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT_DIR/versions.txt" 2>&1
trace() { # library agents pythonpath seconds
  (( $(left) > $4 )) || { echo "skip $1 $2 (budget)"; return; }
  PYTHONPATH="$3" timeout "$4" "$PY" -m benchmarks.trace_update --library "$1" --agents "$2" \
    --total-timesteps 5120 --out "$OUT_DIR" 2>> "$OUT_DIR/stderr.txt" | tee -a "$OUT_DIR/trace_log.txt"
}
trace ours 4096 "$OURS" 70
trace rejax 4096 "$REJAX" 50
trace ours 1024 "$OURS" 60
trace rejax 1024 "$REJAX" 45
# 16384 agents, the full workload (500k env steps per agent), purejaxppo only.
if (( $(left) > 120 )); then
  timeout $(( $(left) - 5 )) "$PY" -m benchmarks.bench_cartpole --agents 16384 --no-peer \
    --repeats 1 --cell-timeout $(( $(left) - 15 )) --ours-pythonpath "$OURS" \
    --out-dir "$OUT_DIR" --jsonl "$OUT_DIR/rows16384.jsonl" \
    --note "16384 agents, full standard workload, purejaxppo only" 2>&1 | grep -v Warning | tail -15
fi
echo "trace_gpu: done in ${SECONDS}s"; ls "$OUT_DIR"
