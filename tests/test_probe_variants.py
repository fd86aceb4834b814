"""MultiDiscrete / MultiBinary probes: their dynamics, and PPO solving them.

configs/probe_multi_discrete.yaml and probe_multi_binary.yaml, 2 seeds under one vmap,
150 updates of 8 envs x 16 steps each (19200 steps per seed, a few seconds of CPU).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.envs import MultiBinary, MultiDiscrete, ProbeMultiBinary, ProbeMultiDiscrete

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def test_spaces():
    space = MultiDiscrete([3, 2, 4])
    assert space.shape == (3,) and space.nvec == (3, 2, 4)
    samples = jax.vmap(space.sample)(jax.random.split(jax.random.key(0), 500))
    assert samples.dtype == jnp.int32
    np.testing.assert_array_equal(samples.min(0), [0, 0, 0])
    np.testing.assert_array_equal(samples.max(0), [2, 1, 3])
    assert bool(space.contains(jnp.array([2, 1, 3]))) and not bool(
        space.contains(jnp.array([3, 0, 0]))
    )
    bits = MultiBinary(4)
    assert bits.shape == (4,)
    assert set(np.unique(bits.sample(jax.random.key(1)))) <= {0, 1}
    assert bool(bits.contains(jnp.array([0, 1, 1, 0]))) and not bool(
        bits.contains(jnp.array([2, 0, 0, 0]))
    )
    with pytest.raises(ValueError, match=r"nvec=\[3, 0\]"):
        MultiDiscrete([3, 0])
    with pytest.raises(ValueError, match="n=0"):
        MultiBinary(0)


@pytest.mark.parametrize(
    ("env_id", "actions", "rewards"),
    [
        # best = (2, 0, 3): reward = fraction of matching components.
        ("ProbeMultiDiscrete-v0", [[2, 0, 3], [2, 1, 0], [0, 1, 0]], [1.0, 1 / 3, 0.0]),
        # best = (1, 0, 1, 1): reward = fraction of matching bits.
        ("ProbeMultiBinary-v0", [[1, 0, 1, 1], [1, 1, 1, 1], [0, 1, 0, 0]], [1.0, 0.75, 0.0]),
    ],
)
def test_probe_variant_dynamics(env_id, actions, rewards):
    env, env_params = pjp.make_env(env_id)
    obs, state = env.reset(jax.random.key(0), env_params)
    np.testing.assert_array_equal(obs, [0.0])
    for action, reward in zip(actions, rewards, strict=True):
        _, _, r, terminated, truncated, _ = env.step(
            jax.random.key(1), state, jnp.asarray(action), env_params
        )
        assert float(r) == pytest.approx(reward) and bool(terminated) and not bool(truncated)


def _train(name: str):
    config = pjp.PPOConfig.from_yaml(CONFIGS / f"{name}.yaml")
    out = jax.jit(jax.vmap(pjp.make_train(config)))(jax.random.split(jax.random.key(0), 2))
    params = [jax.tree.map(lambda x, i=i: x[i], out.train_state.params) for i in range(2)]
    return config, params, out


@pytest.mark.parametrize(
    ("name", "env_cls"),
    [("probe_multi_discrete", ProbeMultiDiscrete), ("probe_multi_binary", ProbeMultiBinary)],
)
def test_probe_variant_is_solved(name, env_cls):
    config, params, out = _train(name)
    env, env_params = pjp.make_env(config.env_name)
    _nets = pjp.make_networks(config, env, env_params)
    _, apply = _nets.init, _nets.apply
    best = np.asarray(env_cls.best)
    returns = np.asarray(out.metrics["episode_return"])
    # Random play: ~0.36 (MultiDiscrete), 0.5 (MultiBinary); the first updates are near it.
    # Measured (2 shared CPU cores, 2026-11-25; seeds split(key(k), 2) for k = 0, 1, 2): first 3
    # updates 0.38 .. 0.40 (MultiDiscrete), 0.49 .. 0.53 (MultiBinary); last 10 updates 1.0 on
    # every seed (MultiDiscrete), 0.9996 .. 1.0 (MultiBinary): margin 0.05, spread <= 0.0004.
    assert np.nanmean(returns[:, :3]) < 0.75
    assert np.nanmean(returns[:, -10:]) > 0.95
    for p in params:
        dist, value = apply(p, jnp.zeros((1, 1)))
        np.testing.assert_array_equal(dist.mode()[0], best)  # every component / bit
        if name == "probe_multi_discrete":
            prob_best = np.asarray(dist.distribution.probs)[0, np.arange(3), best]
        else:
            probs = np.asarray(dist.distribution.probs)[0]
            prob_best = np.where(best == 1, probs, 1 - probs)
        assert np.all(prob_best > 0.95), prob_best
        assert float(value[0]) == pytest.approx(1.0, abs=0.05)
        # The Policy API acts greedily with the same rule and evaluate() scores it.
        policy = pjp.Policy(p, config)
        np.testing.assert_array_equal(policy.act(jnp.zeros(1), jax.random.key(0), 0.0), best)
        action, output = policy.act(jnp.zeros((5, 1)), jax.random.key(1), return_model_output=True)
        assert action.shape == (5, len(best)) and action.dtype == jnp.int32
        assert "logits" in output
        result = pjp.evaluate(policy, num_episodes=8, greedy=True)
        np.testing.assert_allclose(result.returns, 1.0)
