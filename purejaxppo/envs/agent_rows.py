"""A JaxMARL env's A agents as rows of the batch (`RowsEnv`), as JaxMARL's `batchify`.

Row `n * A + a` is agent a of env n, so a rollout is a `Transition` `[T, N * A]` and
everything after it (GAE per row = per agent, the minibatch epochs, the PPO loss) is the
single-agent code unchanged (`purejaxppo.kinds.agents` says why, and what IPPO / MAPPO train).

Carry shapes: observations, policy state and `reset` per row `[N * A]`; the episode return
per env and agent `[N, A]`; the episode length per env `[N]`.

Episode statistics are per env: the team return (`JaxMARLEnv.team_reward` of the agents'
returns) of the episodes that ended is counted once per env, with each agent's own return
(`info/episode_return/<agent>`) and the env's outcome keys (SMAX: `info/won`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.envs.rows import EnvStep, RowsEnv
from purejaxppo.envs.suites.jaxmarl import JaxMARLEnv
from purejaxppo.metrics import EpisodeStats
from purejaxppo.types import EnvCarry

__all__ = [
    "agent_rows",
    "make_agents_chunk_runner",
    "make_agents_episode_recorder",
    "make_agents_episode_runner",
    "marl_info_keys",
]


def marl_info_keys(env: JaxMARLEnv) -> tuple[str, ...]:
    """The episode-statistics keys of a multi-agent run (metrics `info/<key>`):
    `episode_return/<agent>` per agent, then the env's outcome keys (SMAX: "won")."""
    return tuple(f"episode_return/{a}" for a in env.agents) + env.outcome_keys


def _rows(x: jax.Array) -> jax.Array:
    """`[N, A, ...]` -> `[N * A, ...]` (row n * A + a)."""
    return x.reshape((x.shape[0] * x.shape[1], *x.shape[2:]))


def agent_rows(env: JaxMARLEnv, env_params: Any) -> RowsEnv:
    """The `RowsEnv` of N copies of a JaxMARL env (module docstring)."""
    num_agents = env.num_agents
    info_keys = marl_info_keys(env)
    agent_keys = info_keys[:num_agents]

    def reset(key: jax.Array, num_envs: int, networks: Any) -> EnvCarry:
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(key, num_envs), env_params
        )
        rows = num_envs * num_agents
        return EnvCarry(
            env_state=env_state,
            obs=jax.tree.map(_rows, obs),
            episode_return=jnp.zeros((num_envs, num_agents), jnp.float32),
            episode_length=jnp.zeros((num_envs,), jnp.int32),
            policy_state=networks.initial_state(rows),
            reset=jnp.ones((rows,), bool),
        )

    def step(key: jax.Array, carry: EnvCarry, env_action: Any) -> EnvStep:
        num_envs = carry.episode_return.shape[0]

        def per_env(x):  # [N * A, ...] -> [N, A, ...]
            return x.reshape((num_envs, num_agents, *x.shape[1:]))

        obs, env_state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None)
        )(jax.random.split(key, num_envs), carry.env_state, per_env(env_action), env_params)
        done = jnp.logical_or(terminated, truncated)  # [N, A]
        env_done = jnp.any(done, axis=1)
        episode_return = carry.episode_return + reward  # [N, A]
        episode_length = carry.episode_length + 1
        agent_sums = jnp.sum(jnp.where(env_done[:, None], episode_return, 0.0), axis=0)
        info_sum = {key: agent_sums[i] for i, key in enumerate(agent_keys)}
        for key in env.outcome_keys:  # [N, A], the same for every agent: agent 0's
            info_sum[key] = jnp.sum(jnp.where(env_done, info[key][:, 0], 0.0))
        ended = EpisodeStats(
            return_sum=env.team_reward(agent_sums),
            length_sum=jnp.sum(jnp.where(env_done, episode_length, 0)).astype(jnp.float32),
            count=jnp.sum(env_done).astype(jnp.float32),
            info_sum=info_sum,
        )
        return EnvStep(
            obs=jax.tree.map(_rows, obs),
            env_state=env_state,
            reward=_rows(reward),
            terminated=_rows(terminated),
            truncated=_rows(truncated),
            final_obs=jax.tree.map(_rows, info["final_observation"]),
            reset=_rows(done),
            episode_return=jnp.where(env_done[:, None], 0.0, episode_return),
            episode_length=jnp.where(env_done, 0, episode_length),
            ended=ended,
        )

    return RowsEnv(reset=reset, step=step, info_keys=info_keys)


