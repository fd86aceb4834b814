#!/usr/bin/env bash
# One self-limiting GPU call: the table (bench_cartpole.py, purejaxppo's GPU
# default and rejax 0.1.3 in the same invocation at 1 / 1024 / 4096 agents, the full
# standard workload, a fresh process per cell), then a kernel trace of purejaxppo at 4096
# agents (trace_update.py). The raw trace and HLO go into one archive (few files come
# back from a device call). Writes under $OUT.
#   BUDGET_S=470 bash benchmarks/gpu/table_and_trace.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
BUDGET_S="${BUDGET_S:-470}"; DEADLINE=$((SECONDS + BUDGET_S))
left() { echo $((DEADLINE - SECONDS)); }
OUT_DIR="${OUT:-/tmp/table-gpu}"; mkdir -p "$OUT_DIR"
source benchmarks/gpu/sites.sh
timeout $(( $(left) - 60 )) "$PY" -m benchmarks.bench_cartpole --agents 1 1024 4096 --repeats 1 \
  --cell-timeout 150 --ours-pythonpath "$OURS" --peer-python "$PY" --peer-pythonpath "$REJAX" \
  --out-dir "$OUT_DIR" --jsonl "$OUT_DIR/rows.jsonl" \
  --note "the GPU default layout beside rejax" 2>&1 \
  | grep -v Warning | tail -12
if (( $(left) > 50 )); then
  mkdir -p /tmp/trace
  PYTHONPATH="$OURS" timeout $(( $(left) - 5 )) "$PY" -m benchmarks.trace_update --library ours \
    --agents 4096 --total-timesteps 5120 --out /tmp/trace 2>> /tmp/trace/stderr.txt | head -30
  cp /tmp/trace/trace-*.json "$OUT_DIR/" 2>/dev/null
  tar czf "$OUT_DIR/trace-raw.tar.gz" -C /tmp/trace . 2>/dev/null
fi
echo "table_and_trace: done in ${SECONDS}s"; ls "$OUT_DIR"
