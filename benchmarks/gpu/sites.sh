#!/usr/bin/env bash
# Sourced by the GPU scripts: installs the wheels carried in .whl/ (benchmarks/README.md,
# "GPU") into two --target site dirs, once per machine, and sets
#   OURS   PYTHONPATH of purejaxppo (/tmp/site_ours: gymnax 1.0.1, distrax, tfp-nightly, ...)
#   REJAX  PYTHONPATH of the peer   (/tmp/site_rejax: rejax 0.1.3, gymnax 0.0.9, ...)
# jax / flax / optax / chex are the machine's own, shared by both libraries.
PY="${PYTHON:-python3}"
if [[ ! -d /tmp/site_ours/gymnax ]] && compgen -G ".whl/ours/*.whl" > /dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site_ours .whl/ours/*.whl .whl/common/*.whl >&2 || echo "sites: ours failed" >&2
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site_rejax .whl/rejax/*.whl .whl/ours/distrax-*.whl \
    .whl/ours/tfp_nightly-*.whl .whl/ours/dm_tree-*.whl .whl/common/*.whl >&2 \
    || echo "sites: rejax failed" >&2
fi
# The scripts run as `"$PY" -m benchmarks.NAME` from the repository root, which puts the
# root (the `benchmarks` package) first on the module search path.
OURS="/tmp/site_ours:$PWD"
REJAX="/tmp/site_rejax"
export PYTHONUNBUFFERED=1