def make_agents_episode_runner(
    env: JaxMARLEnv,
    env_params: Any,
    act: Any,
    initial_state: Any,
    num_episodes: int,
    max_steps: int,
) -> Any:
    """Jitted `run(params, key, temperature) -> (team returns [E], lengths [E])`: E envs
    play one episode each, every agent acting from the shared policy on its row
    (`policy.make_act`'s act on `[E * A]` rows; temperature 0: greedy). The return is the
    team return (`JaxMARLEnv.team_reward` of the agents' undiscounted returns), as the
    training metric `episode_return`; steps after an env's episode ended are not counted.
    """
    num_agents = env.num_agents

    @jax.jit
    def run(params, key, temperature):
        reset_key, scan_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_episodes), env_params
        )
        no_reset = jnp.zeros((num_episodes * num_agents,), bool)

        def step(carry, step_key):
            obs, state, ret, length, active, policy_state = carry
            act_key, env_key = jax.random.split(step_key)
            policy_state, action, _ = act(
                params, policy_state, jax.tree.map(_rows, obs), no_reset, act_key, temperature
            )
            per_env = action.reshape((num_episodes, num_agents, *action.shape[1:]))
            obs, state, reward, terminated, truncated, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(env_key, num_episodes), state, per_env, env_params)
            ret = ret + jnp.where(active[:, None], reward.astype(jnp.float32), 0.0)
            length = length + active.astype(jnp.int32)
            ended = jnp.any(jnp.logical_or(terminated, truncated), axis=1)
            active = jnp.logical_and(active, ~ended)
            return (obs, state, ret, length, active, policy_state), None

        init = (
            obs,
            state,
            jnp.zeros((num_episodes, num_agents), jnp.float32),
            jnp.zeros(num_episodes, jnp.int32),
            jnp.ones(num_episodes, bool),
            initial_state(num_episodes * num_agents),
        )
        (_, _, ret, length, _, _), _ = jax.lax.scan(
            step, init, jax.random.split(scan_key, max_steps)
        )
        return env.team_reward(ret), length

    return run


def make_agents_episode_recorder(
    env: JaxMARLEnv, env_params: Any, act: Any, initial_state: Any, max_steps: int
) -> Any:
    """Jitted `record(params, key, temperature) -> (states, obs, actions, rewards,
    active)` of one env's episode, as `video.make_episode_recorder` records a
    single-agent one: every agent acting from the shared policy on its row, the state
    and observations `[A, ...]` each step's actions `[A]` were taken in, and the team
    reward (`JaxMARLEnv.team_reward`) of each step; `[max_steps]` leaves, `active`
    marking the steps before the episode ended."""
    num_agents = env.num_agents

    @jax.jit
    def record(params, key, temperature):
        reset_key, scan_key = jax.random.split(key)
        obs, state = env.reset(reset_key, env_params)
        no_reset = jnp.zeros((num_agents,), bool)

        def step(carry, step_key):
            obs, state, policy_state, active = carry
            act_key, env_key = jax.random.split(step_key)
            policy_state, action, _ = act(params, policy_state, obs, no_reset, act_key, temperature)
            next_obs, next_state, reward, terminated, truncated, _ = env.step(
                env_key, state, action, env_params
            )
            team = env.team_reward(reward.astype(jnp.float32))
            out = (state, obs, action, team, active)
            ended = jnp.any(jnp.logical_or(terminated, truncated))
            return (next_obs, next_state, policy_state, jnp.logical_and(active, ~ended)), out

        init = (obs, state, initial_state(num_agents), jnp.ones((), bool))
        _, outs = jax.lax.scan(step, init, jax.random.split(scan_key, max_steps))
        return outs

    return record


