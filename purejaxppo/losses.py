"""The PPO loss on one minibatch of `[M]` samples."""

from __future__ import annotations

from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
from jax.typing import ArrayLike


class LossTerms(NamedTuple):
    """Scalars (float32) reported per minibatch step.

    The one declaration of the loss terms: its fields, in order, are the loss metrics
    of every run (`TrainOutput.metrics`, metrics.csv; each the mean over an update's
    minibatch steps). `metrics.LossMetrics`, `metrics.UpdateMetrics`,
    `learning.LEARN_METRICS` and `guards.LOSS_METRICS` are derived from `_fields`, so a
    field added here is trained, logged and checked for NaN / Inf everywhere; its value
    comes from `ppo_loss` and from the fused kernels (`fused`), which build this by
    keyword (docs/guides/how-to-add.md, "A loss term").
    """

    # total loss minimised: actor_coef * (pg_loss - ent_coef * entropy) + vf_coef * v_loss
    # (CleanRL's `loss`; actor_coef is 0 during `critic_pretrain_steps`)
    loss: jax.Array
    pg_loss: jax.Array  # clipped surrogate policy loss (Schulman et al. 2017, eq. 7)
    v_loss: jax.Array  # (clipped, as CleanRL with clip_vloss) value loss, with its 0.5 factor
    entropy: jax.Array  # mean policy entropy (nats)
    approx_kl: jax.Array  # mean of (ratio - 1) - log(ratio), Schulman's k3 estimator
    clipfrac: jax.Array  # fraction of samples with |ratio - 1| > clip_coef


def ppo_loss(
    log_prob: ArrayLike,
    old_log_prob: ArrayLike,
    advantages: ArrayLike,
    value: ArrayLike,
    old_value: ArrayLike,
    returns: ArrayLike,
    entropy: ArrayLike,
    *,
    clip_coef: ArrayLike,
    vf_coef: ArrayLike,
    ent_coef: ArrayLike,
    norm_adv: bool,
    clip_vloss: bool,
    actor_coef: ArrayLike = 1.0,
    axis_name: str | None = None,
    mask: ArrayLike | None = None,
) -> LossTerms:
    """PPO-Clip loss (Schulman et al. 2017, arXiv:1707.06347, eq. 7 and 9).

        ratio    = exp(log_prob - old_log_prob)
        pg_loss  = mean(max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)))
        v_loss   = 0.5 * mean(max((V - G)^2, (V_old + clip(V - V_old, -eps, eps) - G)^2))
                   (or 0.5 * mean((V - G)^2) without clip_vloss)
        loss     = actor_coef * (pg_loss - ent_coef * entropy) + vf_coef * v_loss

    As in CleanRL's `ppo.py`: advantages are normalised per minibatch when `norm_adv`
    (std with 1e-8 added), and `approx_kl` is the k3 estimator mean((ratio-1) - log ratio).

    Args:
      log_prob: float32 `[M]`, log pi_theta(a|s) under the current parameters.
      old_log_prob: float32 `[M]`, log pi_old(a|s) recorded in the rollout.
      advantages: float32 `[M]`, GAE advantages.
      value: float32 `[M]`, V_theta(s).
      old_value: float32 `[M]`, V_old(s) recorded in the rollout.
      returns: float32 `[M]`, value targets G = A + V_old.
      entropy: float32 `[M]`, entropy of pi_theta(.|s).
      clip_coef: the clip epsilon.
      vf_coef: weight of the value loss.
      ent_coef: weight of the entropy bonus.
      norm_adv: normalise advantages within the minibatch.
      clip_vloss: clip the value update to [V_old - eps, V_old + eps].
      actor_coef: 0 during critic pre-training (only the value loss is optimised), else 1.
      axis_name: for data-parallel training (inside `shard_map` / `pmap`), the mapped
        axis the minibatch is split over: advantages are then normalised with the mean
        and std of the whole minibatch across devices (equal shard sizes assumed), so the
        device-averaged gradient equals the gradient on the whole minibatch. The returned
        terms stay the local (per-device) means.
      mask: bool `[M]`, the samples that count (padding of trajectory windows,
        `purejaxppo.sequences`, is False), or None (default: all count). Every mean above,
        and the advantage normalisation, is then over the masked samples only (the
        normalisation across devices with `axis_name`; each device's terms stay its own
        masked means, so devices with fewer valid samples weigh as much in the averaged
        gradient); at least one sample must count (per device).

    Returns:
      `LossTerms` of float32 scalars.
    """
    chex.assert_rank([log_prob, old_log_prob, advantages, value, old_value, returns], 1)
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    if mask is not None:
        return _masked_loss(
            log_ratio,
            advantages,
            value,
            old_value,
            returns,
            entropy,
            jnp.asarray(mask, bool),
            coefs=(clip_coef, vf_coef, ent_coef, actor_coef),
            norm_adv=norm_adv,
            clip_vloss=clip_vloss,
            axis_name=axis_name,
        )
    if norm_adv:
        advantages = _normalized(advantages, axis_name)
    pg_loss = jnp.maximum(
        -advantages * ratio, -advantages * jnp.clip(ratio, 1.0 - clip_coef, 1.0 + clip_coef)
    ).mean()

    v_loss_unclipped = jnp.square(value - returns)
    if clip_vloss:
        value_clipped = old_value + jnp.clip(value - old_value, -clip_coef, clip_coef)
        v_loss = 0.5 * jnp.maximum(v_loss_unclipped, jnp.square(value_clipped - returns)).mean()
    else:
        v_loss = 0.5 * v_loss_unclipped.mean()

    entropy = jnp.mean(entropy)
    loss = actor_coef * (pg_loss - ent_coef * entropy) + vf_coef * v_loss
    approx_kl = jax.lax.stop_gradient(((ratio - 1.0) - log_ratio).mean())
    clipfrac = jax.lax.stop_gradient((jnp.abs(ratio - 1.0) > clip_coef).astype(jnp.float32).mean())
    return LossTerms(
        loss=loss,
        pg_loss=pg_loss,
        v_loss=v_loss,
        entropy=entropy,
        approx_kl=approx_kl,
        clipfrac=clipfrac,
    )


