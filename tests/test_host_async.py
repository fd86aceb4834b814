"""`host_vectorization: async` (gymnasium's AsyncVectorEnv) against "sync" (issue #26 item 6)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import purejaxppo as pjp

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_async_and_sync_give_the_same_returns_for_the_same_seed():
    base = dict(env_name="gymnasium:CartPole-v1", num_envs=4, num_steps=64, total_timesteps=1024)
    outs = {}
    for mode in ("sync", "async"):
        config = pjp.PPOConfig(**base, host_vectorization=mode)
        outs[mode] = pjp.make_train(config)(jax.random.key(3))
    sync, async_ = outs["sync"].metrics, outs["async"].metrics
    returns = np.asarray(sync["episode_return"])
    print(f"per-update episode_return (sync): {returns}")
    assert np.isfinite(returns).all() and returns.min() > 5  # episodes ended every update
    for name in ("episode_return", "episode_length", "loss", "approx_kl"):
        np.testing.assert_array_equal(np.asarray(async_[name]), np.asarray(sync[name]))
    leaves = jax.tree.leaves(outs["sync"].runner_state.train_state.params)
    other = jax.tree.leaves(outs["async"].runner_state.train_state.params)
    for a, b in zip(leaves, other, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_bad_host_vectorization_raises():
    with pytest.raises(ValueError, match="host_vectorization='asnyc'.*did you mean async"):
        pjp.PPOConfig(env_name="gymnasium:CartPole-v1", host_vectorization="asnyc")
    with pytest.raises(ValueError, match="gymnasium: ids only.*'CartPole-v1'"):
        pjp.PPOConfig(env_name="CartPole-v1", host_vectorization="async")
