"""The one episode loop (`acting.episodes`): its key scheme, pinned by hand-stepped envs."""

import jax
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.acting.video import record_episode
from purejaxppo.envs.rows import env_keys


@pytest.fixture(scope="module")
def cartpole() -> pjp.Policy:
    config = pjp.PPOConfig(env_name="CartPole-v1", hidden_sizes=(16,))
    env, env_params = pjp.make_env("CartPole-v1")
    networks = pjp.make_networks(config, env, env_params)
    return pjp.Policy(networks.init(jax.random.key(3)), config, env, env_params)


def test_env_keys_split_one_key_and_keep_the_envs_own():
    key = jax.random.key(0)
    split = jax.random.split(key, 3)
    assert (jax.random.key_data(env_keys(key, 3)) == jax.random.key_data(split)).all()
    assert env_keys(split, 3) is split  # [N] keys: the envs' own
    with pytest.raises(ValueError, match="3 keys for num_envs=2"):
        env_keys(split, 2)


def test_a_recorded_episode_is_the_env_stepped_with_the_keys_as_they_are(cartpole):
    """One env takes its reset and step keys unsplit: (reset, scan) = split(key), and
    each step key of split(scan, max_steps) splits into (action key, env key). Another
    key scheme starts elsewhere: CartPole's reset draws each state uniformly in
    [-0.05, 0.05]."""
    key = jax.random.key(5)
    episode = record_episode(cartpole, key, greedy=False, max_steps=30)
    env, env_params = cartpole.env, cartpole.env_params
    reset_key, scan_key = jax.random.split(key)
    obs, state = env.reset(reset_key, env_params)
    rewards = []
    for t, step_key in enumerate(jax.random.split(scan_key, 30)[: episode.length]):
        # eager steps against the jitted scan: equal up to float32 rounding (1e-7)
        np.testing.assert_allclose(episode.obs[t], np.asarray(obs), rtol=1e-5, atol=1e-6)
        _, env_key = jax.random.split(step_key)
        obs, state, reward, terminated, truncated, _ = env.step(
            env_key, state, episode.actions[t], env_params
        )
        rewards.append(float(reward))
    np.testing.assert_array_equal(episode.rewards, np.asarray(rewards, np.float32))
    # it ended where the env said so, or ran the whole scan (30 steps)
    assert bool(terminated or truncated) or episode.length == 30


def test_an_evaluation_stops_when_its_last_episode_ends_with_the_scans_returns(cartpole):
    """`make_play(..., until_ended=True)` (the evaluation's loop) steps the envs until the
    last of their episodes ends: as many policy steps as the longest episode, where the
    scan steps all of `max_steps`, and the same returns and lengths to the bit."""
    from purejaxppo.acting.episodes import make_play
    from purejaxppo.kinds import resolve_acting

    steps = {"count": 0}

    def count(_):
        steps["count"] += 1

    networks = cartpole.networks

    def counted_step(params, state, obs, reset):
        jax.debug.callback(count, reset)
        return networks.step(params, state, obs, reset)

    counted = networks._replace(step=counted_step)
    setup = resolve_acting("eval", cartpole.env, cartpole.env_params, counted)
    key, max_steps = jax.random.key(7), 300  # a random policy's CartPole: ~10-60 steps
    played = {}
    for until_ended in (False, True):
        start, play = make_play(
            setup.rows, counted, setup.episodes, lambda s: None, until_ended=until_ended
        )

        @jax.jit
        def run(params, key, start=start, play=play):
            carry, scan_key = start(key, 6)
            return play(params, carry, jax.random.split(scan_key, max_steps), 1.0)[0]

        steps["count"] = 0
        carry = jax.block_until_ready(run(cartpole.get_params(), key))
        played[until_ended] = (np.asarray(carry.returns), np.asarray(carry.lengths), steps["count"])
    (scan_returns, scan_lengths, scan_steps), (returns, lengths, loop_steps) = (
        played[False],
        played[True],
    )
    assert scan_steps == max_steps
    assert 0 < lengths.max() < max_steps and not np.asarray(carry.active).any()
    assert loop_steps == lengths.max()
    np.testing.assert_array_equal(returns, scan_returns)
    np.testing.assert_array_equal(lengths, scan_lengths)
