"""One environment step and the `num_steps` rollout over N vmapped environments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from purejaxppo.networks import ActionSpec
from purejaxppo.types import EnvCarry, Params, Transition


class EpisodeStats(NamedTuple):
    """Sums over the episodes that ended during a rollout (float32 scalars)."""

    return_sum: jax.Array  # sum of undiscounted episode returns
    length_sum: jax.Array  # sum of episode lengths (steps)
    count: jax.Array  # number of episodes that ended

    @classmethod
    def zeros(cls) -> EpisodeStats:
        return cls(*(jnp.zeros((), jnp.float32) for _ in range(3)))

    def mean_return(self) -> jax.Array:
        """Mean return of the ended episodes, NaN if none ended."""
        return jnp.where(self.count > 0, self.return_sum / jnp.maximum(self.count, 1), jnp.nan)

    def mean_length(self) -> jax.Array:
        """Mean length of the ended episodes, NaN if none ended."""
        return jnp.where(self.count > 0, self.length_sum / jnp.maximum(self.count, 1), jnp.nan)


def to_env_action(spec: ActionSpec, action: jax.Array) -> jax.Array:
    """Policy sample -> what the env takes, for a batch of N actions.

    Discrete `[N]` -> int32 `[N]`; MultiDiscrete `[N, K]` / MultiBinary `[N, n]` -> int32
    `[N, *action_shape]`; Box `[N, A]` -> float32 `[N, *action_shape]` clipped to the
    bounds (a no-op for squashed-Gaussian samples, already inside them).
    """
    if spec.discrete:
        return action.astype(jnp.int32)
    action = action.reshape((action.shape[0], *spec.shape))
    if spec.kind in ("multi_discrete", "multi_binary"):
        return action.astype(jnp.int32)
    return jnp.clip(action, spec.low, spec.high)


def reset_envs(
    env: Any, env_params: Any, key: jax.Array, num_envs: int, hidden_size: int | None = None
) -> EnvCarry:
    """Resets N environments (one key each) and zeroes the episode counters.

    With `hidden_size` S (recurrent policies), the carry also holds a zero core state
    `[N, S]`.
    """
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(key, num_envs), env_params
    )
    return EnvCarry(
        env_state=env_state,
        obs=obs,
        episode_return=jnp.zeros((num_envs,), jnp.float32),
        episode_length=jnp.zeros((num_envs,), jnp.int32),
        hidden=None if hidden_size is None else jnp.zeros((num_envs, hidden_size), jnp.float32),
    )


def make_env_step(
    env: Any, env_params: Any, apply_fn: Callable, spec: ActionSpec, recurrent: bool = False
) -> Callable[[Params, EnvCarry, jax.Array], tuple[EnvCarry, Transition, EpisodeStats]]:
    """Builds `env_step(params, carry, key) -> (carry, transition, ended)`.

    One step of N envs: sample a ~ pi(.|obs) (the env gets the action clipped to its
    bounds; `log_prob` is of the unclipped sample), step every env with its own key (gymnax
    auto-resets ended episodes), and update the running episode return / length.
    `transition` has leading axis `[N]`; `ended` sums the episodes that ended at this step.

    With `recurrent`, `apply_fn` is `RecurrentNetworks.step`: the policy runs one core
    step from `carry.hidden`; the transition keeps the state entering the step and
    V(final_obs) from the state after it (`next_value`), and the carried state is zeroed
    where the step ended an episode.
    """

    def policy_step(params, carry):
        if not recurrent:
            dist, value = apply_fn(params, carry.obs)
            return dist, value, None
        hidden, dist, value = apply_fn(params, carry.hidden, carry.obs)
        return dist, value, hidden

    def env_step(
        params: Params, carry: EnvCarry, key: jax.Array
    ) -> tuple[EnvCarry, Transition, EpisodeStats]:
        action_key, env_key = jax.random.split(key)
        dist, value, hidden = policy_step(params, carry)
        action, log_prob = dist.sample_and_log_prob(seed=action_key)
        num_envs = jax.tree.leaves(carry.obs)[0].shape[0]  # obs may be a dict / tuple
        obs, env_state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None)
        )(
            jax.random.split(env_key, num_envs),
            carry.env_state,
            to_env_action(spec, action),
            env_params,
        )
        reward = reward.astype(jnp.float32)
        done = jnp.logical_or(terminated, truncated)
        episode_return = carry.episode_return + reward
        episode_length = carry.episode_length + 1
        ended = EpisodeStats(
            return_sum=jnp.sum(jnp.where(done, episode_return, 0.0)),
            length_sum=jnp.sum(jnp.where(done, episode_length, 0)).astype(jnp.float32),
            count=jnp.sum(done).astype(jnp.float32),
        )
        final_obs = info["final_observation"]
        next_value = None
        if recurrent:
            _, _, next_value = apply_fn(params, hidden, final_obs)
            hidden = jnp.where(done[:, None], 0.0, hidden)
        transition = Transition(
            obs=carry.obs,
            action=action,
            log_prob=log_prob,
            value=value,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
            hidden=carry.hidden,
            next_value=next_value,
        )
        new_carry = EnvCarry(
            env_state=env_state,
            obs=obs,
            episode_return=jnp.where(done, 0.0, episode_return),
            episode_length=jnp.where(done, 0, episode_length),
            hidden=hidden,
        )
        return new_carry, transition, ended

    return env_step


def make_rollout(
    env: Any,
    env_params: Any,
    apply_fn: Callable,
    spec: ActionSpec,
    num_steps: int,
    recurrent: bool = False,
) -> Callable[[Params, EnvCarry, jax.Array], tuple[EnvCarry, Transition, EpisodeStats]]:
    """Builds `rollout(params, carry, key) -> (carry, transitions [T, N], stats)`.

    A `lax.scan` of `env_step` over T = num_steps steps; episode statistics are summed
    inside the scan (per-step info is never stacked).
    """
    env_step = make_env_step(env, env_params, apply_fn, spec, recurrent)

    def rollout(
        params: Params, carry: EnvCarry, key: jax.Array
    ) -> tuple[EnvCarry, Transition, EpisodeStats]:
        def body(state, step_key):
            env_carry, stats = state
            env_carry, transition, ended = env_step(params, env_carry, step_key)
            stats = jax.tree.map(jnp.add, stats, ended)
            return (env_carry, stats), transition

        (carry, stats), transitions = jax.lax.scan(
            body, (carry, EpisodeStats.zeros()), jax.random.split(key, num_steps)
        )
        return carry, transitions, stats

    return rollout
