"""A run's init compiled with XLA's cheaper pipeline (`drivers.program.jit_once`) gives
bitwise the init of XLA's default one, on a discrete and a continuous config."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

from purejaxppo import PPOConfig
from purejaxppo.drivers.program import jit_once
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
    assert not all(
        a.tobytes() == b.tobytes() for a, b in zip(_leaves(again), _leaves(cheap), strict=True)
    )
