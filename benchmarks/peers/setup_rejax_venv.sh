#!/usr/bin/env bash
# Creates the virtualenv that runs the peer benchmark benchmarks/peers/rejax_ppo.py.
#
#   bash benchmarks/peers/setup_rejax_venv.sh [VENV_DIR]      # default benchmarks/.venv-rejax
#   REJAX_JAX_EXTRA=cuda12 bash benchmarks/peers/setup_rejax_venv.sh   # GPU: jax[cuda12]
#
# rejax 0.1.3 unpacks gymnax's old 5-value `step` (obs, state, reward, done, info), so it
# needs gymnax 0.0.9 and cannot share purejaxppo's environment (gymnax 1.0.1). Apart from
# gymnax, the numerical stack is pinned to the SAME versions purejaxppo's .venv uses
# (jax/jaxlib 0.10.2, flax 0.12.8, optax 0.2.8, chex 0.1.92, numpy 2.4.6), so the speed
# comparison is not a comparison of jax releases.
#
# `pip install rejax==0.1.3 gymnax==0.0.9` on Python 3.11.7 (CPU) resolved to, and this
# script pins, the core stack:
#   rejax==0.1.3 gymnax==0.0.9 jax==0.10.2 jaxlib==0.10.2 flax==0.12.8 optax==0.2.8
#   chex==0.1.92 distrax==0.1.9 tfp-nightly==0.26.0.dev20261027 numpy==2.4.6
#   ml_dtypes==0.6.0 dm-tree==0.1.10
# (distrax 0.1.9 depends on the unpinned `tfp-nightly`; pinning the nightly keeps it fixed.)
# The rest of the resolution, left to pip (it does not enter the timed program):
#   absl-py==2.5.1 gymnasium==1.4.0 matplotlib==3.11.2 seaborn==0.13.2 pandas==3.1.1
#   scipy==1.17.1 orbax-checkpoint==0.12.8 tensorstore==0.1.86 pyyaml==6.0.3 ...
# Checked: rejax 0.1.3 imports, jits and trains PPO on CartPole-v1 with these on CPU.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${1:-$HERE/../.venv-rejax}"
PYTHON="${PYTHON:-python3}"
JAX_SPEC="jax==0.10.2"
if [[ -n "${REJAX_JAX_EXTRA:-}" ]]; then
    JAX_SPEC="jax[${REJAX_JAX_EXTRA}]==0.10.2"
fi

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet \
    "rejax==0.1.3" \
    "gymnax==0.0.9" \
    "$JAX_SPEC" \
    -r "$HERE/numeric-stack.txt"

# Smoke import: fails the script (set -e) when the stack does not fit together.
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md

import gymnax
import jax
import rejax

versions = {p: md.version(p) for p in ("rejax", "gymnax", "jax", "jaxlib", "flax", "optax")}
print("rejax venv ok:", versions, "devices:", jax.devices())
EOF
