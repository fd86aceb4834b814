#!/usr/bin/env bash
# One self-limiting GPU call: variants of the GPU default measured with
# `bench_cartpole.py --variants` (experiments/variants.py) on a shortened workload (100-200
# updates), a fresh process per cell. Two modes, each one call:
#
#   BUDGET_S=430 bash benchmarks/gpu/epochs_compile.sh            (~7 min)
#     what speeds the epochs at scale and what cuts the cold compile, rejax 0.1.3 in the
#     same invocation at 1 and 4096 agents:
#       4096 agents: base, opt=tree (Adam on the tree of params, same math), clip=elem
#       1 agent:     base and XLA compile flags (llvmpar, notriton, autotune=0, all three)
#       1024 agents: base, opt=tree
#   BUDGET_S=215 bash benchmarks/gpu/epochs_compile.sh leafwise   (~3.5 min)
#     opt=tree's computation on the library's raveled Adam state (opt=leafwise), also with
#     the epochs unrolled 1 step per iteration, against base at 4096 agents and 1 agent.
#     (On 2026-11-27 this ran with opt=leafwise inside the library as its default, under
#     the tokens `base adam=raveled eu=1`: results/gpu-variants-20261127.json,
#     `variant_as_run`.)
#   BUDGET_S=470 bash benchmarks/gpu/epochs_compile.sh fused      (~8 min)
#     the minibatch gradient as two fused Pallas kernels per agent (fused,
#     experiments/fused_grads.py), alone and with opt=tree+eu=1, against base and rejax
#     0.1.3 at 4096 and 1024 agents; base and fused at 1 agent.
#   BUDGET_S=480 bash benchmarks/gpu/epochs_compile.sh values     (~8 min)
#     the rollout's values from one critic pass after the scan (the GPU default since
#     2026-11-27, not yet measured on a GPU: `purejaxppo.loops.UNROLLED_BATCHED_VALUES`)
#     against values in the scan (values=loop), and with opt=tree+eu=1, beside rejax 0.1.3
#     at 4096, 1024 and 1 agent.
#
# Writes $OUT/rows.jsonl (one JSON row per cell) and $OUT/results.tgz (the tables).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
MODE="${1:-variants}"
BUDGET_S="${BUDGET_S:-430}"; DEADLINE=$((SECONDS + BUDGET_S))
left() { echo $((DEADLINE - SECONDS)); }
OUT_DIR="${OUT:-/tmp/epochs-compile}"; RES=/tmp/epochs-compile-results
mkdir -p "$OUT_DIR" "$RES"
source benchmarks/gpu/sites.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT_DIR/device.txt"
bench() {  # TOTAL_TIMESTEPS AGENTS PEER(yes/no) VARIANT...
  local total=$1 agents=$2 peer=$3; shift 3
  (( $(left) > 45 )) || { echo "skipped: $agents agents $*"; return; }
  timeout $(( $(left) - 8 )) "$PY" -m benchmarks.bench_cartpole --agents "$agents" --repeats 2 \
    --repeat-budget-s 8 --total-timesteps "$total" --cell-timeout 100 \
    --ours-pythonpath "$OURS" --peer-python "$PY" --peer-pythonpath "$REJAX" \
    $([[ $peer == no ]] && echo --no-peer) --out-dir "$RES" --jsonl "$OUT_DIR/rows.jsonl" \
    --note "variants ($MODE)" --variants "$@" 2>&1 | grep -v -i warning | tail -8
}
case "$MODE" in
  variants)
    bench 51200 4096 yes base opt=tree clip=elem
    bench 51200 1 yes base llvmpar notriton autotune=0 llvmpar+notriton+autotune=0
    bench 102400 1024 no base opt=tree
    ;;
  leafwise)
    bench 51200 4096 no base opt=leafwise opt=leafwise+eu=1
    bench 51200 1 no base opt=leafwise
    ;;
  fused)
    bench 51200 4096 yes base fused fused+opt=tree+eu=1
    bench 102400 1024 yes base fused fused+opt=tree+eu=1
    bench 51200 1 no base fused
    ;;
  values)
    bench 51200 4096 yes base values=loop opt=tree+eu=1
    bench 102400 1024 yes base values=loop
    bench 51200 1 yes base values=loop
    ;;
  *) echo "unknown mode $MODE (variants, leafwise, fused or values)"; exit 2 ;;
esac
tar czf "$OUT_DIR/results.tgz" -C "$RES" . 2>/dev/null
echo "epochs_compile $MODE: done in ${SECONDS}s"
