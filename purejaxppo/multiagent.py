"""Multi-agent PPO with one shared policy: IPPO and MAPPO over JaxMARL envs.

IPPO (de Witt et al. 2020, "Is Independent Learning All You Need in the StarCraft
Multi-Agent Challenge?", arXiv:2011.09533) and MAPPO (Yu et al. 2022, "The Surprising
Effectiveness of PPO in Cooperative Multi-Agent Games", arXiv:2103.01955), with parameter
sharing as in JaxMARL's baselines (Rutherford et al. 2024, arXiv:2311.10090).

The A agents of each of the N envs are extra rows of the batch: row `n * A + a` is agent
a of env n, so a rollout is a `Transition` `[T, N * A]` and everything after it (GAE per
row = per agent, the minibatch epochs, the PPO loss) is the single-agent code unchanged.
The gradient of the shared parameters is thus the gradient on the stacked batch.

- `multi_agent: ippo`: actor and critic see the agent's own observation.
- `multi_agent: mappo`: the actor sees the agent's observation, the critic the env's
  world state (`JaxMARLEnv.with_world_state`): the built-in network's separate towers
  (`make_networks(..., tower_inputs=...)`), each an MLP of `hidden_sizes`, with its own
  GRU / LSTM core under `recurrent` (JaxMARL's `mappo_rnn_*` baselines: a GRU per tower).

Recurrent policies (`recurrent: gru | lstm`, IPPO or MAPPO) carry one state per row
(agent of an env), restarted where that agent's episode ended (`reset` per row); the
update's minibatches split the rows, keeping each row's sequence whole.

Episode statistics are per env: `episode_return` is the team return, the team reward
(`JaxMARLEnv.team_reward`) summed over the episode: the one reward the agents share where
they share it (SMAX against a scripted enemy, Hanabi, Overcooked: counted once, not once
per agent), else the sum over agents of their rewards (MPE). Either way it is the return
JaxMARL's baselines log and plot (their MPE returns are the sum over agents, their SMAX
returns the shared reward once), so the two compare directly.
`info/episode_return/<agent>` is each agent's own return over the same episodes (each
equal to `episode_return` where the reward is shared, else summing to it), and envs with
an episode outcome add it (SMAX: `info/won`, the fraction of the ended episodes won).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.config import PPOConfig
from purejaxppo.envs.suites.jaxmarl import JaxMARLEnv, is_multi_agent_env
from purejaxppo.metrics import EpisodeStats
from purejaxppo.networks import Networks, make_networks, to_env_action
from purejaxppo.types import EnvCarry, Params, Transition

__all__ = [
    "MULTI_AGENT",
    "configure_env",
    "marl_info_keys",
    "make_marl_networks",
    "make_marl_rollout",
    "reset_agents",
]

#: Values of `PPOConfig.multi_agent` (None: single-agent PPO).
MULTI_AGENT = ("ippo", "mappo")


def configure_env(config: PPOConfig, env: Any, num_shards: int = 1) -> Any:
    """The env a multi-agent run trains (with a world state under MAPPO), after checks.

    Idempotent; a single-agent config with a single-agent env returns `env` unchanged.

    Raises:
      ValueError: `multi_agent` set for a single-agent env, a JaxMARL env without
        `multi_agent`, MAPPO on an env without a world state, or settings multi-agent
        runs do not support (normalize_rewards, info_metrics, action_histogram,
        data-parallel), or `share_encoder: true` under MAPPO (its towers see different
        inputs).
    """
    multi = is_multi_agent_env(env)
    if config.multi_agent is None:
        if multi:
            raise ValueError(
                f"env_name={config.env_name!r} has {env.num_agents} agents: set "
                f"multi_agent to one of {MULTI_AGENT}"
            )
        return env
    if not multi:
        raise ValueError(
            f"multi_agent={config.multi_agent!r}: env_name={config.env_name!r} is a "
            "single-agent env; multi-agent PPO needs a JaxMARL env (jaxmarl:<id>)"
        )
    unsupported = {
        "share_encoder: true (its actor and critic see different inputs)": (
            config.multi_agent == "mappo" and config.share_encoder is True
        ),
        "normalize_rewards": config.normalize_rewards,
        "info_metrics": bool(config.info_metrics),
        "action_histogram": config.action_histogram,
        "data-parallel devices": num_shards != 1,
        "evaluation (eval_freq, eval_splits)": config.eval_freq > 0 or bool(config.eval_splits),
        "video_freq / collect_freq": config.video_freq > 0 or config.collect_freq > 0,
    }
    for name, used in unsupported.items():
        if used:
            raise ValueError(
                f"multi_agent={config.multi_agent!r}: {name} is not supported for "
                "multi-agent runs yet"
            )
    if config.multi_agent == "mappo" and not env.world_state:
        return env.with_world_state()
    return env


def make_marl_networks(config: PPOConfig, env: JaxMARLEnv, env_params: Any = None) -> Networks:
    """The shared policy: `make_networks` on the agent's observation (IPPO), or for MAPPO
    its separate towers with the actor on `obs["obs"]` and a centralised critic on
    `obs["world_state"]`.

    Shapes (MAPPO): actor input `[B, D]`, critic input `[B, W]`, outputs `[B, n]` logits
    (Box: Gaussian means `[B, A']`) and values `[B]`, B = rows (agents x envs); with a
    recurrent core the state is `[B, 2 S]` (actor's, then critic's).
    """
    if config.multi_agent != "mappo":
        return make_networks(config, env, env_params)
    return make_networks(config, env, env_params, tower_inputs=(("obs",), ("world_state",)))


def marl_info_keys(env: JaxMARLEnv) -> tuple[str, ...]:
    """The episode-statistics keys of a multi-agent run (metrics `info/<key>`):
    `episode_return/<agent>` per agent, then the env's outcome keys (SMAX: "won")."""
    return tuple(f"episode_return/{a}" for a in env.agents) + env.outcome_keys


