"""Carries and outputs of the training loop (all pytrees, built with keywords)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
from flax import struct

Params = Any
PyTree = Any


class Transition(NamedTuple):
    """One rollout, stacked over time: every field has leading axes `[T, N]`.

    `final_obs` is gymnax 1.0's `info["final_observation"]`: the observation the step led
    to before any auto-reset. Its value bootstraps the return at truncated steps.
    """

    obs: jax.Array  # [T, N, *obs_shape], env dtype (or a dict / tuple of such arrays)
    # [T, N] int32 (Discrete), [T, N, K] int32 (MultiDiscrete / MultiBinary), [T, N, A]
    # float32 (Box: the unclipped sample; with squash_actions, inside the bounds)
    action: jax.Array
    log_prob: jax.Array  # [T, N] float32; log pi_old(action | obs)
    value: jax.Array  # [T, N] float32; V_old(obs)
    reward: jax.Array  # [T, N] float32
    terminated: jax.Array  # [T, N] bool; the MDP ended (no bootstrap)
    truncated: jax.Array  # [T, N] bool; a time limit cut the episode (bootstrap)
    final_obs: jax.Array  # [T, N, *obs_shape]; observation after the step, before reset
    # Recurrent policies only (None otherwise):
    hidden: jax.Array | None = None  # [T, N, S] float32; core state entering the step
    next_value: jax.Array | None = None  # [T, N] float32; V(final_obs) from the state after


@struct.dataclass
class TrainState:
    """Network parameters and optimizer state of one agent."""

    params: Params  # flax params of the actor-critic
    opt_state: (
        PyTree  # optax state of `update.make_optimizer` (Adam count, mu, nu on raveled params)
    )


@struct.dataclass
class EnvCarry:
    """Environment-side carry of the rollout, for N vmapped envs."""

    env_state: PyTree  # gymnax EnvState with leading axis [N]
    obs: jax.Array  # [N, *obs_shape]; current observation
    episode_return: jax.Array  # [N] float32; undiscounted return of the running episode
    episode_length: jax.Array  # [N] int32; steps of the running episode
    # Recurrent policies: [N, S] float32 core state for the next step, zeroed where the
    # previous step ended an episode; None for feed-forward policies.
    hidden: jax.Array | None = None


@struct.dataclass
class RunnerState:
    """Everything one agent's training carries from one update to the next."""

    train_state: TrainState
    env: EnvCarry
    key: jax.Array  # typed PRNG key
    update_step: jax.Array  # int32 scalar; updates done so far


class TrainOutput(NamedTuple):
    """What `train(key, hparams)` returns.

    `metrics` maps names to float32 `[num_updates]` arrays (`[S, num_updates]` under vmap):
    episode_return, episode_length (means over episodes that ended during the update; NaN
    if none ended), pg_loss, v_loss, entropy, approx_kl, clipfrac (means over the update's
    minibatch steps), explained_variance, learning_rate, grad_norm, and env_steps (int32,
    env steps taken by the end of the update).
    """

    train_state: TrainState
    runner_state: RunnerState
    metrics: dict[str, jax.Array]
