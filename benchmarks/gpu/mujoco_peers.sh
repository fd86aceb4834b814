#!/usr/bin/env bash
# Same-machine MuJoCo peers on the GPU machine's CPU: SB3 2.9.2 PPO, SBX 0.28.0 PPO
# (benchmarks/peers/sb3_mujoco.py, gymnasium HalfCheetah-v4) and ours (benchmarks/reference.py,
# envpool:HalfCheetah-v4, configs/mujoco_cleanrl.yaml and configs/mujoco.yaml), CleanRL's
# settings, one process per agent at once, each pinned to its own core (0-3), one thread.
#   bash benchmarks/gpu/mujoco_peers.sh OUT_DIR [TOTAL_TIMESTEPS]
set -uo pipefail
OUT_DIR="$1"; TOTAL="${2:-100000}"
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 JAX_PLATFORMS=cpu OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false"
PY="${PYTHON:-python3}"
taskset -c 0 "$PY" -m benchmarks.peers.sb3_mujoco --agent sb3 --total-timesteps "$TOTAL" \
  --out "$OUT_DIR/sb3.json" > "$OUT_DIR/sb3.log" 2>&1 &
taskset -c 1 "$PY" -m benchmarks.peers.sb3_mujoco --agent sbx --total-timesteps "$TOTAL" \
  --out "$OUT_DIR/sbx.json" > "$OUT_DIR/sbx.log" 2>&1 &
for cfg in mujoco_cleanrl mujoco; do
  core=$([[ $cfg == mujoco ]] && echo 3 || echo 2)
  mkdir -p "$OUT_DIR/ours-$cfg"
  taskset -c "$core" "$PY" -m benchmarks.reference --config "configs/$cfg.yaml" \
    --total-timesteps "$TOTAL" --device h100cpu --out "$OUT_DIR/ours-$cfg" \
    --note "GPU machine's CPU, one core (taskset), next to SB3 / SBX on other cores" \
    > "$OUT_DIR/ours-$cfg.log" 2>&1 &
done
wait
