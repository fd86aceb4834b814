"""Dynamics of the probe environments (no training)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import environment, spaces

from purejaxppo.envs.probes import (
    PROBE_ENVS,
    EnvParams,
    EnvState,
    Probe1,
    Probe2,
    Probe3,
    Probe4,
    Probe5,
    Probe6,
    Probe6Params,
    Probe7,
    Probe7Params,
    ProbeLambda,
    ProbeLambdaTimeLimit,
    ProbeTrustRegion,
    ProbeTrustRegionNoOffset,
)

N_KEYS = 1000


def _trajectory(
    env: environment.Environment, params: Any, key: jax.Array, actions: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Resets, then applies `actions` with `step_env` (no auto-reset).

    Returns:
      `(obs, rewards, terminated, cue)`: the observation seen before each action
      `(T, 1)`, the rewards `(T,)`, the terminated flags `(T,)`, and the reset cue.
    """
    key_reset, key_steps = jax.random.split(key)
    obs0, state0 = env.reset(key_reset, params)

    def body(carry: tuple[jax.Array, EnvState], inp: tuple[jax.Array, jax.Array]):
        obs, state = carry
        step_key, action = inp
        next_obs, state, reward, terminated, _ = env.step_env(step_key, state, action, params)
        return (next_obs, state), (obs, reward, terminated)

    step_keys = jax.random.split(key_steps, actions.shape[0])
    _, (obs, rewards, terminated) = jax.lax.scan(body, (obs0, state0), (step_keys, actions))
    return obs, rewards, terminated, state0.cue


# Compiled once per (env instance, params structure, action shape): reuse env instances.
_jit_trajectory = jax.jit(_trajectory, static_argnums=0)
_jit_trajectories = jax.jit(jax.vmap(_trajectory, in_axes=(None, None, 0, 0)), static_argnums=0)
ENVS: dict[str, environment.Environment] = {env_id: cls() for env_id, cls in PROBE_ENVS.items()}


