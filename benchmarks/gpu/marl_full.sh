#!/usr/bin/env bash
# The full multi-agent runs on the GPU machine: JaxMARL's budget, 1e7 env
# steps x 3 seeds (one vmapped program per task), each config's own num_envs (SMAX: 128).
# Run from the repo root with the run tool's `carry: [".whl"]`; results land in $OUT.
#
# Wheels (the machine has jax/flax/optax/chex but no internet), made here with
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform manylinux_2_28_x86_64 -d .whl/<dir> <packages>
#   .whl/ours/  gymnax 1.0.1, distrax, tfp-nightly, dm-tree   (as for device_run.sh)
#   .whl/brax/  brax, mujoco (and their pure-python deps)      (as for brax_peer.sh;
#               `import jaxmarl` imports brax and mujoco)
#   .whl/marl/  jaxmarl 0.2.0, jaxtyping, wadler-lindig, safetensors, pandas
#
# Cost: on the shared 2-core CPU the three tasks x 3 seeds take about 1.5-2 h
# (benchmarks/results/marl-throughput-cpu-20261125.md: IPPO 10-17 min, MAPPO 13-41 min,
# SMAX 63-66 min); GPU time not measured yet (no device was lent to the session that
# wrote this). If one task passes the 570 s timeout, lower its timesteps (the table's
# budget_frac says how far from 1e7: STEPS=...) or split its seeds over calls (SEEDS=1).
#
# One task per run-tool call (each call may run 10 minutes at most):
#   TASKS=mpe-ippo bash benchmarks/gpu/marl_full.sh
#   TASKS=mpe-mappo bash benchmarks/gpu/marl_full.sh
#   TASKS=smax3m-mappo bash benchmarks/gpu/marl_full.sh
# (without TASKS all three run in turn, for a machine without that limit).
set -o pipefail
export PYTHONUNBUFFERED=1
OUT="${OUT:-benchmarks/results}"
mkdir -p "$OUT"
if [[ ! -d /tmp/site_marl/jaxmarl ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target /tmp/site_marl .whl/ours/*.whl .whl/brax/*.whl .whl/marl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site_marl:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/versions.txt"
python3 -c "import jax; print(jax.__version__, jax.devices())" >> "$OUT/versions.txt"
for task in ${TASKS:-mpe-ippo mpe-mappo smax3m-mappo}; do
  timeout 570 python3 -m benchmarks.marl --tasks "$task" --seeds "${SEEDS:-3}" \
    --mpe-timesteps "${STEPS:-10000000}" --smax-timesteps "${STEPS:-10000000}" --smax-envs 128 --out "$OUT"
  echo "marl $task rc $?"
done
