#!/usr/bin/env bash
# Creates the virtualenv and the JaxMARL checkout that the peer benchmark
# benchmarks/peers/jaxmarl_baselines.py runs (JaxMARL's own IPPO / MAPPO baseline scripts).
#
#   bash benchmarks/peers/setup_jaxmarl_venv.sh VENV_DIR JAXMARL_DIR
#   JAXMARL_JAX_EXTRA=cuda12 bash benchmarks/peers/setup_jaxmarl_venv.sh ...   # GPU: jax[cuda12]
#
# The baseline scripts are not part of the jaxmarl wheel, so JAXMARL_DIR gets a clone of
# FLAIROx/JaxMARL with the pinned versions of the six files the benchmark uses checked out
# (peer code: it stays outside this repository and is never committed here):
#   baselines/IPPO/ippo_ff_mpe.py, baselines/MAPPO/mappo_rnn_mpe.py,
#   baselines/MAPPO/mappo_rnn_smax.py                      @ 014b4f0af877856dc0a90437596a23a31153e303
#   baselines/IPPO/config/ippo_ff_mpe.yaml                 @ 1daff54ad0c8c7055168a2ac6158f89366a16abc
#   baselines/MAPPO/config/mappo_homogenous_rnn_mpe.yaml   @ bd9f7011d0ce290df03ba2d2e3ed3357672402a1
#     (NUM_ENVS 16, TOTAL_TIMESTEPS 1e7; later versions of this file say 128 envs, 2e6 steps)
#   baselines/MAPPO/config/mappo_homogenous_rnn_smax.yaml  @ ea4733c755cf907e55488bdff111c8a180dc9db1
# These are the versions purejaxppo's configs/jaxmarl_*.yaml cite for their hyperparameters.
#
# The virtualenv: jaxmarl 0.2.0 (the release purejaxppo's .venv uses) plus what the scripts
# import (distrax, flax, optax, hydra-core, omegaconf, wandb, matplotlib, pandas, pyyaml),
# with the numerical stack pinned to the SAME versions as purejaxppo's .venv (jax/jaxlib
# 0.10.2, flax 0.12.8, optax 0.2.8, chex 0.1.92, distrax 0.1.9, numpy 2.4.6), so the
# comparison is not one of jax releases. On Python 3.11.7 (CPU) this resolved the rest to,
# among others: hydra-core 1.3.8, omegaconf 2.3.1, gymnax 1.0.1, scipy 1.17.1.
# Checked: the three scripts' make_train jit, vmap over seeds and train with these on CPU.
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 VENV_DIR JAXMARL_DIR" >&2
    exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$1"
JAXMARL_DIR="$2"
PYTHON="${PYTHON:-python3}"
JAX_SPEC="jax==0.10.2"
if [[ -n "${JAXMARL_JAX_EXTRA:-}" ]]; then
    JAX_SPEC="jax[${JAXMARL_JAX_EXTRA}]==0.10.2"
fi

SCRIPT_COMMIT=014b4f0af877856dc0a90437596a23a31153e303
declare -A CONFIG_COMMITS=(
    [baselines/IPPO/config/ippo_ff_mpe.yaml]=1daff54ad0c8c7055168a2ac6158f89366a16abc
    [baselines/MAPPO/config/mappo_homogenous_rnn_mpe.yaml]=bd9f7011d0ce290df03ba2d2e3ed3357672402a1
    [baselines/MAPPO/config/mappo_homogenous_rnn_smax.yaml]=ea4733c755cf907e55488bdff111c8a180dc9db1
)

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet \
    "jaxmarl==0.2.0" \
    "$JAX_SPEC" \
    -r "$HERE/numeric-stack.txt" \
    "hydra-core==1.3.8" \
    "omegaconf==2.3.1" \
    "wandb==0.31.0" \
    "matplotlib==3.11.2" \
    "pandas==3.1.1" \
    "pyyaml==6.0.4"

if [[ ! -d "$JAXMARL_DIR/.git" ]]; then
    git clone --quiet https://github.com/FLAIROx/JaxMARL.git "$JAXMARL_DIR"
fi
git -C "$JAXMARL_DIR" checkout --quiet "$SCRIPT_COMMIT"
for path in "${!CONFIG_COMMITS[@]}"; do
    git -C "$JAXMARL_DIR" checkout --quiet "${CONFIG_COMMITS[$path]}" -- "$path"
done

# Smoke import: fails the script (set -e) when the stack does not fit together.
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md

import distrax  # noqa: F401
import hydra  # noqa: F401
import jax
import jaxmarl  # noqa: F401
from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario  # noqa: F401
from jaxmarl.wrappers.baselines import MPELogWrapper, SMAXLogWrapper  # noqa: F401

versions = {p: md.version(p) for p in ("jaxmarl", "jax", "jaxlib", "flax", "optax", "distrax")}
print("jaxmarl venv ok:", versions, "devices:", jax.devices())
EOF
