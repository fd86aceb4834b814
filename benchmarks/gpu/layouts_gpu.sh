#!/usr/bin/env bash
# One self-limiting GPU call: the loop layouts of the update side by side
# (experiments/gpu_layouts.py: run time, kernels and loop iterations per update), cold
# compiles with and without XLA autotuning, rejax's counts and times on the same short
# workload, and profile_update.py's phases of the "compact" layout. Writes under $OUT
# (or benchmarks/results/layouts-gpu/).  BUDGET_S (default 300) bounds the whole call.
#   bash benchmarks/gpu/layouts_gpu.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
BUDGET_S="${BUDGET_S:-300}"; DEADLINE=$((SECONDS + BUDGET_S))
left() { echo $((DEADLINE - SECONDS)); }
OUT_DIR="${OUT:-benchmarks/results/layouts-gpu}"; mkdir -p "$OUT_DIR"
source benchmarks/gpu/sites.sh
TOTAL="${TOTAL:-51200}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT_DIR/versions.txt" 2>&1
"$PY" -m pip list 2>/dev/null | grep -iE "^(jax|jaxlib|jax-cuda|flax|optax|chex)" >> "$OUT_DIR/versions.txt"
lay() { PYTHONPATH="$OURS" timeout "$1" "$PY" -m benchmarks.experiments.gpu_layouts "${@:2}" \
  --total-timesteps "$TOTAL" --out "$OUT_DIR" 2>> "$OUT_DIR/stderr.txt" | tee -a "$OUT_DIR/layouts.jsonl"; }
# 0. The GPU-only checks (the layouts agree on the GPU).
PYTHONPATH="$OURS" timeout 90 "$PY" -m benchmarks.gpu.check_layouts 2>> "$OUT_DIR/stderr.txt" | tee "$OUT_DIR/check_layouts.txt"
# 1. Cold compiles (the first cell of a process): unrolled, unrolled without autotuning.
lay 60 --agents 1 --plans unrolled --budget-s 1
XLA_FLAGS="--xla_gpu_autotune_level=0" lay 60 --agents 1 --plans unrolled --budget-s 1
# 2. The layouts (run times; compile times warm after the first cell).
lay 100 --ops --budget-s 70 --agents 1 --plans compact unrolled r=2 r=8 r=4,e=2 r=4,gae=scan
lay 80 --ops --budget-s 50 --agents 1024 --plans compact unrolled r=8 r=2
lay 60 --ops --budget-s 30 --agents 4096 --plans compact unrolled
# 3. rejax: counts and times on the same workload (one process per size).
for A in 1 1024; do
  (( $(left) > 40 )) || break
  PYTHONPATH="$REJAX" timeout 60 "$PY" -m benchmarks.peers.rejax_ppo --agents $A \
    --total-timesteps "$TOTAL" --repeats 2 --ops 2>> "$OUT_DIR/stderr.txt" | tee -a "$OUT_DIR/rejax.jsonl"
done
# 4. Phases of the compact layout (what the old default spent its time on).
if (( $(left) > 25 )); then
  PYTHONPATH="$OURS" timeout $(( $(left) - 5 )) "$PY" -m benchmarks.profile_update --agents 1 1024 \
    --loop-layout compact --reps 5 --repeats 2 --phase-budget-s 2 --budget-s $(( $(left) - 20 )) \
    --ops --out "$OUT_DIR" >> "$OUT_DIR/profile_log.txt" 2>&1
fi
echo "layouts_gpu: done in ${SECONDS}s"; ls "$OUT_DIR"
