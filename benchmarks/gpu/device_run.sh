#!/usr/bin/env bash
# GPU runs on a machine with a preinstalled jax (no internet): wheels carried in .whl/
# (see benchmarks/README.md, "GPU") are installed into two separate --target site dirs,
# /tmp/site_ours (gymnax 1.0.1, distrax, tfp-nightly, ...) and /tmp/site_rejax (rejax 0.1.3,
# gymnax 0.0.9, same distrax/tfp); jax/flax/optax/chex are the machine's own, shared by both.
#
#   bash benchmarks/gpu/device_run.sh table    OUT_DIR [agents...]
#   bash benchmarks/gpu/device_run.sh profile  OUT_DIR [profile_update.py args...]
#   bash benchmarks/gpu/device_run.sh variants OUT_DIR AGENTS VARIANT...
set -uo pipefail
MODE="$1"; OUT_DIR="$2"; shift 2
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
if [[ ! -d /tmp/site_ours/gymnax ]]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site_ours .whl/ours/*.whl .whl/common/*.whl || exit 1
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site_rejax .whl/rejax/*.whl .whl/ours/distrax-*.whl .whl/ours/tfp_nightly-*.whl \
    .whl/ours/dm_tree-*.whl .whl/common/*.whl || exit 1
  "$PY" -m pip list 2>/dev/null | grep -iE "^(jax|jaxlib|flax|optax|chex|numpy|jax-cuda)" > "$OUT_DIR/versions.txt"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >> "$OUT_DIR/versions.txt"
fi
# .whl/snap: a snapshot of the committed library (git archive HEAD purejaxppo), if carried
OURS="/tmp/site_ours:$PWD/.whl/snap:$PWD"
case "$MODE" in
  table)
    "$PY" -m benchmarks.bench_cartpole --agents "$@" --repeats 2 --repeat-budget-s 25 \
      ${TOTAL:+--total-timesteps $TOTAL} --cell-timeout 400 --ours-pythonpath "$OURS" --peer-python "$PY" \
      --peer-pythonpath /tmp/site_rejax --out-dir "$OUT_DIR" --jsonl "$OUT_DIR/rows.jsonl" \
      ${PEER_ONLY:+--peer-only-agents $PEER_ONLY} ${NO_PEER:+--no-peer} 2>&1 | tee -a "$OUT_DIR/table_log.txt"
    ;;
  profile)
    PYTHONPATH="$OURS" "$PY" -m benchmarks.profile_update --out-dir "$OUT_DIR" "$@" 2>&1 \
      | tee -a "$OUT_DIR/profile_log.txt"
    ;;
  variants)
    AGENTS="$1"; shift
    "$PY" -m benchmarks.bench_cartpole --agents $AGENTS --repeats 2 --repeat-budget-s 20 \
      ${TOTAL:+--total-timesteps $TOTAL} --cell-timeout 240 --ours-pythonpath "$OURS" --no-peer --variants "$@" \
      --out-dir "$OUT_DIR" --jsonl "$OUT_DIR/variant_rows.jsonl" 2>&1 | tee -a "$OUT_DIR/variants_log.txt"
    ;;
esac
