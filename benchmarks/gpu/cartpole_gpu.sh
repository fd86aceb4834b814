#!/usr/bin/env bash
# CartPole on one GPU, in ONE self-limiting command: where an update's time goes
# (benchmarks/profile_update.py at 1 / 1024 / 4096 agents, with HLO op counts), then the
# CartPole table, purejaxppo and rejax side by side in the same invocation
# (benchmarks/bench_cartpole.py, same agent counts), merged into
#   $OUT_DIR/cartpole-gpu-<time>.json
# OUT_DIR: $OUT (the device tool's returned folder) when set, else benchmarks/results.
# Copy the merged file (and parts/) into benchmarks/results/ afterwards.
#
#   bash benchmarks/gpu/cartpole_gpu.sh                 # budget 540 s in all
#   BUDGET_S=400 AGENTS="1 1024" bash benchmarks/gpu/cartpole_gpu.sh
#
# Set-up as benchmarks/gpu/device_run.sh (a machine with its own jax and no internet):
# the wheels in .whl/ (ignored by git; carried with the run tool's carry: [".whl"]; how to
# make them: benchmarks/README.md, "GPU") go into two --target site dirs, /tmp/site_ours
# (gymnax 1.0.1, distrax, tfp-nightly, ...) and /tmp/site_rejax (rejax 0.1.3, gymnax
# 0.0.9, ...); jax / flax / optax / chex are the machine's, shared by both libraries. A
# step that cannot run (no GPU, no wheels, no rejax) is reported in the merged file and
# the others still run. Exit status: 0 when the profile and the table both finished.
#
# Time (estimates from the 2026-11-26 H100 numbers, not measurements): the
# profile ~2 min (budget PROFILE_S), the table ~5 min: per cell one compile and up to 2
# runs (the 2nd only when the 1st took < 25 s), rejax 4096 agents ~70 s, ours ~75 s.
set -uo pipefail

BUDGET_S="${BUDGET_S:-540}"        # the whole script
PROFILE_S="${PROFILE_S:-150}"      # the profile's share (it starts no row after that)
AGENTS="${AGENTS:-1 1024 4096}"
TOTAL="${TOTAL:-500000}"           # env steps per agent in the table
PY="${PYTHON:-python3}"
DEADLINE=$((SECONDS + BUDGET_S))
remaining() { echo $((DEADLINE - SECONDS)); }

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
STAMP="$(date +%Y%m%d-%H%M%S)"
OUT_DIR="${OUT:-benchmarks/results}"
PARTS="$OUT_DIR/parts-$STAMP"
mkdir -p "$PARTS"
export PYTHONUNBUFFERED=1
LOG="$PARTS/log.txt"
note() { echo "cartpole_gpu: $*" | tee -a "$LOG" >&2; }

# 1. Wheels (once per machine) and a preflight of both libraries.
if [[ ! -d /tmp/site_ours/gymnax ]]; then
  if compgen -G ".whl/ours/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site_ours .whl/ours/*.whl .whl/common/*.whl >> "$LOG" 2>&1 \
      || note "installing .whl/ours failed (see $LOG)"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site_rejax .whl/rejax/*.whl .whl/ours/distrax-*.whl \
      .whl/ours/tfp_nightly-*.whl .whl/ours/dm_tree-*.whl .whl/common/*.whl >> "$LOG" 2>&1 \
      || note "installing .whl/rejax failed (see $LOG)"
  else
    note "no .whl/ours/*.whl: using the machine's own packages (rejax likely missing)"
  fi
fi
OURS="/tmp/site_ours:$PWD/.whl/snap:$PWD"
"$PY" -m pip list 2>/dev/null | grep -iE "^(jax|jaxlib|jax-cuda|flax|optax|chex|numpy|pandas)\b" \
  > "$PARTS/versions.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv \
  >> "$PARTS/versions.txt" 2>&1 || note "nvidia-smi failed: is there a GPU?"
PLATFORM="$(PYTHONPATH="$OURS" timeout 120 "$PY" -c \
  'import jax, purejaxppo; print(jax.devices()[0].platform)' 2>> "$LOG")"
