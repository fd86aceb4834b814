"""Generalized Advantage Estimation on one unbatched `[T]` sequence (rlax style)."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


def gae_advantages(
    reward_t: ArrayLike,
    value_t: ArrayLike,
    next_value_t: ArrayLike,
    terminated_t: ArrayLike,
    truncated_t: ArrayLike,
    gamma: ArrayLike,
    gae_lambda: ArrayLike,
) -> tuple[jax.Array, jax.Array]:
    """GAE(gamma, lambda) advantages and returns of one sequence of T transitions.

    Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized Advantage
    Estimation", arXiv:1506.02438, eq. 16, with time limits handled as in Pardo et al.
    2018, "Time Limits in Reinforcement Learning", arXiv:1712.00378:

        delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)
        A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1},   A_T = 0
        G_t     = A_t + V(s_t)                      (the value target)

    where `s'_t` is the observation the step led to *before* any auto-reset (gymnax 1.0's
    `info["final_observation"]`) and `done_t = terminated_t or truncated_t`.

    * `terminated` (the MDP really ended): the continuation is zeroed; nothing is bootstrapped.
    * `truncated` (a time limit cut the episode): the step bootstraps from V(final
      observation), but the advantage trace stops because the next transition in the
      buffer belongs to a new episode.
    * The last step of the rollout (t = T-1) bootstraps from `next_value_t[T-1]`, the
      value of the observation after it: pass V(s'_t) for every t.

    Args:
      reward_t: float32 `[T]`, rewards r_t.
      value_t: float32 `[T]`, V(s_t) of the observations the actions were taken in.
      next_value_t: float32 `[T]`, V(s'_t) of the observation after each step, before reset.
      terminated_t: bool `[T]`.
      truncated_t: bool `[T]`.
      gamma: float scalar in [0, 1], discount.
      gae_lambda: float scalar in [0, 1]; 1 gives bootstrapped Monte-Carlo returns, 0 TD(0).

    Returns:
      `(advantages, returns)`, float32 `[T]` each.

    Raises:
      AssertionError (from chex) if the inputs are not all rank 1.
    """
    chex.assert_rank([reward_t, value_t, next_value_t, terminated_t, truncated_t], 1)
    chex.assert_equal_shape([reward_t, value_t, next_value_t, terminated_t, truncated_t])
    reward_t = jnp.asarray(reward_t, jnp.float32)
    value_t = jnp.asarray(value_t, jnp.float32)
    not_terminated = 1.0 - jnp.asarray(terminated_t, jnp.float32)
    not_done = 1.0 - jnp.logical_or(terminated_t, truncated_t).astype(jnp.float32)
    delta_t = reward_t + gamma * not_terminated * next_value_t - value_t

    def backward(advantage_tp1, inputs):
        delta, continues = inputs
        advantage = delta + gamma * gae_lambda * continues * advantage_tp1
        return advantage, advantage

    _, advantages = jax.lax.scan(
        backward, jnp.zeros((), jnp.float32), (delta_t, not_done), reverse=True
    )
    return advantages, advantages + value_t
