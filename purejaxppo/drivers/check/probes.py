"""The probe battery of `purejaxppo check`: which probe env isolates which part of PPO,
how a trained probe is measured, and the passing range.

Each probe follows Andy Jones, "Debugging RL, Without the Agonizing Pain"
(andyljones.com/posts/rl-debugging.html), as the decision-transformer-interpretability
PPO does for probes 1-5: the smallest env whose right answer is known in
closed form, so a failing row names the broken part. The ranges come from 20 clean seeds
per row on three configs (`benchmarks/check_thresholds.py`,
`benchmarks/results/check-thresholds-*.csv`); each range leaves a margin beyond the worst
clean seed that is stated beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.envs.probes import (
    Probe1,
    Probe2,
    Probe3,
    Probe4,
    Probe5,
    Probe7,
    ProbeContinuousBound,
    ProbeEqualReward,
    ProbeLambda,
    ProbeMaskedAction,
    ProbeScaledObs,
    ProbeTruncation,
    ProbeTrustRegion,
)
from purejaxppo.envs.probes.parts import ProbeBattery

__all__ = ["PROBES", "Probe", "Trained"]


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
    """

    networks: Any
    params: Any
    metrics: dict[str, np.ndarray]
    config: Any
    gamma: float
    obs_width: int


class Probe(NamedTuple):
    """One row of the battery.

    Attributes:
      row: the row's name.
      env: the probe env's class (`purejaxppo.envs.probes`); the probes of
        `ProbeBattery.PROBES` train together as the lanes of one program.
      isolates: what the probe isolates.
      points_to: the part of PPO a failure points to.
      measure: `Trained -> float32 [K]`, one value per seed.
      low, high: the row passes when the median over seeds lies in `[low, high]`.
      updates: the probe's number of PPO updates (the battery's: `BATTERY_UPDATES`).
      num_steps: steps per env per update (16 envs).
      gamma: the discount the probe trains with (None: the config's), the reason in
        `note`.
      ent_coef: the entropy coefficient the probe trains with (None: the config's).
      overrides: static config fields the probe sets.
      applies: `(config, spaces) -> None` when the probe applies, else the reason to skip.
      note: how the probe adapts the config (shown under the table).
    """

    row: str
    env: type
    isolates: str
    points_to: str
    measure: Callable[[Trained], jax.Array]
    low: float
    high: float
    updates: int = 100
    num_steps: int = 16
    gamma: float | None = None
    ent_coef: float | None = None
    overrides: dict[str, Any] = {}
    applies: Callable[[Any, Any], str | None] = lambda config, spaces: None
    note: str = ""

    @property
    def in_battery(self) -> bool:
        """Whether the probe trains in the shared program (`ProbeBattery`)."""
        return self.env in ProbeBattery.PROBES

    @property
    def expected(self) -> str:
        """The passing range as text."""
        if math.isinf(self.high):
            return f">= {self.low:g}"
        if math.isinf(self.low) or self.low <= -1e9:
            return f"<= {self.high:g}"
        return f"[{self.low:g}, {self.high:g}]"


def episode_outputs(trained: Trained, obs: jax.Array) -> tuple[Any, jax.Array]:
    """The policy and value along one episode's observations `obs [T, ...]`, per seed:
    `(dist with batch [K, T], values float32 [K, T])`. The state starts at
    `initial_state` and steps through the episode (`Networks.unroll`), so a recurrent
    policy is read as it acts."""
    networks = trained.networks
    obs = jnp.pad(obs, ((0, 0), (0, trained.obs_width - obs.shape[1])))
    resets = jnp.arange(obs.shape[0])[:, None] == 0  # [T, 1]

    def one(params: Any) -> tuple[Any, jax.Array]:
        _, dist, value = networks.unroll(params, networks.initial_state(1), obs[:, None], resets)
        return dist, value[:, 0]

    dist, value = jax.vmap(one)(trained.params)
    return dist, value


def _probs(trained: Trained, obs: jax.Array) -> jax.Array:
    """Action probabilities `[K, T, A]` along one episode's observations."""
    dist, _ = episode_outputs(trained, obs)
    return dist.probs[:, :, 0]


def _values(trained: Trained, obs: jax.Array) -> jax.Array:
    """Values `[K, T]` along one episode's observations."""
    return episode_outputs(trained, obs)[1]