note "purejaxppo imports; JAX platform: ${PLATFORM:-none (see $LOG)}"
[[ "$PLATFORM" == "gpu" ]] || note "WARNING: not on a GPU; the numbers are not GPU numbers"
PEER=(--peer-python "$PY" --peer-pythonpath /tmp/site_rejax)
if ! PYTHONPATH=/tmp/site_rejax timeout 120 "$PY" -c 'import rejax, gymnax' 2>> "$LOG"; then
  note "rejax does not import: the table runs purejaxppo only"
  PEER=(--no-peer)
fi

# 2. Where an update's time goes (phases in ms, HLO op / kernel counts per loop body).
PROFILE_OK=0
if (( $(remaining) > 60 )); then
  LIMIT=$(( PROFILE_S + 60 < $(remaining) - 30 ? PROFILE_S + 60 : $(remaining) - 30 ))
  # shellcheck disable=SC2086
  PYTHONPATH="$OURS" timeout "$LIMIT" "$PY" -m benchmarks.profile_update --agents $AGENTS \
    --reps 10 --repeats 3 --phase-budget-s 3 --budget-s "$PROFILE_S" --ops \
    --out "$PARTS" 2>&1 | tee -a "$PARTS/profile_log.txt"
  [[ ${PIPESTATUS[0]} -eq 0 ]] && PROFILE_OK=1 || note "the profile did not finish"
fi

# 3. The table: ours and rejax, each cell in a fresh process, best of up to 2 runs.
TABLE_OK=0
if (( $(remaining) > 90 )); then
  # shellcheck disable=SC2086
  timeout "$(( $(remaining) - 20 ))" "$PY" -m benchmarks.bench_cartpole --agents $AGENTS \
    --total-timesteps "$TOTAL" --repeats 2 --repeat-budget-s 25 --cell-timeout 240 \
    --ours-pythonpath "$OURS" "${PEER[@]}" --out-dir "$PARTS" --jsonl "$PARTS/rows.jsonl" \
    2>&1 | tee -a "$PARTS/table_log.txt"
  [[ ${PIPESTATUS[0]} -eq 0 ]] && TABLE_OK=1 || note "the table did not finish (rows so far: rows.jsonl)"
else
  note "no time left for the table"
fi

# 4. One merged record (named by the platform: a dry run elsewhere is not a GPU result).
if [[ "$PLATFORM" == "gpu" ]]; then NAME="cartpole-gpu-$STAMP"; else NAME="cartpole-${PLATFORM:-unknown}-dryrun-$STAMP"; fi
MERGED="$OUT_DIR/$NAME.json"
"$PY" - "$PARTS" "$MERGED" "$PROFILE_OK" "$TABLE_OK" "$BUDGET_S" "$SECONDS" "${PLATFORM:-none}" <<'EOF'
import glob, json, os, sys

parts, merged, profile_ok, table_ok, budget, elapsed, platform = sys.argv[1:]

def newest(pattern):
    paths = sorted(glob.glob(os.path.join(parts, pattern)))
    return json.load(open(paths[-1])) if paths else None

rows = []
if os.path.exists(os.path.join(parts, "rows.jsonl")):
    rows = [json.loads(line) for line in open(os.path.join(parts, "rows.jsonl")) if line.strip()]
record = {
    "what": "profile_update.py (phases, ms per update; HLO op counts) and bench_cartpole.py "
            "(purejaxppo vs rejax, same invocation) on one GPU",
    "platform": platform,
    "profile_finished": profile_ok == "1",
    "table_finished": table_ok == "1",
    "budget_s": float(budget),
    "elapsed_s": float(elapsed),
    "versions": open(os.path.join(parts, "versions.txt")).read().splitlines(),
    "profile": newest("profile-*.json"),
    "table": newest("cartpole-*.json"),
    "table_rows_as_measured": rows,
    "parts": parts,
}
with open(merged, "w") as file:
    json.dump(record, file, indent=1, default=str)
print(f"wrote {merged}")
EOF
note "done in ${SECONDS}s: profile ok=$PROFILE_OK, table ok=$TABLE_OK -> $MERGED"
[[ $PROFILE_OK -eq 1 && $TABLE_OK -eq 1 ]]