def run(
    env: environment.Environment,
    actions: Sequence[int],
    params: Any = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """One jitted episode with the given actions, as numpy arrays."""
    params = env.default_params if params is None else params
    acts = jnp.asarray(actions, dtype=jnp.int32)
    obs, rew, term, cue = _jit_trajectory(env, params, jax.random.key(seed), acts)
    return np.asarray(obs), np.asarray(rew), np.asarray(term), int(cue)


def run_many(
    env: environment.Environment,
    actions: Any,
    params: Any = None,
    n: int = N_KEYS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`n` jitted, vmapped episodes; `actions` is `(T,)` (shared) or `(n, T)`."""
    params = env.default_params if params is None else params
    keys = jax.random.split(jax.random.key(123), n)
    actions = jnp.asarray(actions, dtype=jnp.int32)
    if actions.ndim == 1:
        actions = jnp.broadcast_to(actions, (n, actions.shape[0]))
    obs, rew, term, cue = _jit_trajectories(env, params, keys, actions)
    return np.asarray(obs), np.asarray(rew), np.asarray(term), np.asarray(cue)


# --------------------------------------------------------------------------- API


def test_probe_ids() -> None:
    assert list(PROBE_ENVS) == [f"Probe{i}-v0" for i in range(1, 8)]
    assert list(PROBE_ENVS.values()) == [Probe1, Probe2, Probe3, Probe4, Probe5, Probe6, Probe7]


@pytest.mark.parametrize("env_id", list(PROBE_ENVS))
def test_api_shapes_and_dtypes(env_id: str) -> None:
    env = PROBE_ENVS[env_id]()
    params = env.default_params
    assert isinstance(env, environment.Environment)
    assert isinstance(params, environment.EnvParams)
    assert env.name == env_id
    assert params.max_steps_in_episode == 100
    n_actions = {"Probe1-v0": 1, "Probe2-v0": 1, "Probe3-v0": 1}.get(env_id, 2)
    assert env.num_actions == n_actions
    act_space = env.action_space(params)
    assert isinstance(act_space, spaces.Discrete) and act_space.n == n_actions
    obs_space = env.observation_space(params)
    assert isinstance(obs_space, spaces.Box) and obs_space.shape == (1,)
    assert obs_space.dtype == jnp.float32

    obs, state = env.reset(jax.random.key(0), params)
    assert isinstance(state, environment.EnvState)
    assert obs.shape == (1,) and obs.dtype == jnp.float32
    assert int(state.time) == 0
    assert bool(obs_space.contains(obs))

    out = env.step(jax.random.key(1), state, jnp.int32(n_actions - 1), params)
    assert len(out) == 6
    obs, state, reward, terminated, truncated, info = out
    assert obs.shape == (1,) and obs.dtype == jnp.float32
    assert reward.shape == () and reward.dtype == jnp.float32
    assert terminated.shape == () and terminated.dtype == jnp.bool_
    assert truncated.shape == () and truncated.dtype == jnp.bool_
    assert info["final_observation"].shape == (1,)
    assert bool(obs_space.contains(info["final_observation"]))
    # Also accepts a Python int action and no params.
    env.step(jax.random.key(2), state, 0)


@pytest.mark.parametrize("env_id", list(PROBE_ENVS))
def test_public_step_auto_resets_after_termination(env_id: str) -> None:
    """The public `step` (jitted, vmapped over keys) runs to termination, then resets."""
    env = ENVS[env_id]
    params = env.default_params
    length = {"Probe3-v0": 2, "Probe6-v0": 6, "Probe7-v0": 5}.get(env_id, 1)

    def episode(key: jax.Array) -> tuple[Any, ...]:
        key, k = jax.random.split(key)
        obs, state = env.reset(k, params)
        terms, truncs = [], []
        for _ in range(length):
            key, k = jax.random.split(key)
            obs, state, _, term, trunc, info = env.step(k, state, 0, params)
            terms.append(term)
            truncs.append(trunc)
        return obs, state, jnp.stack(terms), jnp.stack(truncs), info

    keys = jax.random.split(jax.random.key(7), 64)
    obs, state, terms, truncs, info = jax.jit(jax.vmap(episode))(keys)
    assert terms.shape == (64, length)
    assert np.all(np.asarray(terms) == [False] * (length - 1) + [True])
    assert not np.any(np.asarray(truncs))
    assert np.all(np.asarray(state.time) == 0)  # auto-reset
    assert np.all(np.asarray(info["terminated"])) and not np.any(np.asarray(info["truncated"]))
    # The returned observation is a fresh first observation of the next episode.
    first_obs = {"Probe2-v0": {-1.0, 1.0}, "Probe5-v0": {0.0, 1.0}, "Probe7-v0": {0.0, 1.0}}
    assert set(np.unique(np.asarray(obs))) == first_obs.get(env_id, {0.0})
    np.testing.assert_array_equal(np.asarray(obs)[:, 0], jax.vmap(env.get_obs)(state)[:, 0])


# ------------------------------------------------------------------- dynamics


def test_probe1() -> None:
    obs, rew, term, _ = run(ENVS["Probe1-v0"], [0])
    np.testing.assert_array_equal(obs, [[0.0]])
    np.testing.assert_array_equal(rew, [1.0])
    np.testing.assert_array_equal(term, [True])
    obs, rew, term, _ = run_many(ENVS["Probe1-v0"], jnp.zeros((1,)), n=16)
    assert np.all(obs == 0.0) and np.all(rew == 1.0) and np.all(term)


def test_probe2() -> None:
    obs, rew, term, cue = run_many(ENVS["Probe2-v0"], jnp.zeros((1,)))
    assert set(np.unique(obs)) == {-1.0, 1.0}
    np.testing.assert_array_equal(rew, obs[:, :, 0])  # reward = obs
    np.testing.assert_array_equal(obs[:, 0, 0], 2.0 * cue - 1.0)
    assert np.all(term)
    assert 0.4 < np.mean(obs == 1.0) < 0.6


def test_probe3() -> None:
    obs, rew, term, _ = run(ENVS["Probe3-v0"], [0, 0])
    np.testing.assert_array_equal(obs, [[0.0], [1.0]])
    np.testing.assert_array_equal(rew, [0.0, 1.0])
    np.testing.assert_array_equal(term, [False, True])
    obs, rew, term, _ = run_many(ENVS["Probe3-v0"], jnp.zeros((2,)), n=16)
    assert np.all(obs[:, :, 0] == [0.0, 1.0]) and np.all(rew == [0.0, 1.0])
    assert np.all(term == [False, True])


@pytest.mark.parametrize(("action", "reward"), [(0, -1.0), (1, 1.0)])
def test_probe4(action: int, reward: float) -> None:
    obs, rew, term, _ = run(ENVS["Probe4-v0"], [action])
    np.testing.assert_array_equal(obs, [[0.0]])
    np.testing.assert_array_equal(rew, [reward])
    np.testing.assert_array_equal(term, [True])


@pytest.mark.parametrize(
    ("env", "action", "reward"),
    [
        (ProbeTrustRegion(), 0, 50.0),
        (ProbeTrustRegion(), 1, 52.0),
        (ProbeTrustRegionNoOffset(), 0, 0.0),
        (ProbeTrustRegionNoOffset(), 1, 2.0),
    ],
)
def test_trust_region_probe_pays_action_one(env, action: int, reward: float) -> None:
    obs, rew, term, _ = run(env, [action])
    np.testing.assert_array_equal(obs, [[0.0]])
    np.testing.assert_array_equal(rew, [reward])
    np.testing.assert_array_equal(term, [True])


def test_a_padded_blank_probe_observes_a_constant_beside_its_zero() -> None:
    env = ProbeTrustRegion(pad=1.0)
    obs, rew, term, _ = run(env, [1])
    np.testing.assert_array_equal(obs, [[0.0, 1.0]])
    np.testing.assert_array_equal(rew, [52.0])
    space = env.observation_space(env.default_params)
    assert space.shape == (2,) and space.contains(obs[0])
    assert ProbeTrustRegion.PADDABLE and not Probe5.PADDABLE
    assert ProbeTrustRegion().observation_space(None).shape == (1,)


def test_lambda_probe_pays_one_at_the_end_of_eight_steps() -> None:
    obs, rew, term, _ = run(ProbeLambda(), [0] * ProbeLambda.LENGTH)
    np.testing.assert_array_equal(obs, np.zeros((8, 1)))
    np.testing.assert_array_equal(rew, [0.0] * 7 + [1.0])
    np.testing.assert_array_equal(term, [False] * 7 + [True])


def test_lambda_time_limit_probe_pays_ten_on_the_step_its_limit_cuts() -> None:
    env = ProbeLambdaTimeLimit()
    params = env.default_params
    assert params.max_steps_in_episode == ProbeLambdaTimeLimit.LENGTH == 8
    _, state = env.reset(jax.random.key(0), params)
    seen = []  # two episodes through gymnax's step: the time limit and its auto-reset
    for key in jax.random.split(jax.random.key(1), 16):
        obs, state, reward, terminated, truncated, info = env.step(key, state, 0, params)
        np.testing.assert_array_equal(info["final_observation"], [0.0])
        seen.append((float(obs[0]), float(reward), bool(terminated), bool(truncated)))
    obs, rew, term, trunc = map(list, zip(*seen, strict=True))
    assert obs == [0.0] * 16 and term == [False] * 16
    assert rew == ([0.0] * 7 + [ProbeLambdaTimeLimit.REWARD]) * 2 and rew[7] == 10.0
    assert trunc == ([False] * 7 + [True]) * 2


def test_probe5() -> None:
    for action in (0, 1):
        obs, rew, term, cue = run_many(ENVS["Probe5-v0"], jnp.array([action]))
        assert set(np.unique(obs)) == {0.0, 1.0}
        np.testing.assert_array_equal(obs[:, 0, 0], cue)
        np.testing.assert_array_equal(rew[:, 0], np.where(obs[:, 0, 0] == action, 1.0, -1.0))
        assert np.all(term)
        assert 0.4 < np.mean(obs == 1.0) < 0.6
    # Matching policy: action = obs, always +1.
    _, _, _, cue = run_many(ENVS["Probe5-v0"], jnp.array([0]))
    _, rew, _, cue2 = run_many(ENVS["Probe5-v0"], jnp.asarray(cue)[:, None])
    np.testing.assert_array_equal(cue, cue2)
    assert np.all(rew == 1.0)


def test_probe6() -> None:
    parity = [0, 1, 0, 1, 0, 1]
    obs, rew, term, _ = run(ENVS["Probe6-v0"], parity)
    np.testing.assert_array_equal(obs[:, 0], [0, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(rew, [1.0] * 6)
    np.testing.assert_array_equal(term, [False] * 5 + [True])
    _, rew, _, _ = run(ENVS["Probe6-v0"], [1] * 6)
    np.testing.assert_array_equal(rew, [0, 1, 0, 1, 0, 1])
    _, rew, _, _ = run(ENVS["Probe6-v0"], [0] * 6)
    np.testing.assert_array_equal(rew, [1, 0, 1, 0, 1, 0])
    _, rew, _, _ = run(ENVS["Probe6-v0"], [1, 0, 1, 0, 1, 0])
    np.testing.assert_array_equal(rew, [0.0] * 6)
    # Random actions, vmapped: reward is exactly the parity match.
    acts = jax.random.bernoulli(jax.random.key(3), shape=(64, 6)).astype(jnp.int32)
    obs, rew, term, _ = run_many(ENVS["Probe6-v0"], acts, n=64)
    np.testing.assert_array_equal(rew, (np.asarray(acts) == np.arange(6) % 2).astype(np.float32))
    assert np.all(obs[:, :, 0] == np.arange(6))
    assert np.all(term == [False] * 5 + [True])


def test_probe6_episode_length_param() -> None:
    params = Probe6Params(episode_length=3)
    obs, rew, term, _ = run(ENVS["Probe6-v0"], [0, 1, 0], params=params)
    np.testing.assert_array_equal(obs[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(rew, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(term, [False, False, True])
    assert Probe6().default_params.episode_length == 6


def test_probe7() -> None:
    env = ENVS["Probe7-v0"]
    assert env.default_params.episode_length == 5
    for seed in range(8):
        for last in (0, 1):
            obs, rew, term, cue = run(env, [1, 0, 1, 0, last], seed=seed)
            np.testing.assert_array_equal(obs[:, 0], [cue, -1, -1, -1, -1])
            np.testing.assert_array_equal(rew, [0, 0, 0, 0, float(last == cue)])
            np.testing.assert_array_equal(term, [False] * 4 + [True])
    # Random actions, vmapped: both cues, reward only at the last step, only if correct.
    acts = jax.random.bernoulli(jax.random.key(5), shape=(N_KEYS, 5)).astype(jnp.int32)
    obs, rew, term, cue = run_many(env, acts)
    assert set(np.unique(cue)) == {0, 1}
    assert 0.4 < np.mean(cue) < 0.6
    np.testing.assert_array_equal(obs[:, 0, 0], cue)
    assert np.all(obs[:, 1:, 0] == -1.0)
    assert np.all(rew[:, :4] == 0.0)
    np.testing.assert_array_equal(rew[:, 4], (np.asarray(acts)[:, 4] == cue).astype(np.float32))
    assert np.all(term == [False] * 4 + [True])
    # A memoryless constant action gets 0.5 on average; replaying the cue gets 1.
    assert 0.4 < rew.sum(axis=1).mean() < 0.6
    replay = jnp.repeat(jnp.asarray(cue)[:, None], 5, axis=1)
    _, rew, _, _ = run_many(env, replay)
    assert np.all(rew.sum(axis=1) == 1.0)


def test_probe7_episode_length_param() -> None:
    params = Probe7Params(episode_length=3)
    obs, rew, term, cue = run(ENVS["Probe7-v0"], [0, 0, 0], params=params)
    np.testing.assert_array_equal(obs[:, 0], [cue, -1, -1])
    np.testing.assert_array_equal(rew, [0, 0, float(cue == 0)])
    np.testing.assert_array_equal(term, [False, False, True])


# ------------------------------------------------------------------ truncation


def test_truncation_before_termination() -> None:
    env = Probe6()
    params = Probe6Params(max_steps_in_episode=3)

    @jax.jit
    def three_steps(key: jax.Array) -> tuple[Any, ...]:
        obs, state = env.reset(key, params)
        outs = []
        for t in range(3):
            obs, state, rew, term, trunc, info = env.step(
                jax.random.fold_in(key, t), state, t % 2, params
            )
            outs.append((obs, rew, term, trunc, info["final_observation"]))
        return state, jax.tree.map(lambda *x: jnp.stack(x), *outs)

    state, (obs, rew, term, trunc, final_obs) = three_steps(jax.random.key(0))
    np.testing.assert_array_equal(trunc, [False, False, True])
    np.testing.assert_array_equal(term, [False, False, False])
    np.testing.assert_array_equal(rew, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(final_obs[:, 0], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(obs[:, 0], [1.0, 2.0, 0.0])  # auto-reset at step 3
    assert int(state.time) == 0


def test_default_params_type() -> None:
    assert type(Probe1().default_params) is EnvParams
    assert isinstance(Probe6().default_params, Probe6Params)
    assert isinstance(Probe7().default_params, Probe7Params)
