"""Suite adapters (`purejaxppo.envs.suites`): each adapter's terminated / truncated /
final_observation / reward against stepping the suite directly, on scripted episodes that
end by termination and by time limit; spaces and dtypes; bad ids and kwargs; a short
learning run on XLand-MiniGrid Empty-6x6 and one tiny `make_train` run on the suites that
compile within a minute on 2 CPU cores.

Measured on 2 shared CPU cores (jax 0.10.2): a tiny `make_train` (2 envs x 8 steps, one
update) compiles in ~31 s (navix), ~35 s (xminigrid), ~51 s (jumanji Snake), ~80 s (brax
inverted_pendulum, spring backend), ~117 s (playground CartpoleBalance); Craftax-Classic's
single jitted step alone takes ~40 s. Only navix and xminigrid get a `make_train` run
here; the others have their adapter checks (one jitted scan each).
"""

from __future__ import annotations

import brax  # noqa: F401  (CI installs every suite: a missing one must fail, not skip)
import craftax  # noqa: F401
import jax
import jax.numpy as jnp
import jumanji  # noqa: F401
import mujoco_playground  # noqa: F401
import navix  # noqa: F401
import numpy as np
import pytest
import xminigrid  # noqa: F401
from gymnax.environments import spaces

import purejaxppo as pjp
from purejaxppo.config import PPOConfig
from purejaxppo.envs.suites._common import raw_key


def run_against_suite(env, params, reference, actions, num_envs=1, seed=0):
    """Scans `actions` `[T, N, ...]` through `env.step` (vmapped over N envs) and, from the
    same pre-step states, through `reference(key, state, action) -> (obs, reward,
    terminated, truncated)`, the suite stepped directly. Returns both (numpy), plus the
    observations after the step and the reset observation each step would return."""

    def one(key, state, action):
        step_key, reset_key = jax.random.split(raw_key(key))
        ref = reference(step_key, state, action)
        obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)
        reset_obs, _ = env.reset_env(reset_key, params)
        return (
            state,
            (obs, reward, terminated, truncated, info["final_observation"], reset_obs),
            ref,
        )

    def body(state, inputs):
        key, action = inputs
        keys = jax.random.split(key, num_envs)
        state, ours, ref = jax.vmap(one)(keys, state, action)
        return state, (ours, ref)

    @jax.jit
    def run(key):
        reset_key, scan_key = jax.random.split(key)
        _, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), params
        )
        keys = jax.random.split(scan_key, actions.shape[0])
        return jax.lax.scan(body, state, (keys, actions))[1]

    ours, ref = jax.tree.map(np.asarray, run(jax.random.key(seed)))
    return ours, ref


def check_against_suite(ours, ref):
    """Adapter outputs equal the suite's; after an ended step the obs is the reset's."""
    obs, reward, terminated, truncated, final_obs, reset_obs = ours
    ref_obs, ref_reward, ref_terminated, ref_truncated = ref
    np.testing.assert_array_equal(terminated, ref_terminated)
    np.testing.assert_array_equal(truncated, ref_truncated)
    np.testing.assert_allclose(reward, ref_reward, rtol=1e-6, atol=1e-6)
    assert terminated.dtype == truncated.dtype == np.bool_ and reward.dtype == np.float32
    assert not np.any(terminated & truncated)
    done = terminated | truncated
    for final, ref_leaf, leaf, reset_leaf in zip(
        jax.tree.leaves(final_obs),
        jax.tree.leaves(ref_obs),
        jax.tree.leaves(obs),
        jax.tree.leaves(reset_obs),
        strict=True,
    ):
        np.testing.assert_allclose(final, ref_leaf, rtol=1e-5, atol=1e-5)
        where = done.reshape(done.shape + (1,) * (leaf.ndim - done.ndim))
        np.testing.assert_allclose(
            leaf, np.where(where, reset_leaf, ref_leaf), rtol=1e-5, atol=1e-5
        )
    return terminated, truncated


