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

from purejaxppo.envs.rows import EnvStep, RowsEnv, env_keys
from purejaxppo.envs.suites.jaxmarl import JaxMARLEnv
from purejaxppo.metrics import EpisodeStats
from purejaxppo.types import EnvCarry

__all__ = ["agent_rows", "marl_info_keys"]


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
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(env_keys(key, num_envs), env_params)
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
        )(env_keys(key, num_envs), carry.env_state, per_env(env_action), env_params)
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
            info=info,
        )

    return RowsEnv(
        reset=reset,
        step=step,
        info_keys=info_keys,
        num_agents=num_agents,
        team_reward=env.team_reward,
    )