def _final(trained: Trained, name: str, fraction: float = 0.1) -> jax.Array:
    """The mean of `metrics[name]` over the last `fraction` of updates, per seed `[K]`."""
    values = np.asarray(trained.metrics[name])
    last = max(1, int(values.shape[1] * fraction))
    with np.errstate(all="ignore"):
        return jnp.asarray(np.nanmean(values[:, -last:], axis=1))


def _value_of_constant(trained: Trained) -> jax.Array:
    return _values(trained, jnp.zeros((1, 1)))[:, 0]


def _value_error_of_observation(trained: Trained) -> jax.Array:
    low = _values(trained, jnp.full((1, 1), -1.0))[:, 0]
    high = _values(trained, jnp.full((1, 1), 1.0))[:, 0]
    return jnp.maximum(jnp.abs(low + 1.0), jnp.abs(high - 1.0))


def _discount_error(trained: Trained) -> jax.Array:
    gamma = trained.gamma
    values = _values(trained, jnp.array([[0.0], [1.0]]))
    return jnp.maximum(jnp.abs(values[:, 0] - gamma), jnp.abs(values[:, 1] - 1.0))


def _best_action_prob(trained: Trained) -> jax.Array:
    return _probs(trained, jnp.zeros((1, 1)))[:, 0, 1]


def _matched_action_prob(trained: Trained) -> jax.Array:
    zero = _probs(trained, jnp.zeros((1, 1)))[:, 0, 0]
    one = _probs(trained, jnp.ones((1, 1)))[:, 0, 1]
    return jnp.minimum(zero, one)


def _time_limit_error(trained: Trained) -> jax.Array:
    endless, _ = ProbeTruncation.values(trained.gamma)
    value = _values(trained, jnp.zeros((1, 2)))[:, 0]
    return jnp.abs(value - endless) / endless


def _real_end_error(trained: Trained) -> jax.Array:
    _, ending = ProbeTruncation.values(trained.gamma)
    value = _values(trained, jnp.array([[1.0, 0.0]]))[:, 0]
    return jnp.abs(value - ending) / ending


def _entropy_kept(trained: Trained) -> jax.Array:
    return _final(trained, "entropy") / math.log(ProbeEqualReward.N_ACTIONS)


def _final_return(trained: Trained) -> jax.Array:
    return _final(trained, "episode_return")


def _worst_update_return(trained: Trained) -> jax.Array:
    with np.errstate(all="ignore"):
        return jnp.asarray(np.nanmin(np.asarray(trained.metrics["episode_return"]), axis=1))


def _policy_rise(trained: Trained) -> jax.Array:
    """How far one update raised P(paid action) over the first policy's 0.5, in clips."""
    prob = _probs(trained, jnp.zeros((1, 1)))[:, 0, 1]
    return (prob / 0.5 - 1.0) / trained.config.clip_coef


def _value_move(trained: Trained) -> jax.Array:
    """How far one update moved V([0]) from the rollout's values, in clips."""
    before = jnp.asarray(np.asarray(trained.metrics["value_mean"])[:, 0])
    return (_value_of_constant(trained) - before) / trained.config.clip_coef


def _implied_lambda(mean_advantage: np.ndarray, length: int) -> np.ndarray:
    """The lambda whose `(1 - lambda^L) / (L (1 - lambda))` equals each ratio (bisection on
    [0, 2]; the map increases with lambda)."""
    low, high = np.zeros_like(mean_advantage), np.full_like(mean_advantage, 2.0)
    powers = np.arange(length)
    for _ in range(60):
        mid = (low + high) / 2
        below = (mid[:, None] ** powers).mean(axis=1) < mean_advantage
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    return (low + high) / 2


def _lambda_error(trained: Trained) -> jax.Array:
    """The lambda the first update's advantages imply minus the config's `gae_lambda`."""
    advantage = np.asarray(trained.metrics["advantage_mean"], np.float64)[:, 0]
    value = np.asarray(trained.metrics["value_mean"], np.float64)[:, 0]
    with np.errstate(all="ignore"):
        implied = _implied_lambda(advantage / (1.0 - value), ProbeLambda.LENGTH)
    return jnp.asarray(implied - trained.config.gae_lambda)


