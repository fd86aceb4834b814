"""Per-update metrics: `UpdateMetrics` (its fields ARE the metric names) and `EpisodeStats`.

Everything here is reduced inside the training scan (means / sums per update), never
stacked per step, so memory does not grow with `num_steps`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


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


class LossMetrics(NamedTuple):
    """Means over the minibatch steps of an update (float32 scalars)."""

    pg_loss: jax.Array  # clipped surrogate policy loss (Schulman et al. 2017, eq. 7)
    v_loss: jax.Array  # value loss (clipped as CleanRL when clip_vloss)
    entropy: jax.Array  # policy entropy (nats)
    approx_kl: jax.Array  # (ratio - 1) - log ratio (Schulman's k3 estimator)
    clipfrac: jax.Array  # fraction of samples with |ratio - 1| > clip_coef
    grad_norm: jax.Array  # global gradient norm before clipping


class UpdateMetrics(NamedTuple):
    """One update's metrics (float32 scalars); `TrainOutput.metrics` stacks them per update.

    episode_return / episode_length: means over the episodes that ended during the
    update's rollout (NaN if none ended); the `LossMetrics` fields; explained_variance
    1 - Var[G - V] / Var[G] of the rollout; learning_rate used; update_epochs_run (fewer
    than update_epochs when target_kl stopped early); env_steps taken by the end of the
    update (float32: exact to 2^24, then within 1e-7 relative; it never wraps).
    """

    episode_return: jax.Array
    episode_length: jax.Array
    pg_loss: jax.Array
    v_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clipfrac: jax.Array
    explained_variance: jax.Array
    learning_rate: jax.Array
    grad_norm: jax.Array
    update_epochs_run: jax.Array
    env_steps: jax.Array


#: The metric names, in table-column order.
METRICS = UpdateMetrics._fields