def make_agents_chunk_runner(
    env: JaxMARLEnv,
    env_params: Any,
    networks: Any,
    select_action: Any,
    info_keys: tuple[str, ...] = (),
) -> tuple[Any, Any]:
    """`datasets.make_chunk_runner`'s jitted `(start(key, E), chunk(params, carry, keys
    [C], temperature))` for a JaxMARL env: E envs, every agent acting from the shared
    policy on its row, with the keys `make_agents_episode_runner` uses (so the episodes
    are `evaluate`'s).

    `chunk`'s records `[C, E]` per env step, the agents on an axis after it: `obs`,
    `action`, `agent_reward` (each agent's), `log_prob`, `value`, `final_obs`
    `[C, E, A, ...]`; `reward` (the team reward, `JaxMARLEnv.team_reward`), `terminated`
    and `truncated` (the episode's end, JaxMARL's `__all__`), `active` `[C, E]`; `info`
    `[C, E, A]` per key of `info_keys`.

    Raises:
      ValueError: `info_keys` that the env's info dict lacks.
    """
    num_agents = env.num_agents
    _check_info_keys(env, env_params, info_keys)

    def start(key, num_envs):
        reset_key, scan_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), env_params
        )
        active = jnp.ones((num_envs,), bool)
        return (obs, state, active, networks.initial_state(num_envs * num_agents)), scan_key

    def chunk(params, carry, keys, temperature):
        def step(carry, step_key):
            obs, state, active, policy_state = carry
            num_envs = active.shape[0]

            def per_env(x):  # [E * A, ...] -> [E, A, ...]
                return x.reshape((num_envs, num_agents, *x.shape[1:]))

            act_key, env_key = jax.random.split(step_key)
            no_reset = jnp.zeros((num_envs * num_agents,), bool)
            policy_state, dist, value = networks.step(
                params, policy_state, jax.tree.map(_rows, obs), no_reset
            )
            action, _ = select_action(networks.action_spec, dist, value, act_key, temperature)
            next_obs, next_state, reward, terminated, truncated, info = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(env_key, num_envs), state, per_env(action), env_params)
            reward = reward.astype(jnp.float32)
            terminated, truncated = jnp.any(terminated, axis=1), jnp.any(truncated, axis=1)
            record = {
                "obs": obs,
                "action": per_env(action),
                "reward": env.team_reward(reward),
                "agent_reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "log_prob": per_env(dist.log_prob(action).astype(jnp.float32)),
                "value": per_env(value.astype(jnp.float32)),
                "final_obs": info["final_observation"],
                "active": active,
                "info": {key: info[key] for key in info_keys},
            }
            still = jnp.logical_and(active, ~jnp.logical_or(terminated, truncated))
            return (next_obs, next_state, still, policy_state), record

        return jax.lax.scan(step, carry, keys)

    return jax.jit(start, static_argnums=1), jax.jit(chunk)


def _check_info_keys(env: JaxMARLEnv, env_params: Any, info_keys: tuple[str, ...]) -> None:
    """Raises ValueError naming the `info_keys` that `env.step`'s info dict lacks (its
    keys from `jax.eval_shape`, every agent taking a sampled action)."""
    if not info_keys:
        return

    def info(key: jax.Array) -> dict[str, Any]:
        _, state = env.reset(key, env_params)
        action = env.action_space(env_params).sample(key)
        actions = jnp.broadcast_to(action, (env.num_agents, *jnp.shape(action)))
        return env.step(key, state, actions, env_params)[5]

    unknown = sorted(set(info_keys) - set(jax.eval_shape(info, jax.random.key(0))))
    if unknown:
        raise ValueError(f"collect: info keys {unknown} not in the env's info dict")
