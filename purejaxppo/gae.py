"""Advantage estimators on one unbatched `[T]` sequence (rlax style): GAE and n-step."""

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
    method: str = "scan",
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
      method: "scan" (default): the recursion as a T-step backward `lax.scan`;
        "associative": the same recursion as a parallel prefix scan
        (`lax.associative_scan`: affine maps x -> delta + c * x compose associatively,
        (c1, d1) o (c2, d2) = (c1 * c2, d1 + c1 * d2)), log2 T dependent steps and no loop,
        for GPUs (`purejaxppo.loops`); equal to "scan" up to float32 rounding.

    Returns:
      `(advantages, returns)`, float32 `[T]` each.

    Raises:
      AssertionError (from chex) if the inputs are not all rank 1. ValueError: an unknown
      `method`.
    """
    chex.assert_rank([reward_t, value_t, next_value_t, terminated_t, truncated_t], 1)
    chex.assert_equal_shape([reward_t, value_t, next_value_t, terminated_t, truncated_t])
    reward_t = jnp.asarray(reward_t, jnp.float32)
    value_t = jnp.asarray(value_t, jnp.float32)
    not_terminated = 1.0 - jnp.asarray(terminated_t, jnp.float32)
    not_done = 1.0 - jnp.logical_or(terminated_t, truncated_t).astype(jnp.float32)
    delta_t = reward_t + gamma * not_terminated * next_value_t - value_t
    if method == "associative":
        advantages = _affine_suffix_scan(gamma * gae_lambda * not_done, delta_t)
        return advantages, advantages + value_t
    if method != "scan":
        raise ValueError(f"method={method!r}: must be 'scan' or 'associative'")

    def backward(advantage_tp1, inputs):
        delta, continues = inputs
        advantage = delta + gamma * gae_lambda * continues * advantage_tp1
        return advantage, advantage

    _, advantages = jax.lax.scan(
        backward, jnp.zeros((), jnp.float32), (delta_t, not_done), reverse=True
    )
    return advantages, advantages + value_t


def _affine_suffix_scan(coef_t: jax.Array, delta_t: jax.Array) -> jax.Array:
    """x_t = delta_t + coef_t * x_{t+1} with x_T = 0, for every t, by a prefix scan."""

    def compose(later, earlier):
        # reverse=True combines (a later element, an earlier one): the later map is applied
        # first, then the earlier one.
        c_late, d_late = later
        c_early, d_early = earlier
        return c_early * c_late, d_early + c_early * d_late

    _, x = jax.lax.associative_scan(compose, (coef_t, delta_t), reverse=True)
    return x


def n_step_advantages(
    reward_t: ArrayLike,
    value_t: ArrayLike,
    next_value_t: ArrayLike,
    terminated_t: ArrayLike,
    truncated_t: ArrayLike,
    gamma: ArrayLike,
    n_step: int,
) -> tuple[jax.Array, jax.Array]:
    """n-step bootstrapped returns and advantages of one sequence of T transitions.

    The n-step return (Sutton & Barto 2018, eq. 7.1; MetaBox's `PPO_Agent` `n_step`;
    rlax `n_step_bootstrapped_returns`), with the episode and rollout ends of
    `gae_advantages`:

        G_t = r_t + gamma * (1 - terminated_t) * X_t
        X_t = V(s'_t)         if done_t, t = T-1 or the n steps are used up
              G_{t+1}         otherwise (one step fewer left)
        A_t = G_t - V(s_t)

    i.e. sum_{k<h} gamma^k r_{t+k} + gamma^h V(s_{t+h}) with h = n, or fewer where the
    episode or the rollout ends first. n = 1 is TD(0) (GAE with lambda 0); n >= T
    without episode ends is GAE with lambda 1.

    Args:
      reward_t, value_t, next_value_t: float32 `[T]` (as `gae_advantages`).
      terminated_t, truncated_t: bool `[T]`.
      gamma: float scalar in [0, 1], discount.
      n_step: int >= 1 (static), the most rewards summed before bootstrapping.

    Returns:
      `(advantages, returns)`, float32 `[T]` each.

    Raises:
      ValueError: n_step < 1. AssertionError (from chex) if the inputs are not rank 1.
    """
    if int(n_step) < 1:
        raise ValueError(f"n_step={n_step!r}: must be >= 1")
    reward_t, value_t, next_value_t = (
        jnp.asarray(x, jnp.float32) for x in (reward_t, value_t, next_value_t)
    )
    terminated_t, truncated_t = jnp.asarray(terminated_t, bool), jnp.asarray(truncated_t, bool)
    chex.assert_rank([reward_t, value_t, next_value_t, terminated_t, truncated_t], 1)
    chex.assert_equal_shape([reward_t, value_t, next_value_t, terminated_t, truncated_t])
    discount_t = gamma * (1.0 - jnp.asarray(terminated_t, jnp.float32))
    stop_t = jnp.logical_or(terminated_t, truncated_t).at[-1].set(True)

    def longer(_, returns_h):  # G^(h) -> G^(h+1)
        following = jnp.concatenate([returns_h[1:], returns_h[-1:]])
        return reward_t + discount_t * jnp.where(stop_t, next_value_t, following)

    one_step = reward_t + discount_t * next_value_t
    returns = jax.lax.fori_loop(1, int(n_step), longer, one_step)
    return returns - value_t, returns