# ----------------------------------------------------------------------------- brax
def episode_reference(env, episode_length):
    """The inner Brax / Playground env stepped directly: its own `done` is a termination;
    reaching `episode_length` steps without it is a truncation."""

    def reference(key, state, action):
        inner = env.wrapped.env.step(state, action)
        steps = state.info["steps"] + 1
        terminated = inner.done.astype(bool)
        truncated = (steps >= episode_length) & ~terminated
        return inner.obs, inner.reward, terminated, truncated

    return reference


def test_brax_inverted_pendulum_matches_brax():
    env, params = pjp.make_env("brax:inverted_pendulum", {"episode_length": 10})
    assert env.observation_space(params).shape == (4,)
    space = env.action_space(params)
    assert isinstance(space, spaces.Box) and space.shape == (1,)
    assert float(np.min(space.low)) == -1.0 and float(np.max(space.high)) == 1.0
    num_envs, steps = 8, 40
    actions = jax.random.uniform(jax.random.key(1), (steps, num_envs, 1), minval=-1, maxval=1)
    ours, ref = run_against_suite(env, params, episode_reference(env, 10), actions, num_envs)
    terminated, truncated = check_against_suite(ours, ref)
    assert terminated.any() and truncated.any()  # both endings occur in this script
    assert ours[0].dtype == np.float32


def test_playground_cartpole_balance_matches_playground():
    env, params = pjp.make_env("playground:CartpoleBalance", {"episode_length": 5})
    assert env.observation_space(params).shape == (5,)
    assert env.action_space(params).shape == (1,)
    actions = jnp.zeros((12, 2, 1))
    ours, ref = run_against_suite(env, params, episode_reference(env, 5), actions, 2)
    terminated, truncated = check_against_suite(ours, ref)
    # Balance never terminates (only on NaNs): every 5th step is a truncation.
    assert not terminated.any()
    np.testing.assert_array_equal(truncated[:, 0], [(t + 1) % 5 == 0 for t in range(12)])


# ----------------------------------------------------------------------------- jumanji
def test_jumanji_snake_matches_jumanji_and_spaces():
    env, params = pjp.make_env("jumanji:Snake-v1", {"num_rows": 6, "num_cols": 6, "time_limit": 4})
    space = env.observation_space(params)
    assert isinstance(space, spaces.Dict)
    assert set(space.spaces) == {"grid", "step_count", "action_mask"}
    assert space.spaces["action_mask"].dtype == jnp.bool_
    assert space.spaces["action_mask"].shape == (4,)
    assert env.action_space(params).n == 4

    def reference(key, state, action):
        _, timestep = env.env.step(state[0], action)
        last = timestep.step_type == 2  # dm_env LAST
        obs = timestep.observation._asdict()
        return obs, timestep.reward, last & (timestep.discount == 0), last & (timestep.discount > 0)

    # up (0) runs into the wall of a 6x6 board (termination) or reaches time_limit 4,
    # which Snake-v1 ends with `termination` (discount 0): terminated, never truncated.
    actions = jnp.zeros((12, 4), jnp.int32)
    ours, ref = run_against_suite(env, params, reference, actions, 4)
    terminated, truncated = check_against_suite(ours, ref)
    assert terminated.any() and not truncated.any()
    obs = ours[0]
    assert obs["action_mask"].dtype == np.bool_ and obs["grid"].dtype == np.float32

    env, params = pjp.make_env("jumanji:Snake-v1", {"obs_keys": ["grid", "action_mask"]})
    assert set(env.observation_space(params).spaces) == {"grid", "action_mask"}
    assert set(env.reset(jax.random.key(0), params)[0]) == {"grid", "action_mask"}


# ----------------------------------------------------------------------------- craftax
def test_craftax_classic_time_limit_is_truncation():
    env, params = pjp.make_env("craftax:Craftax-Classic-Symbolic-v1", {"max_timesteps": 3})
    assert env.observation_space(params).shape == (1345,)
    assert env.observation_space(params).dtype == jnp.float32
    assert env.action_space(params).n == 17

    def reference(key, state, action):
        obs, new_state, reward, done, _ = env.env.step_env(key, state, action, params)
        dead = new_state.player_health <= 0
        return obs, reward, done & dead, done & ~dead

    actions = jnp.zeros((7, 1), jnp.int32)  # noop: no death within 3 steps
    ours, ref = run_against_suite(env, params, reference, actions)
    terminated, truncated = check_against_suite(ours, ref)
    np.testing.assert_array_equal(truncated[:, 0], [t % 3 == 2 for t in range(7)])
    assert not terminated.any()


