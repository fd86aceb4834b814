#!/usr/bin/env bash
# Issue #36, one self-limiting GPU call (~3.5 min): clipping and Adam computed on the tree
# of params while keeping the library's raveled Adam state (`opt=leafwise`), and the same
# with the epochs unrolled 1 step per iteration (`opt=leafwise+eu=1`), against the GPU
# default (`base`), at 4096 agents (100 updates) and 1 agent, a fresh process per cell
# (bench_cartpole.py --variants). Writes $OUT/rows.jsonl and $OUT/results.tgz.
# (On 2026-11-27 this ran with opt=leafwise inside the library as its default, and the
# tokens `base adam=raveled eu=1` for what are here `opt=leafwise base opt=leafwise+eu=1`:
# results/gpu-variants-20261127.json, `variant_as_run`.)
#   BUDGET_S=215 bash benchmarks/gpu/adam_leafwise.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
BUDGET_S="${BUDGET_S:-215}"; DEADLINE=$((SECONDS + BUDGET_S))
left() { echo $((DEADLINE - SECONDS)); }
OUT_DIR="${OUT:-/tmp/adam-leafwise}"; RES=/tmp/adam-leafwise-results
mkdir -p "$OUT_DIR" "$RES"
source benchmarks/gpu/sites.sh
bench() {  # AGENTS VARIANT...
  local agents=$1; shift
  (( $(left) > 40 )) || { echo "skipped: $agents agents $*"; return; }
  timeout $(( $(left) - 5 )) "$PY" benchmarks/bench_cartpole.py --agents "$agents" --repeats 2 \
    --repeat-budget-s 8 --total-timesteps 51200 --cell-timeout 90 --ours-pythonpath "$OURS" \
    --no-peer --out-dir "$RES" --jsonl "$OUT_DIR/rows.jsonl" --note "issue #36 Adam on the raveled state" \
    --variants "$@" 2>&1 | grep -v -i warning | tail -6
}
bench 4096 base opt=leafwise opt=leafwise+eu=1
bench 1 base opt=leafwise
tar czf "$OUT_DIR/results.tgz" -C "$RES" . 2>/dev/null
echo "adam_leafwise: done in ${SECONDS}s"
