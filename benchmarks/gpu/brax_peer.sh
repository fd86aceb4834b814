#!/usr/bin/env bash
# Ours vs Brax PPO on the GPU machine (run from the repo root with the wheels of
# benchmarks/README.md "GPU" in ../.whl/ours and ../.whl/brax); results land in $OUT.
set -o pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site ../.whl/ours/*.whl ../.whl/brax/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/versions.txt
timeout 550 python3 -m benchmarks.brax_peer --budget-s 400 --device h100 --out $OUT \
  --note "One NVIDIA H100 80GB (GPU machine, 16 cores, jax 0.11.2 CUDA), nothing else running on it."
echo "brax_peer rc $?"
