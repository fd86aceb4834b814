"""One environment step and the `num_steps` rollout over N vmapped environments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.envs.resets import make_batched_step
from purejaxppo.metrics import EpisodeStats
from purejaxppo.networks import Networks, to_env_action
from purejaxppo.types import EnvCarry, Params, Transition


def reset_envs(
    env: Any, env_params: Any, key: jax.Array, num_envs: int, networks: Networks
) -> EnvCarry:
    """Resets N environments (one key each), zeroes the episode counters and starts the
    policy state at `networks.initial_state(N)`."""
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(key, num_envs), env_params
    )
    return EnvCarry(
        env_state=env_state,
        obs=obs,
        episode_return=jnp.zeros((num_envs,), jnp.float32),
        episode_length=jnp.zeros((num_envs,), jnp.int32),
        policy_state=networks.initial_state(num_envs),
        reset=jnp.ones((num_envs,), bool),
    )


def host_env_carry(env: Any, num_envs: int, networks: Networks) -> EnvCarry:
    """The carry of N host envs before their first reset (`envs.host.HostEnv`): zero
    observations of the space's shapes and dtypes, `reset` True everywhere, and no
    `env_state` (`()`: the envs' state lives on the host). The host loop replaces the
    observations with the envs' own when it first resets them."""

    def zeros(space: Any) -> Any:
        if isinstance(getattr(space, "spaces", None), dict):
            return {k: zeros(s) for k, s in space.spaces.items()}
        if isinstance(getattr(space, "spaces", None), (list, tuple)):
            return tuple(zeros(s) for s in space.spaces)
        return jnp.zeros((num_envs, *space.shape), space.dtype)

    return EnvCarry(
        env_state=(),
        obs=zeros(env.observation_space(None)),
        episode_return=jnp.zeros((num_envs,), jnp.float32),
        episode_length=jnp.zeros((num_envs,), jnp.int32),
        policy_state=networks.initial_state(num_envs),
        reset=jnp.ones((num_envs,), bool),
    )


def make_env_step(
    env: Any,
    env_params: Any,
    networks: Networks,
    info_keys: tuple[str, ...] = (),
    reset_ratio: int | None = None,
) -> Callable[[Params, EnvCarry, jax.Array], tuple[EnvCarry, Transition, EpisodeStats]]:
    """Builds `env_step(params, carry, key) -> (carry, transition, ended)`.

    One step of N envs: a ~ pi(.|obs, state) from `networks.step` (the env gets the action
    clipped to its bounds; `log_prob` is of the unclipped sample), step every env with its
    own key (gymnax auto-resets ended episodes; with `reset_ratio` > 1, optimistic resets:
    `envs.resets.make_batched_step`), and update the running episode return /
    length. `transition` has leading axis `[N]` and keeps the policy state entering the
    step with its reset flag; `ended` sums the episodes that ended at this step, and
    for each of `info_keys` the env's `info[key]` at their last step (mean over any
    trailing axes).
    """
    batched_step = make_batched_step(env, env_params, reset_ratio)

    def env_step(
        params: Params, carry: EnvCarry, key: jax.Array
    ) -> tuple[EnvCarry, Transition, EpisodeStats]:
        action_key, env_key = jax.random.split(key)
        policy_state, dist, value = networks.step(
            params, carry.policy_state, carry.obs, carry.reset
        )
        action, log_prob = dist.sample_and_log_prob(seed=action_key)
        num_envs = carry.reset.shape[0]
        obs, env_state, reward, terminated, truncated, info = batched_step(
            jax.random.split(env_key, num_envs),
            carry.env_state,
            to_env_action(networks.action_spec, action),
        )
        reward = reward.astype(jnp.float32)
        done = jnp.logical_or(terminated, truncated)
        episode_return = carry.episode_return + reward
        episode_length = carry.episode_length + 1
        ended = EpisodeStats(
            return_sum=jnp.sum(jnp.where(done, episode_return, 0.0)),
            length_sum=jnp.sum(jnp.where(done, episode_length, 0)).astype(jnp.float32),
            count=jnp.sum(done).astype(jnp.float32),
            info_sum={key: _sum_where(done, info[key]) for key in info_keys},
        )
        transition = Transition(
            obs=carry.obs,
            action=action,
            log_prob=log_prob,
            value=value,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=info["final_observation"],
            policy_state=carry.policy_state,
            reset=carry.reset,
        )
        new_carry = carry.replace(
            env_state=env_state,
            obs=obs,
            episode_return=jnp.where(done, 0.0, episode_return),
            episode_length=jnp.where(done, 0, episode_length),
            policy_state=policy_state,
            reset=done,
        )
        return new_carry, transition, ended

    return env_step


def _sum_where(done: jax.Array, values: jax.Array) -> jax.Array:
    """Sum over the envs where `done` `[N]` of `values` `[N, ...]` (trailing axes averaged)."""
    values = jnp.asarray(values, jnp.float32).reshape((done.shape[0], -1)).mean(axis=1)
    return jnp.sum(jnp.where(done, values, 0.0))


def info_keys_of(env: Any, env_params: Any) -> tuple[str, ...]:
    """The keys of `env.step`'s info dict (from `jax.eval_shape`, nothing runs)."""

    def info(key: jax.Array) -> dict[str, Any]:
        _, state = env.reset(key, env_params)
        action = env.action_space(env_params).sample(key)
        return env.step(key, state, action, env_params)[5]

    return tuple(sorted(jax.eval_shape(info, jax.random.key(0))))


def make_rollout(
    env: Any,
    env_params: Any,
    networks: Networks,
    num_steps: int,
    info_keys: tuple[str, ...] = (),
    reset_ratio: int | None = None,
) -> Callable[[Params, EnvCarry, jax.Array], tuple[EnvCarry, Transition, EpisodeStats]]:
    """Builds `rollout(params, carry, key) -> (carry, transitions [T, N], stats)`.

    A `lax.scan` of `env_step` over T = num_steps steps; episode statistics are summed
    inside the scan (per-step info is never stacked; `info_keys` are summed at episode
    ends, see `make_env_step`). `reset_ratio`: optimistic resets (`make_env_step`).
    """
    env_step = make_env_step(env, env_params, networks, info_keys, reset_ratio)

    def rollout(
        params: Params, carry: EnvCarry, key: jax.Array
    ) -> tuple[EnvCarry, Transition, EpisodeStats]:
        def body(state, step_key):
            env_carry, stats = state
            env_carry, transition, ended = env_step(params, env_carry, step_key)
            stats = jax.tree.map(jnp.add, stats, ended)
            return (env_carry, stats), transition

        (carry, stats), transitions = jax.lax.scan(
            body, (carry, EpisodeStats.zeros(info_keys)), jax.random.split(key, num_steps)
        )
        return carry, transitions, stats

    return rollout


def next_values(networks: Networks, params: Params, traj: Transition, carry: EnvCarry) -> jax.Array:
    """V(final_obs_t) `[T, N]` float32 for every step, in one batched pass over T*N.

    The value of the observation a step led to (before any auto-reset) is computed from the
    policy state after the step, i.e. the state entering step t + 1 before its reset
    (`traj.policy_state[t + 1]`, or the rollout's final carry for t = T - 1). GAE uses it to
    bootstrap truncated episodes.
    """
    steps, num_envs = traj.reward.shape
    after = jax.tree.map(
        lambda s, last: jnp.concatenate([s[1:], last[None]], axis=0),
        traj.policy_state,
        carry.policy_state,
    )

    def flat(x):
        return x.reshape((steps * num_envs, *x.shape[2:]))

    _, _, value = networks.step(
        params,
        jax.tree.map(flat, after),
        jax.tree.map(flat, traj.final_obs),
        jnp.zeros((steps * num_envs,), bool),
    )
    return value.reshape((steps, num_envs))
