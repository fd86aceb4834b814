"""One step of the policy and its envs, and the `num_steps` rollout: the only rollout scan.

The envs are a `RowsEnv` (`envs.rows`): every kind of env (single-agent JAX envs, EnvPool,
JaxMARL's agents as rows) is adapted into one below this loop (`kinds`), so the
rollout never asks what kind of env it steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.envs.rows import RowsEnv
from purejaxppo.metrics import EpisodeStats
from purejaxppo.networks import Networks, to_env_action
from purejaxppo.normalize import normalize_obs, normalized_inputs, update_obs_stats
from purejaxppo.types import EnvCarry, Params, Transition

__all__ = [
    "critic_apart",
    "make_env_step",
    "make_normalizing_rollout",
    "make_rollout",
    "next_values",
    "step_values",
]


def make_env_step(
    envs: RowsEnv, networks: Networks, with_value: bool = True
) -> Callable[[Params, EnvCarry, jax.Array], tuple[EnvCarry, Transition, EpisodeStats]]:
    """Builds `env_step(params, carry, key) -> (carry, transition, ended)`.

    One step of R rows: a ~ pi(.|obs, state) from `networks.step` (the env gets the action
    clipped to its bounds, `to_env_action`; `log_prob` is of the unclipped sample), then
    `envs.step` with the step's env key. `transition` has leading axis `[R]` and keeps the
    policy state entering the step with its reset flag; `ended` sums the episodes that
    ended at this step (`EnvStep.ended`). Without `with_value`, `transition.value` is None
    and the critic is dead code that XLA removes from the step (`make_rollout`'s
    `batched_values`).
    """

    def env_step(
        params: Params, carry: EnvCarry, key: jax.Array
    ) -> tuple[EnvCarry, Transition, EpisodeStats]:
        action_key, env_key = jax.random.split(key)
        policy_state, dist, value = networks.step(
            params, carry.policy_state, carry.obs, carry.reset
        )
        action, log_prob = dist.sample_and_log_prob(seed=action_key)
        out = envs.step(env_key, carry, to_env_action(networks.action_spec, action))
        transition = Transition(
            obs=carry.obs,
            action=action,
            log_prob=log_prob,
            value=value if with_value else None,
            reward=out.reward,
            terminated=out.terminated,
            truncated=out.truncated,
            final_obs=out.final_obs,
            policy_state=carry.policy_state,
            reset=carry.reset,
        )
        new_carry = carry.stepped(out, policy_state)
        return new_carry, transition, out.ended

    return env_step


def make_rollout(
    envs: RowsEnv,
    networks: Networks,
    num_steps: int,
    unroll: int = 1,
    batched_values: bool = False,
) -> Callable[[Params, EnvCarry, jax.Array], tuple[EnvCarry, Transition, EpisodeStats]]:
    """Builds `rollout(params, carry, key) -> (carry, transitions [T, R], stats)`.

    A `lax.scan` of `make_env_step` over T = num_steps steps; episode statistics are summed
    inside the scan (per-step info is never stacked; `envs.info_keys` are summed at episode
    ends). `unroll` env steps run per scan iteration (`loops.LoopPlan.rollout_unroll`:
    fewer loop round trips on a GPU; the same numbers).

    With `batched_values` (`loops.LoopPlan.batched_values`), the scan runs only the actor
    (XLA drops the unused critic from its body), and `transitions.value` `[T, R]` float32
    = V(obs_t) comes from one batched pass of the critic over the T*R observations after
    it (`step_values`): the critic's weights are read once instead of at every step. The
    same function of the same inputs, rounded by one matmul of T*R rows instead of T of R
    rows (1 ulp here and there). It pays where the critic shares nothing with the actor
    (`critic_apart`); elsewhere the pass recomputes what the actor computed.
    """
    env_step = make_env_step(envs, networks, with_value=not batched_values)

    def rollout(
        params: Params, carry: EnvCarry, key: jax.Array
    ) -> tuple[EnvCarry, Transition, EpisodeStats]:
        def body(state, step_key):
            env_carry, stats = state
            env_carry, transition, ended = env_step(params, env_carry, step_key)
            stats = jax.tree.map(jnp.add, stats, ended)
            return (env_carry, stats), transition

        (carry, stats), transitions = jax.lax.scan(
            body,
            (carry, EpisodeStats.zeros(envs.info_keys)),
            jax.random.split(key, num_steps),
            unroll=unroll,
        )
        if batched_values:
            transitions = transitions._replace(value=step_values(networks, params, transitions))
        return carry, transitions, stats

    return rollout


def make_normalizing_rollout(
    envs: RowsEnv,
    networks: Networks,
    num_steps: int,
    unroll: int = 1,
    batched_values: bool = False,
    axis_name: str | None = None,
) -> Callable[[Params, EnvCarry, jax.Array], tuple[EnvCarry, Transition, EpisodeStats, Any]]:
    """Builds `rollout(params, carry, key) -> (carry, transitions [T, R], stats, obs_norm)`
    for `normalize_timing: "step"`: `make_rollout` whose observation statistics move at
    every step, as SB3's `VecNormalize` moves them.

    At step t the statistics (from `params["obs_norm"]` at t = 0) are merged with the R
    observations the policy is about to see (`normalize.update_obs_stats`), and those
    observations and the step's `final_obs` are normalised with the merged statistics.
    `transitions.obs` / `final_obs` hold the NORMALISED observations (the update learns
    on them through `normalize.normalized_inputs(networks)`); `obs_norm` is the
    statistics after the last step, which the update writes into the params. `networks`
    must normalise observations (`normalize.with_normalization`); `carry.obs` stays raw.

    With `axis_name` (data-parallel training inside `shard_map`, each device stepping R
    of the agent's envs), every step merges the observations of all devices' envs
    (`normalize.batch_moments` over the axis: one all-reduce of the step's moments per
    env step): the statistics are those of all the agent's envs together, as one device
    stepping them all would merge them (up to float rounding), identical on every device.

    Raises:
      ValueError: `networks` that do not normalise observations.
    """
    settings = networks.normalization
    if settings is None or not settings.observations:
        raise ValueError(
            "make_normalizing_rollout: the networks do not normalise observations; build "
            "them with normalize_observations=True (make_networks / make_train_fns)"
        )
    acting = normalized_inputs(networks)
    env_step = make_env_step(envs, acting, with_value=not batched_values)

    def rollout(
        params: Params, carry: EnvCarry, key: jax.Array
    ) -> tuple[EnvCarry, Transition, EpisodeStats, Any]:
        def body(state, step_key):
            env_carry, stats, obs_norm = state
            obs_norm = update_obs_stats(obs_norm, env_carry.obs, settings.leaves, axis_name)

            def normalize(obs):
                return normalize_obs(obs_norm, obs, settings.leaves, settings.obs_clip)

            env_carry = env_carry.replace(obs=normalize(env_carry.obs))
            env_carry, transition, ended = env_step(params, env_carry, step_key)
            transition = transition._replace(final_obs=normalize(transition.final_obs))
            stats = jax.tree.map(jnp.add, stats, ended)
            return (env_carry, stats, obs_norm), transition

        (carry, stats, obs_norm), transitions = jax.lax.scan(
            body,
            (carry, EpisodeStats.zeros(envs.info_keys), params["obs_norm"]),
            jax.random.split(key, num_steps),
            unroll=unroll,
        )
        if batched_values:
            transitions = transitions._replace(value=step_values(acting, params, transitions))
        return carry, transitions, stats, obs_norm

    return rollout


def critic_apart(networks: Networks) -> bool:
    """Whether the critic is a feed-forward tower that shares no computation with the
    actor (the built-in `ActorCritic` with separate towers and no core): what makes
    `make_rollout`'s `batched_values` pay."""
    module = networks.module
    return not networks.stateful and module is not None and getattr(module, "shared", True) is False


def step_values(networks: Networks, params: Params, traj: Transition) -> jax.Array:
    """V(obs_t) `[T, R]` float32 for every step of `traj`, in one batched pass over T*R
    (from the policy state entering each step, `traj.policy_state` / `traj.reset`)."""
    return _batched_values(networks, params, traj.policy_state, traj.obs, traj.reset)


def _batched_values(
    networks: Networks, params: Params, policy_state: Any, obs: Any, reset: jax.Array
) -> jax.Array:
    """`networks.step`'s value `[T, R]` on `[T, R, ...]` inputs, as one step of T*R rows."""
    steps, rows = reset.shape

    def flat(x):
        return x.reshape((steps * rows, *x.shape[2:]))

    _, _, value = networks.step(
        params, jax.tree.map(flat, policy_state), jax.tree.map(flat, obs), flat(reset)
    )
    return value.reshape((steps, rows))


def next_values(networks: Networks, params: Params, traj: Transition, carry: EnvCarry) -> jax.Array:
    """V(final_obs_t) `[T, R]` float32 for every step, in one batched pass over T*R.

    The value of the observation a step led to (before any auto-reset) is computed from the
    policy state after the step, i.e. the state entering step t + 1 before its reset
    (`traj.policy_state[t + 1]`, or the rollout's final carry for t = T - 1). GAE uses it to
    bootstrap truncated episodes.
    """
    after = jax.tree.map(
        lambda s, last: jnp.concatenate([s[1:], last[None]], axis=0),
        traj.policy_state,
        carry.policy_state,
    )
    no_reset = jnp.zeros(traj.reward.shape, bool)
    return _batched_values(networks, params, after, traj.final_obs, no_reset)