def _normalized(advantages: ArrayLike, axis_name: str | None) -> jax.Array:
    """float32 `[M]`: `(A - mean) / (std + 1e-8)`, with the mean and std of the `[M]`
    advantages (with `axis_name`, of every device's, equal shard sizes assumed)."""
    if axis_name is None:
        return (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    mean = jax.lax.pmean(advantages.mean(), axis_name)
    std = jnp.sqrt(jax.lax.pmean(jnp.mean(jnp.square(advantages - mean)), axis_name))
    return (advantages - mean) / (std + 1e-8)


def _masked_loss(
    log_ratio: jax.Array,
    advantages: ArrayLike,
    value: ArrayLike,
    old_value: ArrayLike,
    returns: ArrayLike,
    entropy: ArrayLike,
    mask: jax.Array,
    *,
    coefs: tuple[ArrayLike, ArrayLike, ArrayLike, ArrayLike],
    norm_adv: bool,
    clip_vloss: bool,
    axis_name: str | None,
) -> LossTerms:
    """`ppo_loss` with every mean over the samples of `mask` (see `ppo_loss`)."""
    clip_coef, vf_coef, ent_coef, actor_coef = coefs
    count = jnp.sum(mask.astype(jnp.float32))

    def mean(x):  # masked mean; padded entries never reach the sum (no NaN leaks)
        return jnp.sum(jnp.where(mask, x, 0.0)) / count

    ratio = jnp.exp(log_ratio)
    if norm_adv:
        if axis_name is None:
            adv_mean = mean(advantages)
            adv_std = jnp.sqrt(mean(jnp.square(advantages - adv_mean)))
        else:
            total = jax.lax.psum(count, axis_name)

            def global_mean(x):
                return jax.lax.psum(jnp.sum(jnp.where(mask, x, 0.0)), axis_name) / total

            adv_mean = global_mean(advantages)
            adv_std = jnp.sqrt(global_mean(jnp.square(advantages - adv_mean)))
        advantages = (advantages - adv_mean) / (adv_std + 1e-8)
    pg_loss = mean(
        jnp.maximum(
            -advantages * ratio, -advantages * jnp.clip(ratio, 1.0 - clip_coef, 1.0 + clip_coef)
        )
    )
    v_loss_unclipped = jnp.square(value - returns)
    if clip_vloss:
        value_clipped = old_value + jnp.clip(value - old_value, -clip_coef, clip_coef)
        v_loss = 0.5 * mean(jnp.maximum(v_loss_unclipped, jnp.square(value_clipped - returns)))
    else:
        v_loss = 0.5 * mean(v_loss_unclipped)
    entropy = mean(entropy)
    loss = actor_coef * (pg_loss - ent_coef * entropy) + vf_coef * v_loss
    approx_kl = jax.lax.stop_gradient(mean((ratio - 1.0) - log_ratio))
    clipfrac = jax.lax.stop_gradient(mean((jnp.abs(ratio - 1.0) > clip_coef).astype(jnp.float32)))
    return LossTerms(
        loss=loss,
        pg_loss=pg_loss,
        v_loss=v_loss,
        entropy=entropy,
        approx_kl=approx_kl,
        clipfrac=clipfrac,
    )
