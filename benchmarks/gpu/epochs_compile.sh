#!/usr/bin/env bash
# Issue #36, one self-limiting GPU call (~7 min): what speeds the epochs at thousands of
# agents and what cuts the cold compile, measured as `bench_cartpole.py --variants`
# (experiments/variants.py) on a shortened workload (100-200 updates), a fresh process per
# cell, rejax 0.1.3 in the same invocation at 1 and 4096 agents:
#   4096 agents: base, opt=tree (Adam on the tree of params, same math), clip=elem (rejax's
#                elementwise clip)
#   1 agent:     base and XLA compile flags (llvmpar, notriton, autotune=0, all three)
#   1024 agents: base, opt=tree
# Writes $OUT/rows.jsonl (one JSON row per cell) and $OUT/results.tgz (the tables).
#   BUDGET_S=430 bash benchmarks/gpu/epochs_compile.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
BUDGET_S="${BUDGET_S:-430}"; DEADLINE=$((SECONDS + BUDGET_S))
left() { echo $((DEADLINE - SECONDS)); }
OUT_DIR="${OUT:-/tmp/epochs-compile}"; RES=/tmp/epochs-compile-results
mkdir -p "$OUT_DIR" "$RES"
source benchmarks/gpu/sites.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT_DIR/device.txt"
bench() {  # TOTAL_TIMESTEPS AGENTS PEER(yes/no) VARIANT...
  local total=$1 agents=$2 peer=$3; shift 3
  (( $(left) > 45 )) || { echo "skipped: $agents agents $*"; return; }
  timeout $(( $(left) - 8 )) "$PY" benchmarks/bench_cartpole.py --agents "$agents" --repeats 2 \
    --repeat-budget-s 8 --total-timesteps "$total" --cell-timeout 100 \
    --ours-pythonpath "$OURS" --peer-python "$PY" --peer-pythonpath "$REJAX" \
    $([[ $peer == no ]] && echo --no-peer) --out-dir "$RES" --jsonl "$OUT_DIR/rows.jsonl" \
    --note "issue #36 variants" --variants "$@" 2>&1 | grep -v -i warning | tail -8
}
bench 51200 4096 yes base opt=tree clip=elem
bench 51200 1 yes base llvmpar notriton autotune=0 llvmpar+notriton+autotune=0
bench 102400 1024 no base opt=tree
tar czf "$OUT_DIR/results.tgz" -C "$RES" . 2>/dev/null
echo "epochs_compile: done in ${SECONDS}s"