def _gae_applies(config: Any, spaces: Any) -> str | None:
    if config.advantage_estimator != "gae":
        return f"advantage_estimator is {config.advantage_estimator!r}: no lambda"
    return None


def _memory_applies(config: Any, spaces: Any) -> str | None:
    if config.recurrent is None:
        return "feed-forward policy (recurrent: null): the memory probe needs a core"
    return None


def _mask_applies(config: Any, spaces: Any) -> str | None:
    if not spaces.masked:
        return "the env has no action mask"
    return None


def _continuous_applies(config: Any, spaces: Any) -> str | None:
    if not spaces.continuous:
        return "the env's actions are not continuous (Box)"
    return None


def _normalisation_applies(config: Any, spaces: Any) -> str | None:
    if not config.normalize_observations:
        return "normalize_observations is off"
    return None


def _adv_norm_applies(config: Any, spaces: Any) -> str | None:
    if not config.norm_adv:
        return (
            "norm_adv is off: the probe's advantages share an offset of about 50 that only "
            "normalisation removes"
        )
    return None


def _value_clip_applies(config: Any, spaces: Any) -> str | None:
    if not config.clip_vloss:
        return "clip_vloss is off: the value loss is not clipped"
    return None


#: One update of 64 minibatch steps at a learning rate that, unclipped, carries the
#: policy and the value well past one clip (`ProbeTrustRegion`).
TRUST_REGION = {
    "normalize_rewards": False,
    "anneal_lr": False,
    "learning_rate": 0.001,
    "update_epochs": 16,
    "num_minibatches": 4,
    "critic_pretrain_steps": 0,
}
_TRUST_NOTE = "one update: 16 epochs x 4 minibatches at learning rate 0.001, not annealed"

_NO_REWARD_NORM = "reward normalisation off here (values are read in reward units)"

