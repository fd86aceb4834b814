#!/usr/bin/env bash
# MuJoCo v4 reference runs on the GPU machine's 16 CPU cores: configs/mujoco.yaml
# through `envpool:<id>`, one process per env x seed (9 by default), all on the CPU
# (JAX_PLATFORMS=cpu: EnvPool steps on the host through io_callback). Each process's XLA
# is limited to one intra-op thread; all are confined to cores 0-13 (14-15 stay free).
#
#   bash benchmarks/gpu/mujoco_reference.sh OUT_DIR [TOTAL_TIMESTEPS] [SEEDS] [ENVS...]
#
# Needs on PYTHONPATH: envpool 1.2.5 (its MuJoCo .so + gym assets are enough), gymnax 1.0.1,
# distrax, tfp-nightly, dm-env, dm-tree, gymnasium, optree (see benchmarks/README.md, "GPU").
# Each process writes OUT_DIR/parts/<env>-<seed>/reference-h100cpu-*.{csv,md,png}; merge
# them with `python -m benchmarks.reference --merge OUT_DIR/parts`.
set -uo pipefail
OUT_DIR="$1"; TOTAL="${2:-1000000}"; SEEDS="${3:-3}"; shift 3 || shift $#
ENVS=("$@"); [[ ${#ENVS[@]} -gt 0 ]] || ENVS=(HalfCheetah-v4 Hopper-v4 Walker2d-v4)
mkdir -p "$OUT_DIR/parts"
export PYTHONUNBUFFERED=1 JAX_PLATFORMS=cpu
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false"
pids=()
for env in "${ENVS[@]}"; do
  for ((seed = 0; seed < SEEDS; seed++)); do
    dir="$OUT_DIR/parts/$env-$seed"; mkdir -p "$dir"
    taskset -c 0-13 "${PYTHON:-python3}" -m benchmarks.reference --env "$env" --seeds 1 \
      --seed-offset "$seed" --total-timesteps "$TOTAL" --device h100cpu --out "$dir" \
      --note "GPU machine's CPU (16 cores, 9 processes on cores 0-13 at once)" \
      > "$dir/log.txt" 2>&1 &
    pids+=($!)
  done
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
exit $rc
