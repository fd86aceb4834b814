"""benchmarks/experiments/variants.py: the GPU speed variants of docs/guides/gpu-design.md.

The variants patch purejaxppo's modules, so they run in a subprocess. `opt=tree` and
`opt=leafwise` compute the library's clipping and Adam in another order (the global norm
sums per leaf): after a short training run the params differ from the library's by float32
rounding only, and each keeps the optimizer state it claims (params-shaped / raveled);
`clip=elem` (other math) differs by far more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.experiments import variants

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import json, sys
import jax, jax.numpy as jnp, optax
import purejaxppo as pjp
from benchmarks.experiments import variants

def adam_mu(state):
    if isinstance(state, optax.ScaleByAdamState):
        return state.mu
    for part in state if isinstance(state, tuple) else ():
        if (found := adam_mu(part)) is not None:
            return found

def run():
    config = pjp.PPOConfig(total_timesteps=4 * 128 * 3)
    out = jax.jit(pjp.make_train(config))(jax.random.key(0))
    return out.train_state

base = run()
result = {}
for variant in sys.argv[1:]:
    variants.apply(variant)
    state = run()
    diff = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))), base.params, state.params)
    mu = adam_mu(state.opt_state)
    result[variant] = {
        "max_param_diff": max(jax.tree.leaves(diff)),
        "max_param": max(float(jnp.max(jnp.abs(p))) for p in jax.tree.leaves(base.params)),
        "mu_leaves": len(jax.tree.leaves(mu)),
        "param_leaves": len(jax.tree.leaves(base.params)),
    }
print("RESULT " + json.dumps(result))
"""


def test_parse_rejects_unknown_tokens_and_maps_flags():
    assert variants.parse("opt=tree+eu=1") == {"opt": "tree", "eu": "1"}
    with pytest.raises(ValueError, match="unknown variant tokens"):
        variants.parse("opt=tree+warp=9")
    assert variants.xla_flags("notriton") == "--xla_gpu_enable_triton_gemm=false"
    assert variants.xla_flags("opt=tree") == ""
    assert variants.parse("nofused+eu=1") == {"nofused": "", "eu": "1"}


def test_tree_and_leafwise_adam_match_the_library_and_keep_their_state_shapes():
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM, "opt=leafwise", "opt=tree", "clip=elem"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    for variant in ("opt=leafwise", "opt=tree"):
        r = result[variant]
        assert r["max_param"] > 0.1
        assert r["max_param_diff"] < 1e-4, (variant, r)
    # Measured: 3e-8 for both (float32 rounding); rejax's elementwise clip, other math, 5e-3.
    assert result["clip=elem"]["max_param_diff"] > 1e-3
    # The raveled state: one vector; the tree state: one leaf per param leaf.
    assert result["opt=leafwise"]["mu_leaves"] == 1
    assert result["opt=tree"]["mu_leaves"] == result["opt=tree"]["param_leaves"] > 1