PROBES: tuple[Probe, ...] = (
    Probe(
        row="value",
        env=Probe1,
        isolates="fits a constant: V([0]) = 1 (probe 1)",
        points_to="the critic and its value target (value loss, returns = advantages + values)",
        measure=_value_of_constant,
        low=0.85,
        high=1.15,
        overrides={"normalize_rewards": False},
        note=_NO_REWARD_NORM,
    ),
    Probe(
        row="observation -> value",
        env=Probe2,
        isolates="max |V(obs) - V*| over obs = -1, +1 (probe 2)",
        points_to="the critic's inputs: observations and value targets out of step",
        measure=_value_error_of_observation,
        low=-math.inf,
        high=0.2,
        overrides={"normalize_rewards": False},
        note=_NO_REWARD_NORM,
    ),
    Probe(
        row="discount",
        env=Probe3,
        isolates="max |V - V*| of V([0]) = gamma, V([1]) = 1 (probe 3, gamma 0.5)",
        points_to="the discount inside GAE / the returns (gamma applied to V(s'))",
        measure=_discount_error,
        low=-math.inf,
        high=0.15,
        gamma=0.5,
        overrides={"normalize_rewards": False},
        note="gamma 0.5 (a missing discount is then 0.5 off)",
    ),
    Probe(
        row="GAE lambda",
        env=ProbeLambda,
        isolates="lambda the first update's advantages imply minus gae_lambda: reward 1 "
        f"at the end of {ProbeLambda.LENGTH} steps, one observation, gamma 1",
        points_to="GAE: lambda in the advantage recursion (A_t = delta_t + gamma lambda A_t+1)",
        measure=_lambda_error,
        low=-0.005,
        high=0.005,
        gamma=1.0,
        overrides={"normalize_rewards": False},
        applies=_gae_applies,
        note="gamma 1 (the advantages are then powers of lambda)",
    ),
    Probe(
        row="advantage sign",
        env=Probe4,
        isolates="P(rewarded action) (probe 4)",
        points_to="the policy-gradient sign (the surrogate's advantage term)",
        measure=_best_action_prob,
        low=0.9,
        high=math.inf,
        overrides={"normalize_rewards": False},
    ),
    Probe(
        row="observation -> action",
        env=Probe5,
        isolates="min P(action = obs) (probe 5)",
        points_to="obs/action alignment: stored actions, log-probs and observations out of step",
        measure=_matched_action_prob,
        low=0.9,
        high=math.inf,
        overrides={"normalize_rewards": False},
    ),
    Probe(
        row="time limit bootstraps",
        env=ProbeTruncation,
        isolates="|V - V*| / V* of an endless task cut by a time limit (V* = 1 / (1 - gamma))",
        points_to="truncation bootstrapping: a time limit must bootstrap from V(final_observation)",
        measure=_time_limit_error,
        low=-math.inf,
        high=0.15,
        gamma=0.8,
        overrides={"normalize_rewards": False},
        note="gamma 0.8",
    ),
    Probe(
        row="real end stops",
        env=ProbeTruncation,
        isolates="|V - V*| / V* of a task that terminates (V* = (1 - gamma^4) / (1 - gamma))",
        points_to="termination: a real end must not bootstrap (terminated, not truncated)",
        measure=_real_end_error,
        low=-math.inf,
        high=0.15,
        gamma=0.8,
        overrides={"normalize_rewards": False},
        note="gamma 0.8",
    ),
    Probe(
        row="entropy bonus",
        env=ProbeEqualReward,
        isolates="entropy / log(4) when every action earns the same (ent_coef 0.5)",
        points_to="the entropy term (its sign and coefficient in the loss)",
        measure=_entropy_kept,
        low=0.9,
        high=math.inf,
        ent_coef=0.5,
        overrides={"normalize_rewards": False},
        note="ent_coef 0.5 (at the uniform policy the entropy's gradient is 0, so a small "
        "bonus of either sign leaves it there; a large one of the wrong sign collapses it)",
    ),
    Probe(
        row="memory",
        env=Probe7,
        isolates="return of recalling a cue 4 steps later (probe 7; chance 0.5)",
        points_to="the recurrent state: carried through the rollout, reset at episode "
        "starts, replayed in the update",
        measure=_final_return,
        low=0.85,
        high=math.inf,
        updates=200,
        num_steps=20,
        applies=_memory_applies,
    ),
    Probe(
        row="action mask",
        env=ProbeMaskedAction,
        isolates="worst update's mean return (a masked action costs -1000)",
        points_to="the action mask (masked logits when sampling and in the loss)",
        measure=_worst_update_return,
        low=0.0,
        high=math.inf,
        updates=40,
        applies=_mask_applies,
    ),
    Probe(
        row="continuous bound",
        env=ProbeContinuousBound,
        isolates="return when the best action lies at the Box's bound (chance 0)",
        points_to="the continuous log-prob: stored for the sampled action, not the clipped one",
        measure=_final_return,
        low=0.8,
        high=math.inf,
        applies=_continuous_applies,
    ),
    Probe(
        row="policy clip",
        env=ProbeTrustRegion,
        isolates="rise of P(paid action) over the first policy's 0.5 in one long update, "
        "in clips: (P / 0.5 - 1) / clip_coef (rewards 50 and 52)",
        points_to="the clipped surrogate (the pessimistic bound: the min of the clipped and "
        "unclipped objectives; the ratio's clip range) and advantage normalisation (about "
        "0 when the advantages keep their common offset)",
        measure=_policy_rise,
        low=0.5,
        high=3.0,
        updates=1,
        overrides=TRUST_REGION,
        applies=_adv_norm_applies,
        note=_TRUST_NOTE,
    ),
    Probe(
        row="value clip",
        env=ProbeTrustRegion,
        isolates="move of V([0]) from the rollout's values in one long update, in clips "
        "(its target is about 51)",
        points_to="the clipped value loss: clipped around the rollout's V_old, the larger "
        "of the two losses",
        measure=_value_move,
        low=0.5,
        high=8.0,
        updates=1,
        overrides=TRUST_REGION,
        applies=_value_clip_applies,
        note=_TRUST_NOTE,
    ),
    Probe(
        row="scaled observations",
        env=ProbeScaledObs,
        isolates=f"return of probe 5 seen as obs {ProbeScaledObs.OFFSET:g} + "
        f"{ProbeScaledObs.SCALE:g} * cue",
        points_to="observation normalisation: its statistics, and the same normalisation "
        "when acting and learning",
        measure=_final_return,
        low=0.9,
        high=math.inf,
        applies=_normalisation_applies,
    ),
)
"""The battery, in the order of the report."""
