"""Per-update metrics: `UpdateMetrics` (its fields ARE the metric names) and `EpisodeStats`.

The loss metrics are not typed here: they are the fields of `losses.LossTerms`, and
`LossMetrics` / `UpdateMetrics` are built from them (as are `learning.LEARN_METRICS` and
`guards.LOSS_METRICS`), so a loss term is declared once.

Everything here is reduced inside the training scan (means / sums per update), never
stacked per step, so memory does not grow with `num_steps`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from purejaxppo.collectives import all_gather_flat
from purejaxppo.losses import LossTerms

#: `EpisodeStats.info_sum` keys averaged over their own count (another key, logged as
#: summed), not over `count`: EnvPool Atari counts games, its learner's episodes (lives,
#: clipped rewards) apart (`envs.rows.envpool_rows`).
CLIPPED_RETURN, CLIPPED_COUNT = "episode_return_clipped", "episode_count_clipped"
OWN_COUNTS = {CLIPPED_RETURN: CLIPPED_COUNT}


class EpisodeStats(NamedTuple):
    """Sums over the episodes that ended during a rollout (float32 scalars)."""

    return_sum: jax.Array  # sum of undiscounted episode returns
    length_sum: jax.Array  # sum of episode lengths (steps)
    count: jax.Array  # number of episodes that ended
    # `PPOConfig.info_metrics`: key -> sum over the ended episodes of `info[key]` at their
    # last step (mean over any trailing axes of the entry); {} when none are named.
    info_sum: dict[str, jax.Array] = {}  # never mutated

    @classmethod
    def zeros(cls, info_keys: tuple[str, ...] = ()) -> EpisodeStats:
        def zero() -> jax.Array:
            return jnp.zeros((), jnp.float32)

        return cls(zero(), zero(), zero(), {key: zero() for key in info_keys})

    def mean_info(self) -> dict[str, jax.Array]:
        """`info/<key>` -> mean of `info[key]` at the ended episodes' last steps (NaN if
        none); a key of `OWN_COUNTS` over its own count, and that count as summed."""
        means = {}
        for key, total in self.info_sum.items():
            count = self.info_sum.get(OWN_COUNTS.get(key), self.count)
            if key in OWN_COUNTS.values():
                means[f"info/{key}"] = total
            else:
                means[f"info/{key}"] = jnp.where(count > 0, total / jnp.maximum(count, 1), jnp.nan)
        return means

    def mean_return(self) -> jax.Array:
        """Mean return of the ended episodes, NaN if none ended."""
        return jnp.where(self.count > 0, self.return_sum / jnp.maximum(self.count, 1), jnp.nan)

    def mean_length(self) -> jax.Array:
        """Mean length of the ended episodes, NaN if none ended."""
        return jnp.where(self.count > 0, self.length_sum / jnp.maximum(self.count, 1), jnp.nan)


#: The metrics of an update's rollout, before the loss metrics (table-column order).
EPISODE_METRICS = ("episode_return", "episode_length", "episode_count")
#: The metrics of the update after the `LossTerms` fields (table-column order).
UPDATE_METRICS = ("explained_variance", "learning_rate", "grad_norm", "update_epochs_run")
#: Means over the rollout's samples (`rollout_statistics`), the last columns.
ROLLOUT_METRICS = (
    "value_mean",
    "advantage_mean",
    "return_mean",
    "log_prob_mean",
    "action_mean",
    "action_std",
)
#: The metrics the training loop adds to `learning.learn`'s: only the loop knows the
#: episodes that ended and the env-step count.
LOOP_METRICS = (*EPISODE_METRICS, "env_steps")


def _scalars(typename: str, names: tuple[str, ...], doc: str) -> type:
    """A NamedTuple class with one `jax.Array` field per name, documented by `doc`."""
    cls = NamedTuple(typename, [(name, jax.Array) for name in names])
    cls.__doc__ = doc
    cls.__module__ = __name__
    return cls


LossMetrics = _scalars(
    "LossMetrics",
    (*LossTerms._fields, "grad_norm"),
    """Means over the minibatch steps of an update (float32 scalars): the `LossTerms`
    fields (derived from them, never re-typed), then grad_norm, the global L2 norm of
    the minibatch gradient before `clip_by_global_norm` (and, with data-parallel
    training, after the cross-device mean).""",
)


UpdateMetrics = _scalars(
    "UpdateMetrics",
    (*EPISODE_METRICS, *LossTerms._fields, *UPDATE_METRICS, "env_steps", *ROLLOUT_METRICS),
    """One update's metrics (float32 scalars); `TrainOutput.metrics` stacks them per update.

    The fields, in table-column order (`METRICS`): episode_return, episode_length,
    episode_count; the `LossTerms` fields (built from them: a loss term declared there is
    a metric here); explained_variance, learning_rate, grad_norm, update_epochs_run;
    env_steps; value_mean, advantage_mean, return_mean, log_prob_mean, action_mean,
    action_std.

    episode_return / episode_length: means over the episodes that ended during the
    update's rollout (NaN if none ended); episode_count: how many ended (the weight of
    those means: `drivers.report.final_return` averages the last episodes, not the last
    updates); the loss terms: means over the update's minibatch steps (see `LossTerms`);
    explained_variance 1 - Var[G - V] / Var[G] of the rollout; learning_rate used;
    grad_norm: the mean global L2 norm of the minibatch gradients before clipping;
    update_epochs_run (fewer than update_epochs when target_kl stopped early); env_steps
    taken by the end of the update (float32: exact to 2^24, then within 1e-7 relative;
    it never wraps).

    Rollout statistics (means over the update's N*T samples, reduced in the update, so
    nothing grows with `num_steps`): value_mean of V_old(obs); advantage_mean of the GAE
    advantages (before per-minibatch normalisation); return_mean of the value targets
    (advantages + V_old); log_prob_mean of log pi_old(action | obs) (minus the entropy
    estimate of the sampled actions); action_mean / action_std of the env actions as
    sampled (Box: per-dimension mean / std, averaged over the dimensions; Discrete: of the
    action index; MultiDiscrete / MultiBinary: of the component values).

    Metrics whose names depend on the env or config are not fields: they are extra keys
    of `TrainOutput.metrics` (`TrainFns.metric_names` lists all): `action_frac/<i>`, the
    fraction of the rollout's actions equal to i (Discrete, with
    `PPOConfig.action_histogram`), and `info/<key>` for `PPOConfig.info_metrics`.
    """,
)


#: The metric names every run has, in table-column order (see `UpdateMetrics`).
METRICS = UpdateMetrics._fields


def extra_metric_names(
    num_actions: int | None = None, info_keys: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """Names of the env-dependent metrics: `action_frac/<i>` for i < `num_actions` (None:
    no histogram), then `info/<key>` per key (table-column order)."""
    hist = () if num_actions is None else tuple(f"action_frac/{i}" for i in range(num_actions))
    return hist + tuple(f"info/{key}" for key in info_keys)


def rollout_statistics(
    value: jax.Array,
    advantages: jax.Array,
    returns: jax.Array,
    log_prob: jax.Array,
    action: jax.Array,
    num_actions: int | None = None,
    axis_name: str | None = None,
) -> dict[str, jax.Array]:
    """Means of one rollout's samples (see `UpdateMetrics`), float32 scalars.

    Args:
      value, advantages, returns, log_prob: float32 `[T, N]`.
      action: `[T, N]` int32 (Discrete) or `[T, N, A]` (Box, MultiDiscrete, MultiBinary).
      num_actions: with it (Discrete only), also `action_frac/<i>` for i < num_actions.
      axis_name: average over the devices on this axis too (equal shard sizes), with one
        all-reduce (`collectives.all_gather_flat` of every device's means and per-dim
        action moments, merged alike on every device).
    """

    def mean(x: jax.Array) -> jax.Array:
        return jnp.mean(x.astype(jnp.float32))

    action = action.astype(jnp.float32)
    if action.ndim == 2:
        action = action[..., None]
    per_dim_mean = jax.vmap(mean, in_axes=-1)(action)
    per_dim_var = jax.vmap(mean, in_axes=-1)(jnp.square(action - per_dim_mean))
    if axis_name is not None:
        samples = (value, advantages, returns, log_prob)
        moments = (per_dim_mean, per_dim_var)
        return _merged_statistics(samples, action, moments, num_actions, axis_name)
    out = {
        "value_mean": mean(value),
        "advantage_mean": mean(advantages),
        "return_mean": mean(returns),
        "log_prob_mean": mean(log_prob),
        "action_mean": jnp.mean(per_dim_mean),
        "action_std": jnp.mean(jnp.sqrt(per_dim_var)),
    }
    if num_actions is not None:
        index = action[..., 0].astype(jnp.int32)
        for i in range(num_actions):
            out[f"action_frac/{i}"] = mean(index == i)
    return out


def _merged_statistics(
    samples: tuple[jax.Array, ...],
    action: jax.Array,
    moments: tuple[jax.Array, jax.Array],
    num_actions: int | None,
    axis_name: str,
) -> dict[str, jax.Array]:
    """`rollout_statistics` over every device of `axis_name`: this device's means of
    `samples` (value, advantages, returns, log_prob `[T, N]`), `action` (`[T, N, A]`
    float32) and its per-dim `moments` (mean, var `[A]`), gathered in one all-reduce and
    merged (the action variance by Chan et al.'s parallel formula)."""
    names = ("value_mean", "advantage_mean", "return_mean", "log_prob_mean")
    local = {name: jnp.mean(x.astype(jnp.float32)) for name, x in zip(names, samples, strict=True)}
    if num_actions is not None:
        index = action[..., 0].astype(jnp.int32)
        for i in range(num_actions):
            local[f"action_frac/{i}"] = jnp.mean((index == i).astype(jnp.float32))
    gathered, dim_means, dim_vars = all_gather_flat((local, *moments), axis_name)  # [D, ...]
    means = {name: jnp.mean(x, axis=0) for name, x in gathered.items()}
    dim_mean = jnp.mean(dim_means, axis=0)
    dim_var = jnp.mean(dim_vars, axis=0) + jnp.mean(jnp.square(dim_means - dim_mean), axis=0)
    out = {name: means.pop(name) for name in names}
    out["action_mean"] = jnp.mean(dim_mean)
    out["action_std"] = jnp.mean(jnp.sqrt(dim_var))
    return {**out, **means}