# ----------------------------------------------------------------------------- navix
def test_navix_empty_matches_navix():
    env, params = pjp.make_env("navix:Navix-Empty-5x5-v0", {"max_steps": 6})
    space = env.observation_space(params)
    assert space.shape == (5, 5, 3) and space.dtype == jnp.uint8
    assert env.action_space(params).n == 7

    def reference(key, state, action):
        timestep = env.env._step(state, action)
        return (
            timestep.observation,
            timestep.reward,
            timestep.step_type == 2,  # navix StepType.TERMINATION
            timestep.step_type == 1,  # navix StepType.TRUNCATION
        )

    # forward, forward, turn, forward, forward reaches the goal (terminated, reward 1);
    # then 6 turns reach max_steps (truncated).
    script = [2, 2, 1, 2, 2] + [0] * 6
    ours, ref = run_against_suite(env, params, reference, jnp.asarray(script)[:, None])
    terminated, truncated = check_against_suite(ours, ref)
    np.testing.assert_array_equal(terminated[:, 0], [t == 4 for t in range(11)])
    np.testing.assert_array_equal(truncated[:, 0], [t == 10 for t in range(11)])
    assert ours[1][4, 0] == 1.0
    assert ours[0].dtype == np.uint8


# ----------------------------------------------------------------------------- xminigrid
def test_xminigrid_empty_matches_xminigrid():
    env, params = pjp.make_env("xminigrid:MiniGrid-Empty-6x6", {"max_steps": 8})
    space = env.observation_space(params)
    assert space.shape == (7, 7, 2) and space.dtype == jnp.uint8
    assert env.action_space(params).n == 6
    assert params.max_steps == 8

    def reference(key, state, action):
        timestep = env.env.step(params, state, action)
        goal = timestep.discount == 0
        return timestep.observation, timestep.reward, goal, (timestep.state.step_num == 8) & ~goal

    # 3 forward, turn right, 3 forward: goal after 7 steps (reward 1 - 0.9 * 7 / 8);
    # then 8 forwards into the wall reach max_steps.
    script = [0, 0, 0, 1, 0, 0, 0] + [2] * 8
    ours, ref = run_against_suite(env, params, reference, jnp.asarray(script)[:, None])
    terminated, truncated = check_against_suite(ours, ref)
    np.testing.assert_array_equal(terminated[:, 0], [t == 6 for t in range(15)])
    np.testing.assert_array_equal(truncated[:, 0], [t == 14 for t in range(15)])
    np.testing.assert_allclose(ours[1][6, 0], 1 - 0.9 * 7 / 8, rtol=1e-6)
    assert ours[0].dtype == np.uint8


# ----------------------------------------------------------------------------- bad input
def test_unknown_prefix_lists_known_prefixes():
    with pytest.raises(ValueError, match="unknown suite prefix 'bax'.*brax:.*xminigrid:"):
        pjp.make_env("bax:inverted_pendulum")