def _rows(x: jax.Array) -> jax.Array:
    """`[N, A, ...]` -> `[N * A, ...]` (row n * A + a)."""
    return x.reshape((x.shape[0] * x.shape[1], *x.shape[2:]))


def reset_agents(
    env: JaxMARLEnv, env_params: Any, key: jax.Array, num_envs: int, networks: Networks
) -> EnvCarry:
    """Resets N envs: observations and policy state as `[N * A]` rows, the episode
    return per env and agent `[N, A]`, the episode length per env `[N]`, `reset` per row
    `[N * A]`."""
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(key, num_envs), env_params
    )
    rows = num_envs * env.num_agents
    return EnvCarry(
        env_state=env_state,
        obs=jax.tree.map(_rows, obs),
        episode_return=jnp.zeros((num_envs, env.num_agents), jnp.float32),
        episode_length=jnp.zeros((num_envs,), jnp.int32),
        policy_state=networks.initial_state(rows),
        reset=jnp.ones((rows,), bool),
    )


def make_marl_env_step(
    env: JaxMARLEnv, env_params: Any, networks: Networks
) -> Callable[[Params, EnvCarry, jax.Array], tuple[EnvCarry, Transition, EpisodeStats]]:
    """`env_step(params, carry, key) -> (carry, transition [N * A], ended)`: every agent
    acts from the shared policy, the N envs step, and the team return
    (`JaxMARLEnv.team_reward` of the agents' returns) of the episodes that ended is counted
    once per env, with each agent's own return and
    the env's outcome keys (`marl_info_keys`)."""
    num_agents = env.num_agents
    agent_keys = marl_info_keys(env)[:num_agents]

    def env_step(params, carry, key):
        action_key, env_key = jax.random.split(key)
        policy_state, dist, value = networks.step(
            params, carry.policy_state, carry.obs, carry.reset
        )
        action, log_prob = dist.sample_and_log_prob(seed=action_key)
        num_envs = carry.episode_return.shape[0]

        def per_env(x):  # [N * A, ...] -> [N, A, ...]
            return x.reshape((num_envs, num_agents, *x.shape[1:]))

        obs, env_state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None)
        )(
            jax.random.split(env_key, num_envs),
            carry.env_state,
            per_env(to_env_action(networks.action_spec, action)),
            env_params,
        )
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
        transition = Transition(
            obs=carry.obs,
            action=action,
            log_prob=log_prob,
            value=value,
            reward=_rows(reward),
            terminated=_rows(terminated),
            truncated=_rows(truncated),
            final_obs=jax.tree.map(_rows, info["final_observation"]),
            policy_state=carry.policy_state,
            reset=carry.reset,
        )
        new_carry = carry.replace(
            env_state=env_state,
            obs=jax.tree.map(_rows, obs),
            episode_return=jnp.where(env_done[:, None], 0.0, episode_return),
            episode_length=jnp.where(env_done, 0, episode_length),
            policy_state=policy_state,
            reset=_rows(done),
        )
        return new_carry, transition, ended

    return env_step


def make_marl_rollout(
    env: JaxMARLEnv, env_params: Any, networks: Networks, num_steps: int
) -> Callable[[Params, EnvCarry, jax.Array], tuple[EnvCarry, Transition, EpisodeStats]]:
    """`rollout(params, carry, key) -> (carry, transitions [T, N * A], stats)`, a
    `lax.scan` of `make_marl_env_step` over T = num_steps (stats summed in the scan)."""
    env_step = make_marl_env_step(env, env_params, networks)
    info_keys = marl_info_keys(env)

    def rollout(params, carry, key):
        def body(state, step_key):
            env_carry, stats = state
            env_carry, transition, ended = env_step(params, env_carry, step_key)
            return (env_carry, jax.tree.map(jnp.add, stats, ended)), transition

        (carry, stats), transitions = jax.lax.scan(
            body, (carry, EpisodeStats.zeros(info_keys)), jax.random.split(key, num_steps)
        )
        return carry, transitions, stats

    return rollout
