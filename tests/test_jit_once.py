"""A run's init compiled with XLA's cheaper pipeline (`compiled.jit_once`) gives
bitwise the init of XLA's default one, on a discrete and a continuous config, and so does
the init of `[R]` runs (`parallel.make_runs_program(..., once=True)`)."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from purejaxppo import PPOConfig, parallel
from purejaxppo.compiled import jit_once
from purejaxppo.drivers import warm
from purejaxppo.train import make_train_fns

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def _leaves(tree) -> list[np.ndarray]:
    def host(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        return np.asarray(x)

    return [host(x) for x in jax.tree.leaves(tree)]


@pytest.mark.parametrize("config", ["cartpole.yaml", "pendulum.yaml"])
def test_init_compiled_once_cheaply_is_bitwise_the_default(config):
    fns = make_train_fns(PPOConfig.from_yaml(CONFIGS / config))
    key = jax.random.key(3)
    once = jit_once(fns.init)
    cheap, default = once(key), jax.jit(fns.init)(key)
    assert jax.tree.structure(cheap) == jax.tree.structure(default)
    for a, b in zip(_leaves(cheap), _leaves(default), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    # a second key of the same signature runs the same compiled program
    again = once(jax.random.key(4))
    # traceable: under a transformation it is `jax.jit(fns.init)`
    abstract = jax.eval_shape(once, key)
    assert jax.tree.structure(abstract) == jax.tree.structure(default)
    assert not all(
        a.tobytes() == b.tobytes() for a, b in zip(_leaves(again), _leaves(cheap), strict=True)
    )


def test_runs_init_compiled_once_cheaply_is_bitwise_the_default():
    """The seeds, sweep, tune and PBT drivers' init of `[R]` runs
    (`make_runs_program(..., once=True)`, `lax.map` over the runs inside `shard_map`)."""
    fns = make_train_fns(PPOConfig.from_yaml(CONFIGS / "cartpole.yaml"))
    mesh = parallel.make_mesh(None, parallel.RUNS_AXIS)
    init = warm.init_runs(fns.init, lambda runner: runner)
    key_data = np.stack([np.asarray(jax.random.key_data(jax.random.key(s))) for s in (5, 6)])
    key_data = parallel.to_global(key_data, mesh, P(parallel.RUNS_AXIS))
    shared = warm.replicate(None, mesh)
    cheap, default = (
        parallel.make_runs_program(init, mesh, warm.runs_specs(0), once=once)(key_data, shared)
        for once in (True, False)
    )
    assert jax.tree.structure(cheap) == jax.tree.structure(default)
    for a, b in zip(_leaves(cheap), _leaves(default), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and a.shape[0] == 2
        assert a.tobytes() == b.tobytes()
