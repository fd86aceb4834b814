"""SMAX through JaxMARL (`jaxmarl:HeuristicEnemySMAX`, scenario "3m"): action masks,
MAPPO's world state, win rate and episode ends, and a few MAPPO updates; Hanabi's legal
moves as the action mask.

One short rollout and one two-update run compile here (SMAX's step is heavy to compile:
about a minute each on the loaded 2-core CPU).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import purejaxppo as pjp
from purejaxppo.envs import make_env
from purejaxppo.envs.agent_rows import agent_rows
from purejaxppo.rollout import make_rollout

SMAX = "jaxmarl:HeuristicEnemySMAX"
KWARGS = {"scenario": "3m", "agent_ids": True}


def smax_config(**overrides):
    base = dict(
        env_name=SMAX,
        env_kwargs=KWARGS,
        multi_agent="mappo",
        num_envs=4,
        num_steps=32,
        total_timesteps=4 * 32 * 2,
        num_minibatches=2,
        update_epochs=1,
        activation="relu",
    )
    return pjp.PPOConfig(**{**base, **overrides})


def one_rollout(fns, env, env_params, num_steps):
    """(traj, stats) of one jitted `num_steps` rollout from the fresh init of key 0."""
    rollout = make_rollout(agent_rows(env, env_params), fns.networks, num_steps)

    @jax.jit
    def run(key):
        runner = fns.init(key)
        _, traj, stats = rollout(runner.train_state.params, runner.env, jax.random.key(1))
        return traj, stats

    return run(jax.random.key(0))


def test_spaces_masks_and_world_state():
    env, params = make_env(SMAX, KWARGS)
    assert env.num_agents == 3 and env.outcome_keys == ("won",)
    space = env.observation_space(params)
    # 3m: 75 features per ally + the agent-id one-hot; 8 actions (4 moves, stop, 3 targets)
    assert space.spaces["obs"].shape == (78,) and space.spaces["action_mask"].shape == (8,)
    assert "world_state" not in space.spaces
    mappo = env.with_world_state()
    # SMAX's world state (72) + the agent-id one-hot, as JaxMARL's SMAXWorldStateWrapper
    assert mappo.observation_space(params).spaces["world_state"].shape == (75,)
    obs, _ = mappo.reset(jax.random.key(0), params)
    assert obs["obs"].shape == (3, 78) and obs["world_state"].shape == (3, 75)
    assert obs["action_mask"].dtype == jnp.bool_ and obs["action_mask"].shape == (3, 8)
    world = np.asarray(obs["world_state"])
    np.testing.assert_array_equal(world[0, :72], world[2, :72])
    np.testing.assert_array_equal(world[:, 72:], np.eye(3))
    no_ids = pjp.make_env(SMAX, {"scenario": "3m"})[0].with_world_state()
    assert no_ids.reset(jax.random.key(0), params)[0]["world_state"].shape == (3, 72)
    # JaxMARL's SMAX MAPPO: ids in the critic's world state only, not in the observations
    jaxmarl_like = {"scenario": "3m", "agent_ids": False, "world_state_ids": True}
    ws_only = pjp.make_env(SMAX, jaxmarl_like)[0].with_world_state()
    ws_obs = ws_only.reset(jax.random.key(0), params)[0]
    assert ws_obs["obs"].shape == (3, 75) and ws_obs["world_state"].shape == (3, 75)
    np.testing.assert_array_equal(ws_obs["obs"], obs["obs"][:, :75])
    np.testing.assert_array_equal(ws_obs["world_state"], obs["world_state"])
    with pytest.raises(ValueError, match="world_state_ids=True, but the env has no world"):
        make_env("jaxmarl:MPE_simple_spread_v3", {"world_state_ids": True})
    with pytest.raises(ValueError, match=r"world_state_ids=1 must be true, false or absent"):
        make_env(SMAX, {"scenario": "3m", "world_state_ids": 1})


def test_unavailable_actions_are_never_sampled_and_wins_terminate():
    """A rollout of the untrained shared policy (uniform-ish logits): about half the
    mask entries are False (targets out of range), yet no sampled action is one of them;
    a won battle ends as `terminated`, with info/won counted per ended episode."""
    config = smax_config(num_steps=128, total_timesteps=4 * 128)
    fns = pjp.make_train_fns(config)
    env = pjp.make_env(SMAX, KWARGS)[0].with_world_state()
    traj, stats = one_rollout(fns, env, None, config.num_steps)
    mask = np.asarray(traj.obs["action_mask"])  # [T, N * A, 8]
    action = np.asarray(traj.action)  # [T, N * A]
    assert mask.shape == (128, 12, 8) and action.shape == (128, 12)
    assert 0.2 < 1.0 - mask.mean() < 0.8  # masks are far from all-True
    assert np.take_along_axis(mask, action[..., None], axis=-1).all()
    assert (action >= 5).any()  # attacks are sampled where available
    # episodes ended (SMAX's time limit is 100 steps); terminated and truncated disjoint
    terminated, truncated = np.asarray(traj.terminated), np.asarray(traj.truncated)
    assert stats.count >= 4 and not (terminated & truncated).any()
    won = float(stats.info_sum["won"])
    assert 0.0 <= won <= float(stats.count)
    # every won episode ended as a termination (a decided battle, not the time limit)
    assert won <= terminated[:, ::3].sum()
    # the allies share one team reward: the team return counts it once, not 3 times
    reward = np.asarray(traj.reward).reshape(128, 4, 3)
    np.testing.assert_array_equal(reward, np.repeat(reward[..., :1], 3, axis=-1))
    team = ended_episodes_sum(reward[..., 0], terminated[:, ::3] | truncated[:, ::3])
    assert team > 0.0  # damage dealt by the random allies
    np.testing.assert_allclose(float(stats.return_sum), team, rtol=1e-5)
    np.testing.assert_allclose(float(stats.info_sum["episode_return/ally_2"]), team, rtol=1e-5)


def ended_episodes_sum(reward: np.ndarray, done: np.ndarray) -> float:
    """Sum of `reward` `[T, N]` over the steps of episodes that ended within the rollout
    (a step counts when its env has a `done` `[T, N]` at that step or later)."""
    ended = np.flip(np.logical_or.accumulate(np.flip(done, axis=0), axis=0), axis=0)
    return float(np.sum(np.where(ended, reward, 0.0)))


@pytest.fixture(scope="module")
def trained():
    config = smax_config()
    return config, jax.jit(pjp.make_train(config))(jax.random.key(0))


def test_a_few_mappo_updates_run_with_win_rate_and_agent_returns(trained):
    config, out = trained
    metrics = {k: np.asarray(v) for k, v in out.metrics.items()}
    assert metrics["env_steps"][-1] == 4 * 32 * 2
    for name in ("loss", "approx_kl", "entropy", "value_mean"):
        assert np.isfinite(metrics[name]).all(), name
    assert ((metrics["info/won"] >= 0) & (metrics["info/won"] <= 1)).all()
    # one shared team reward: each ally's return is the team return (not a third of it)
    for i in range(3):
        np.testing.assert_array_equal(
            metrics[f"info/episode_return/ally_{i}"], metrics["episode_return"]
        )
    params = out.train_state.params["params"]
    assert params["actor_encoder"]["obs_mlp"]["dense_0"]["kernel"].shape == (78, 64)
    assert params["critic_encoder"]["world_state_mlp"]["dense_0"]["kernel"].shape == (75, 64)


def test_hanabi_legal_moves_are_the_action_mask_and_games_terminate():
    """Hanabi's legal moves (`get_legal_moves`) are the mask: the agent on turn has
    several, the other only the no-op; games end by terminations (no time limit)."""
    env, params = make_env("jaxmarl:hanabi")
    assert env.num_agents == 2 and env.max_steps is None
    space = env.observation_space(params)
    assert space.spaces["obs"].shape == (658,) and space.spaces["action_mask"].shape == (21,)
    obs, state = env.reset(jax.random.key(0), params)

    @jax.jit
    def play(state, obs):
        def body(carry, key):
            state, obs = carry
            action_key, step_key = jax.random.split(key)
            logits = jnp.where(obs["action_mask"], 0.0, -jnp.inf)
            action = jax.random.categorical(action_key, logits)
            obs, state, _, terminated, truncated, _ = env.step(step_key, state, action, params)
            return (state, obs), (obs["action_mask"].sum(-1), terminated, truncated)

        return jax.lax.scan(body, (state, obs), jax.random.split(jax.random.key(1), 200))

    _, (legal, terminated, truncated) = play(state, obs)
    legal = np.asarray(legal)  # [200, 2]
    np.testing.assert_array_equal(legal.min(axis=1), 1)  # the agent off turn: the no-op
    assert (legal.max(axis=1) > 1).all()
    assert np.asarray(terminated).any() and not np.asarray(truncated).any()


def test_shared_reward_table():
    """`shared_reward` per env: SMAX against a scripted enemy, Hanabi, Overcooked and
    Switch Riddle share one reward; MPE (collision penalties per agent) and SMAX with both
    teams as agents do not; the `shared_reward` kwarg overrides the table."""
    expected = {
        "jaxmarl:HeuristicEnemySMAX": True,
        "jaxmarl:hanabi": True,
        "jaxmarl:overcooked": True,
        "jaxmarl:switch_riddle": True,
        "jaxmarl:MPE_simple_spread_v3": False,
        "jaxmarl:SMAX": False,
    }
    for name, shared in expected.items():
        assert make_env(name)[0].shared_reward is shared, name
    assert make_env("jaxmarl:hanabi", {"shared_reward": False})[0].shared_reward is False
    with pytest.raises(ValueError, match=r"shared_reward='yes' must be true, false"):
        make_env("jaxmarl:hanabi", {"shared_reward": "yes"})


def test_hanabi_team_return_is_the_shared_reward_once():
    """Hanabi gives both players the same reward (the change in the fireworks score), so
    the team return of an episode is that reward summed over the episode, the game's
    score, once: not twice as a sum over the 2 agents would count it. With 60 life tokens
    the random (masked) policy never bombs out (a bomb-out returns the score as a
    negative reward, an episode sum of 0); games end when the deck runs out, with
    positive scores."""
    config = pjp.PPOConfig(
        env_name="jaxmarl:hanabi",
        env_kwargs={"max_life_tokens": 60},
        multi_agent="ippo",
        num_envs=4,
        num_steps=256,
        total_timesteps=4 * 256,
        hidden_sizes=(32,),
    )
    fns = pjp.make_train_fns(config)
    env, params = make_env(config.env_name, config.env_kwargs)
    assert env.shared_reward
    traj, stats = one_rollout(fns, env, params, config.num_steps)
    reward = np.asarray(traj.reward).reshape(256, 4, 2)  # [T, N, A]
    np.testing.assert_array_equal(reward[..., 0], reward[..., 1])  # one shared reward
    done = np.asarray(traj.terminated).reshape(256, 4, 2)[..., 0]
    score = ended_episodes_sum(reward[..., 0], done)
    assert float(stats.count) == done.sum() >= 4  # every env finished a game
    assert score > 0.0
    np.testing.assert_allclose(float(stats.return_sum), score, rtol=1e-6)
    for agent in env.agents:  # each player's own return is the same score
        np.testing.assert_allclose(float(stats.info_sum[f"episode_return/{agent}"]), score)
