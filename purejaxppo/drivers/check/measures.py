"""How `purejaxppo check` reads a trained probe: the measurements (`Trained -> [K]`, one
value per seed) and the predicates that say when a probe applies to a config. The rows
that use them, with their passing ranges, are `probes.PROBES`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.envs.probes import (
    ProbeEqualReward,
    ProbeLambda,
    ProbeLambdaTimeLimit,
    ProbeTruncation,
)

__all__ = [
    "Trained",
    "episode_outputs",
    "probs_along",
    "values_along",
    "final_mean",
    "value_of_constant",
    "value_error_of_observation",
    "discount_error",
    "best_action_prob",
    "matched_action_prob",
    "time_limit_error",
    "real_end_error",
    "entropy_kept",
    "final_return",
    "worst_update_return",
    "policy_rise",
    "value_move",
    "replay_log_ratio",
    "implied_lambda",
    "lambda_error",
    "time_limit_lambda_error",
    "gae_applies",
    "memory_applies",
    "mask_applies",
    "continuous_applies",
    "normalisation_applies",
    "policy_clip_applies",
    "value_clip_applies",
    "MAX_CLIP_COEF",
    "RELU_PAD",
    "battery_pad",
]


class Trained(NamedTuple):
    """A probe trained over K seeds, as the measurements read it.

    Attributes:
      networks: the probe run's `Networks`.
      params: the final parameters, leaves `[K, ...]`.
      metrics: `TrainOutput.metrics`, float32 `[K, U]` (U updates).
      config: the probe run's `PPOConfig`.
      gamma: the discount this probe trained with.
      obs_width: the width of the observations the networks take (the battery pads the
        probes' 1-d observations to 2).
      obs_pad: the value the padding holds (`battery_pad`).
    """

    networks: Any
    params: Any
    metrics: dict[str, np.ndarray]
    config: Any
    gamma: float
    obs_width: int
    obs_pad: float = 0.0


#: Why the battery pads a ReLU network's observations with 1 (`battery_pad`).
RELU_PAD = (
    "the 1-d probes' observations are padded with a constant 1, as a ReLU unit fed only "
    "[0.0] sits at relu(0) = 0 with no gradient"
)


def battery_pad(config: Any) -> float:
    """The value that pads the battery's 1-d observations to 2 for `config`, and that a
    blank probe trained alone (the trust-region bandit, `ProbeTrustRegion(pad=...)`)
    sets beside its [0.0] when it is not 0: 1 for a ReLU network, else 0.

    Probes 1 and 4, the equal-reward and the lambda probes observe [0.0]. A ReLU unit fed
    0 (biases start at 0) outputs 0 with gradient 0, so only the output biases learn,
    about one learning rate per Adam step: at `configs/atari.yaml`'s 2.5e-4 the value
    row read V = 0.19 (range 0.85 to 1.15) and the advantage sign row P = 0.33 (>= 0.9)
    on the clean code. A constant 1 beside the probe's observation feeds every layer.
    """
    return 1.0 if config.activation == "relu" else 0.0


def episode_outputs(trained: Trained, obs: jax.Array) -> tuple[Any, jax.Array]:
    """The policy and value along one episode's observations `obs [T, ...]`, per seed:
    `(dist with batch [K, T], values float32 [K, T])`. The state starts at
    `initial_state` and steps through the episode (`Networks.unroll`), so a recurrent
    policy is read as it acts."""
    networks = trained.networks
    pad = ((0, 0), (0, trained.obs_width - obs.shape[1]))
    obs = jnp.pad(obs, pad, constant_values=trained.obs_pad)
    resets = jnp.arange(obs.shape[0])[:, None] == 0  # [T, 1]

    def one(params: Any) -> tuple[Any, jax.Array]:
        _, dist, value = networks.unroll(params, networks.initial_state(1), obs[:, None], resets)
        return dist, value[:, 0]

    dist, value = jax.vmap(one)(trained.params)
    return dist, value


def probs_along(trained: Trained, obs: jax.Array) -> jax.Array:
    """Action probabilities `[K, T, A]` along one episode's observations."""
    dist, _ = episode_outputs(trained, obs)
    return dist.probs[:, :, 0]


def values_along(trained: Trained, obs: jax.Array) -> jax.Array:
    """Values `[K, T]` along one episode's observations."""
    return episode_outputs(trained, obs)[1]


def final_mean(trained: Trained, name: str, fraction: float = 0.1) -> jax.Array:
    """The mean of `metrics[name]` over the last `fraction` of updates, per seed `[K]`."""
    values = np.asarray(trained.metrics[name])
    last = max(1, int(values.shape[1] * fraction))
    with np.errstate(all="ignore"):
        return jnp.asarray(np.nanmean(values[:, -last:], axis=1))


def value_of_constant(trained: Trained) -> jax.Array:
    """V([0]) per seed `[K]` (probe 1: 1)."""
    return values_along(trained, jnp.zeros((1, 1)))[:, 0]


def value_error_of_observation(trained: Trained) -> jax.Array:
    """max |V(obs) - obs| over obs = -1, +1, per seed `[K]` (probe 2)."""
    low = values_along(trained, jnp.full((1, 1), -1.0))[:, 0]
    high = values_along(trained, jnp.full((1, 1), 1.0))[:, 0]
    return jnp.maximum(jnp.abs(low + 1.0), jnp.abs(high - 1.0))


def discount_error(trained: Trained) -> jax.Array:
    """max |V - V*| of V([0]) = gamma and V([1]) = 1, per seed `[K]` (probe 3)."""
    gamma = trained.gamma
    values = values_along(trained, jnp.array([[0.0], [1.0]]))
    return jnp.maximum(jnp.abs(values[:, 0] - gamma), jnp.abs(values[:, 1] - 1.0))


def best_action_prob(trained: Trained) -> jax.Array:
    """P(action 1 | [0]), the rewarded action, per seed `[K]` (probe 4)."""
    return probs_along(trained, jnp.zeros((1, 1)))[:, 0, 1]


def matched_action_prob(trained: Trained) -> jax.Array:
    """min over obs 0, 1 of P(action = obs), per seed `[K]` (probe 5)."""
    zero = probs_along(trained, jnp.zeros((1, 1)))[:, 0, 0]
    one = probs_along(trained, jnp.ones((1, 1)))[:, 0, 1]
    return jnp.minimum(zero, one)


def time_limit_error(trained: Trained) -> jax.Array:
    """|V - V*| / V* of the endless task cut by a time limit, per seed `[K]`."""
    endless, _ = ProbeTruncation.values(trained.gamma)
    value = values_along(trained, jnp.zeros((1, 2)))[:, 0]
    return jnp.abs(value - endless) / endless


def real_end_error(trained: Trained) -> jax.Array:
    """|V - V*| / V* of the task that really ends, per seed `[K]`."""
    _, ending = ProbeTruncation.values(trained.gamma)
    value = values_along(trained, jnp.array([[1.0, 0.0]]))[:, 0]
    return jnp.abs(value - ending) / ending


def entropy_kept(trained: Trained) -> jax.Array:
    """The last updates' entropy over log(4), per seed `[K]`."""
    return final_mean(trained, "entropy") / math.log(ProbeEqualReward.N_ACTIONS)


def final_return(trained: Trained) -> jax.Array:
    """The mean episode return of the last 10% of updates, per seed `[K]`."""
    return final_mean(trained, "episode_return")


def worst_update_return(trained: Trained) -> jax.Array:
    """The lowest update's mean episode return, per seed `[K]`."""
    with np.errstate(all="ignore"):
        return jnp.asarray(np.nanmin(np.asarray(trained.metrics["episode_return"]), axis=1))


def policy_rise(trained: Trained) -> jax.Array:
    """How far one update raised P(paid action) over the first policy's 0.5, in clips."""
    prob = probs_along(trained, jnp.zeros((1, 1)))[:, 0, 1]
    return (prob / 0.5 - 1.0) / trained.config.clip_coef


def value_move(trained: Trained) -> jax.Array:
    """How far one update moved V([0]) from the rollout's values, in clips."""
    before = jnp.asarray(np.asarray(trained.metrics["value_mean"])[:, 0])
    return (value_of_constant(trained) - before) / trained.config.clip_coef


def replay_log_ratio(trained: Trained) -> jax.Array:
    """The root-mean-square log-ratio of the update that strays most, `sqrt(2 approx_kl)`
    (CleanRL's `approx_kl` is about half the mean squared log-ratio), per seed `[K]`.
    With one epoch of one minibatch the update's only loss reads the rollout at the
    parameters that collected it, so its log-probs must equal the rollout's: 0 up to float
    rounding."""
    kl = np.asarray(trained.metrics["approx_kl"], np.float64)
    return jnp.asarray(np.sqrt(2.0 * np.maximum(kl.max(axis=1), 0.0)))


def implied_lambda(mean_advantage: np.ndarray, length: int) -> np.ndarray:
    """The lambda whose `(1 - lambda^L) / (L (1 - lambda))` equals each ratio.

    Args:
      mean_advantage: float64 `[K]`, one ratio (mean advantage over `1 - V`) per seed.
      length: `L`, the probe's episode length in steps.

    Returns:
      float64 `[K]`: the lambdas, by 60 bisection steps on `[0, 2]` (the map increases
      with lambda, from `1 / L` at 0). A ratio outside the map's range on `[0, 2]` gives
      the nearer end, 0 or 2; a NaN ratio gives 0. The row's range then fails it.
    """
    low, high = np.zeros_like(mean_advantage), np.full_like(mean_advantage, 2.0)
    powers = np.arange(length)
    for _ in range(60):
        mid = (low + high) / 2
        below = (mid[:, None] ** powers).mean(axis=1) < mean_advantage
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    return (low + high) / 2


def lambda_error(trained: Trained) -> jax.Array:
    """The lambda the first update's advantages imply minus the config's `gae_lambda`."""
    advantage = np.asarray(trained.metrics["advantage_mean"], np.float64)[:, 0]
    value = np.asarray(trained.metrics["value_mean"], np.float64)[:, 0]
    with np.errstate(all="ignore"):
        implied = implied_lambda(advantage / (1.0 - value), ProbeLambda.LENGTH)
    return jnp.asarray(implied - trained.config.gae_lambda)


def time_limit_lambda_error(trained: Trained) -> jax.Array:
    """The lambda the first update's advantages imply on `ProbeLambdaTimeLimit` minus the
    config's `gae_lambda`, per seed `[K]`: the cut step's TD error is the probe's
    `REWARD` (it bootstraps from the same V as every step's), so the ratio is the mean
    advantage over `REWARD`."""
    advantage = np.asarray(trained.metrics["advantage_mean"], np.float64)[:, 0]
    ratio = advantage / ProbeLambdaTimeLimit.REWARD
    with np.errstate(all="ignore"):
        implied = implied_lambda(ratio, ProbeLambdaTimeLimit.LENGTH)
    return jnp.asarray(implied - trained.config.gae_lambda)


def gae_applies(config: Any, spaces: Any) -> str | None:
    """None with GAE, else why the lambda row skips."""
    if config.advantage_estimator != "gae":
        return f"advantage_estimator is {config.advantage_estimator!r}: no lambda"
    return None


def memory_applies(config: Any, spaces: Any) -> str | None:
    """None with a recurrent core or a transformer, else why the memory probe skips."""
    if config.recurrent is None:
        return "feed-forward policy (recurrent: null): the memory probe needs a core"
    return None


def mask_applies(config: Any, spaces: Any) -> str | None:
    """None when the env has an action mask, else why the mask probe skips."""
    if not spaces.masked:
        return "the env has no action mask"
    return None


def continuous_applies(config: Any, spaces: Any) -> str | None:
    """None with Box actions, else why the bound probe skips."""
    if not spaces.continuous:
        return "the env's actions are not continuous (Box)"
    return None


def normalisation_applies(config: Any, spaces: Any) -> str | None:
    """None with observation normalisation, else why its probe skips."""
    if not config.normalize_observations:
        return "normalize_observations is off"
    return None


#: The largest clip_coef the policy clip row reads. Above it an unbroken clip lets P(the
#: paid action) reach about 0.95 (0.92 at 0.6, 0.98 at 0.8 on CartPole's config), next
#: to a broken clip's 1: the row could not tell them apart.
MAX_CLIP_COEF = 0.5


def policy_clip_applies(config: Any, spaces: Any) -> str | None:
    """None with clip_coef <= `MAX_CLIP_COEF`, else why the policy clip row skips."""
    if config.clip_coef > MAX_CLIP_COEF:
        return (
            f"clip_coef {config.clip_coef:g} > {MAX_CLIP_COEF:g}: an unbroken clip lets "
            "P(the paid action) run near 1, where a broken one goes"
        )
    return None


def value_clip_applies(config: Any, spaces: Any) -> str | None:
    """None with `clip_vloss`, else why the value clip row skips."""
    if not config.clip_vloss:
        return "clip_vloss is off: the value loss is not clipped"
    return None