@pytest.mark.parametrize(
    ("env_id", "close"),
    [
        ("brax:inverted_pendulm", "inverted_pendulum"),
        ("jumanji:Snake-v2", "Snake-v1"),
        ("navix:Navix-Empty-5x5", "Navix-Empty-5x5-v0"),
        ("xminigrid:MiniGrid-Empty-6x7", "MiniGrid-Empty-6x6"),
        ("craftax:Craftax-Classic-Symbolic", "Craftax-Classic-Symbolic-v1"),
        ("playground:CartpoleBalanc", "CartpoleBalance"),
    ],
)
def test_unknown_name_lists_close_matches(env_id, close):
    with pytest.raises(ValueError, match=f"Close matches: .*{close}"):
        pjp.make_env(env_id)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "bad"),
    [
        ("brax:inverted_pendulum", {"episode_lenght": 5}, "episode_lenght"),
        ("brax:inverted_pendulum", {"episode_length": 0}, "episode_length"),
        ("playground:CartpoleBalance", {"not_a_key": 1}, "not_a_key"),
        ("jumanji:Snake-v1", {"rows": 5}, "rows"),
        ("jumanji:Snake-v1", {"obs_keys": ["pixels"]}, "obs_keys"),
        ("craftax:Craftax-Classic-Symbolic-v1", {"max_steps": 5}, "max_steps"),
        ("navix:Navix-Empty-5x5-v0", {"max_stepz": 5}, "max_stepz"),
        ("xminigrid:MiniGrid-Empty-6x6", {"max_stepz": 5}, "max_stepz"),
    ],
)
def test_bad_kwarg_names_id_and_kwarg(env_id, kwargs, bad):
    with pytest.raises(ValueError, match=f"(?s){env_id.split(':')[1]}.*{bad}"):
        pjp.make_env(env_id, kwargs)


# ----------------------------------------------------------------------------- training
def test_navix_make_train_runs_one_update():
    config = PPOConfig(
        env_name="navix:Navix-Empty-5x5-v0",
        num_envs=2,
        num_steps=8,
        total_timesteps=16,
        num_minibatches=1,
        update_epochs=1,
        hidden_sizes=(16,),
    )
    out = jax.jit(pjp.make_train(config))(jax.random.key(0))
    assert out.metrics["v_loss"].shape == (1,) and np.isfinite(out.metrics["v_loss"]).all()
    # evaluate a suite env's policy: its episode limit comes from the adapter (SuiteParams
    # has no max_steps_in_episode; this raised AttributeError before)
    policy = pjp.Policy.from_train_output(out, config)
    result = pjp.evaluate(policy, num_episodes=2, key=jax.random.key(1))
    assert result.lengths.shape == (2,) and (result.lengths <= 100).all()


@pytest.mark.parametrize(
    ("env_id", "kwargs", "limit"),
    [
        ("brax:inverted_pendulum", {"episode_length": 300}, 300),
        ("navix:Navix-Empty-5x5-v0", None, 100),
        ("jumanji:Snake-v1", None, 4000),
        ("craftax:Craftax-Classic-Symbolic-v1", None, 10000),
        ("xminigrid:MiniGrid-Empty-5x5", None, 100),
        ("envpool:InvertedPendulum-v4", None, 1000),
        ("CartPole-v1", None, 500),
    ],
)
def test_episode_limit_of_each_suite(env_id, kwargs, limit):
    """evaluate / video / collect scan `episode_limit(env, params)` steps by default."""
    from purejaxppo.envs import make_env
    from purejaxppo.envs.spaces import episode_limit

    assert episode_limit(*make_env(env_id, kwargs)) == limit


def test_xminigrid_empty_learns():
    """PPO reaches >= 0.9 of the best return on Empty-6x6 (1 - 0.9 * 7 / 144 = 0.956 for
    the 7-step path, max_steps 144); ~45 s on 2 CPU cores, compile included."""
    config = PPOConfig.from_yaml("configs/xminigrid_empty.yaml", total_timesteps=49_152)
    out = jax.block_until_ready(jax.jit(pjp.make_train(config))(jax.random.key(0)))
    returns = np.asarray(out.metrics["episode_return"])
    lengths = np.asarray(out.metrics["episode_length"])
    best = 1 - 0.9 * 7 / 144
    # Measured (2 shared CPU cores, 2026-11-25; keys 0 .. 3): last 3 updates 0.956 / 0.950 /
    # 0.956 / 0.956 against 0.861 (margin 0.089, spread 0.006); lengths 7.0 / 8.0 / 7.0 / 7.0.
    assert returns[-3:].mean() >= 0.9 * best, returns
    assert lengths[-3:].mean() <= 12, lengths  # a random walk needs ~100 steps
