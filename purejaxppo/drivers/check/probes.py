"""The probe battery of `purejaxppo check`: which probe env isolates which part of PPO,
its measurement (`measures`) and the passing range.

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

from purejaxppo.drivers.check.measures import (
    Trained,
    best_action_prob,
    continuous_applies,
    discount_error,
    entropy_kept,
    final_return,
    gae_applies,
    lambda_error,
    mask_applies,
    matched_action_prob,
    memory_applies,
    normalisation_applies,
    policy_clip_applies,
    policy_rise,
    real_end_error,
    replay_log_ratio,
    time_limit_error,
    time_limit_lambda_error,
    value_clip_applies,
    value_error_of_observation,
    value_move,
    value_of_constant,
    worst_update_return,
)
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
    ProbeLambdaTimeLimit,
    ProbeMaskedAction,
    ProbeScaledObs,
    ProbeTruncation,
    ProbeTrustRegion,
    ProbeTrustRegionNoOffset,
)
from purejaxppo.envs.probes.parts import ProbeBattery

__all__ = ["PROBES", "Probe", "Trained", "probes_for"]


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
      for_config: `(probe, config) -> Probe`, the row as it runs for a config (another
        env, range or note); None: as written.
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
    for_config: Callable[[Probe, Any], Probe] | None = None

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


#: One update of 128 minibatch steps at a learning rate that, unclipped, carries the
#: policy and the value well past one clip (`ProbeTrustRegion`).
TRUST_REGION = {
    "normalize_rewards": False,
    "anneal_lr": False,
    "learning_rate": 0.001,
    "update_epochs": 32,
    "num_minibatches": 4,
    "critic_pretrain_steps": 0,
}
#: The widest hidden layer `TRUST_REGION`'s learning rate is set for, and the fewest
#: hidden layers (or a recurrent core) whose rate `_trust_region_for` scales down beyond
#: that width.
TRUST_WIDTH, TRUST_DEPTH = 64, 3
_TRUST_NOTE = "one update: 32 epochs x 4 minibatches at learning rate 0.001, not annealed"


#: Why the trust-region rows train without observation normalisation.
_NO_OBS_NORM = (
    "observation normalisation off: the bandit's observation is constant, and a constant "
    "normalises to 0 (a ReLU network's padding of 1 with it)"
)


def _trust_region_for(probe: Probe, config: Any) -> Probe:
    """A trust-region row for `config`'s network: the learning rate `TRUST_REGION` sets,
    times ``TRUST_WIDTH / width`` for `TRUST_DEPTH` or more hidden layers or a recurrent
    core, the widest layer (the core's `recurrent_size` or `transformer_dim` included)
    wider than `TRUST_WIDTH`; without observation normalisation (`_NO_OBS_NORM`:
    normalised, `configs/navix_empty_6x6.yaml`'s ReLU network read 0.38 and 0.36 clips
    clean, failing).

    Each Adam step moves every parameter by about the learning rate whatever its
    gradient; through three wide layers the steps compound, and the momentum that carries
    the policy on after the clip stops its gradient carries it too far: at 0.001,
    `configs/craftax_classic.yaml` (512 x 3, tanh) overshot to P = 0.997 with the clip
    working (4.97 clips, a broken clip's 5.0) and V 19.5 clips (above the top). At
    0.001 x 64 / 512 it reads 2.1 and 2.5 clips clean, and the clip bugs 5.0 (both policy
    ones), -0.3 (advantages unnormalised) and V 132. A recurrent core compounds the same
    way: `configs/jaxmarl_smax_3m_mappo_gru.yaml` (ReLU 128, GRU 128) read 3.31 to 3.57
    clips clean at 0.001 (top 3.5), 2.26 to 2.40 at 0.0005. Two feed-forward layers keep
    0.001: scaled, `configs/mujoco_humanoid.yaml` (256 x 2) read 2.2 clips with a broken
    clip, a pass.
    """
    if config.normalize_observations:
        probe = probe._replace(
            overrides={**probe.overrides, "normalize_observations": False},
            note=f"{probe.note}; {_NO_OBS_NORM}",
        )
    core = {None: 0, "transformer": config.transformer_dim}.get(
        config.recurrent, config.recurrent_size
    )
    width = max(*config.hidden_sizes, core, TRUST_WIDTH)
    deep = len(config.hidden_sizes) >= TRUST_DEPTH or config.recurrent is not None
    if width <= TRUST_WIDTH or not deep:
        return probe
    rate = TRUST_REGION["learning_rate"] * TRUST_WIDTH / width
    return probe._replace(
        overrides={**probe.overrides, "learning_rate": rate},
        note=probe.note.replace(
            "learning rate 0.001",
            f"learning rate {rate:g} (0.001 x {TRUST_WIDTH} / {width}, the widest layer)",
        ),
    )


_NO_REWARD_NORM = "reward normalisation off here (values are read in reward units)"

#: What the two GAE lambda rows share: read at the first update with gamma 1, where the
#: advantages are powers of lambda; GAE only (the range: the sweeps of the check guide).
_LAMBDA_ROWS: dict[str, Any] = {
    "low": -0.005,
    "high": 0.005,
    "gamma": 1.0,
    "overrides": {"normalize_rewards": False},
    "applies": gae_applies,
    "note": "gamma 1 (the advantages are then powers of lambda)",
}


def _policy_clip_isolates(env: type[ProbeTrustRegion]) -> str:
    """What the policy clip row isolates on the bandit `env`, its two rewards read from
    the env's `OFFSET` and `PAY`."""
    low, high = env.OFFSET, env.OFFSET + env.PAY
    return (
        "rise of P(paid action) over the first policy's 0.5 in one long update, in clips: "
        f"(P / 0.5 - 1) / clip_coef (rewards {low:g} and {high:g})"
    )


def _policy_clip_for(probe: Probe, config: Any) -> Probe:
    """The policy clip row for `config`.

    A broken clip runs to ``P = 1``, that is ``1 / clip_coef`` clips; an unbroken one
    overshoots the clip, as Adam's momentum carries the policy on after its gradient
    stops: about 2 clips at clip_coef 0.1 to 0.2, 1.5 at 0.5. The top is
    ``min(1 + 0.5 / clip_coef, 0.9 / clip_coef)``: halfway between the overshoot and the
    ceiling up to clip 0.4 (3.5 at 0.2, 6 at 0.1), then ``P = 0.95`` (1.8 at 0.5). Above
    `measures.MAX_CLIP_COEF` (0.5), and on a ReLU network, the row skips
    (`policy_clip_applies`). A network of `TRUST_DEPTH` or more hidden layers wider than
    `TRUST_WIDTH` trains at a learning rate scaled to its width (`_trust_region_for`).

    Without `norm_adv` the bandit is the offset-free one (`ProbeTrustRegionNoOffset`,
    rewards 0 and 2), whose advantages need no normalisation. So it is for a torso shared
    by actor and critic without `clip_vloss`: there the critic's unclipped fit to the
    offset's values (about 51) rescales the shared features and carries P past the clip
    (4.2 clips on `configs/pendulum_novel_gru.yaml`, 2.0 on the offset-free bandit).

    Clean seeds read 1.4 to 2.7 clips at clip 0.1 to 0.2 and 1.46 to 1.50 at 0.5; the
    clip bugs 4.9 to 10 at 0.1 to 0.2 and 2.0 at 0.5 (`benchmarks/results/
    check-thresholds-*`, `tools.mutants`).
    """
    clip = config.clip_coef
    probe = _trust_region_for(probe._replace(high=min(1.0 + 0.5 / clip, 0.9 / clip)), config)
    if not config.norm_adv:
        why = "norm_adv is off"
    elif config.shares_encoder and not config.clip_vloss:
        why = "the torso is shared and clip_vloss is off (advantage normalisation unread)"
    else:
        return probe
    return probe._replace(
        env=ProbeTrustRegionNoOffset,
        isolates=_policy_clip_isolates(ProbeTrustRegionNoOffset),
        points_to="the clipped surrogate (the pessimistic bound: the min of the clipped and "
        "unclipped objectives; the ratio's clip range)",
        note=f"{probe.note}; {why}, so the bandit pays 0 and 2 (no offset)",
    )


PROBES: tuple[Probe, ...] = (
    Probe(
        row="value",
        env=Probe1,
        isolates="fits a constant: V([0]) = 1 (probe 1)",
        points_to="the critic and its value target (value loss, returns = advantages + values)",
        measure=value_of_constant,
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
        measure=value_error_of_observation,
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
        measure=discount_error,
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
        measure=lambda_error,
        **_LAMBDA_ROWS,
    ),
    Probe(
        row="GAE lambda at a time limit",
        env=ProbeLambdaTimeLimit,
        isolates="lambda the first update's advantages imply minus gae_lambda when a time "
        f"limit cuts every {ProbeLambdaTimeLimit.LENGTH} steps (reward "
        f"{ProbeLambdaTimeLimit.REWARD:g} on the cut step), "
        "one observation, gamma 1",
        points_to="GAE: a time limit stops the lambda recursion "
        "(A_t = delta_t + gamma lambda (1 - done_t) A_t+1, done = terminated or truncated)",
        measure=time_limit_lambda_error,
        **_LAMBDA_ROWS,
    ),
    Probe(
        row="advantage sign",
        env=Probe4,
        isolates="P(rewarded action) (probe 4)",
        points_to="the policy-gradient sign (the surrogate's advantage term)",
        measure=best_action_prob,
        low=0.9,
        high=math.inf,
        overrides={"normalize_rewards": False},
    ),
    Probe(
        row="observation -> action",
        env=Probe5,
        isolates="min P(action = obs) (probe 5)",
        points_to="obs/action alignment: stored actions, log-probs and observations out of step",
        measure=matched_action_prob,
        low=0.9,
        high=math.inf,
        overrides={"normalize_rewards": False},
    ),
    Probe(
        row="time limit bootstraps",
        env=ProbeTruncation,
        isolates="|V - V*| / V* of an endless task cut by a time limit (V* = 1 / (1 - gamma))",
        points_to="truncation bootstrapping: a time limit must bootstrap from V(final_observation)",
        measure=time_limit_error,
        low=-math.inf,
        high=0.15,
        gamma=0.85,
        overrides={"normalize_rewards": False},
        note="gamma 0.85",
        # at 0.8 a time limit that bootstraps from the NEXT episode's reset observation
        # (half the time the ending task's V([1, 0]) = 2.95 against V* = 5) read 0.156 to
        # 0.170 on configs/cartpole.yaml, barely past the top; at 0.85 (V* = 6.67 against
        # 3.19) 0.250 to 0.268 (8 seeds each). Higher is slower to learn: at 0.9
        # configs/atari.yaml read 0.103 to 0.154 clean (20 seeds), at 0.85 0.015 to 0.031
    ),
    Probe(
        row="real end stops",
        env=ProbeTruncation,
        isolates="|V - V*| / V* of a task that terminates (V* = (1 - gamma^4) / (1 - gamma))",
        points_to="termination: a real end must not bootstrap (terminated, not truncated)",
        measure=real_end_error,
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
        measure=entropy_kept,
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
        measure=final_return,
        low=0.85,
        high=math.inf,
        updates=200,
        num_steps=20,
        applies=memory_applies,
    ),
    Probe(
        row="recurrent replay",
        env=Probe7,
        isolates="root-mean-square log-ratio, sqrt(2 approx_kl), of an update that reads its "
        "rollout once (one epoch, one minibatch) at the parameters that collected it: 0 when "
        "the update's log-probs are the rollout's (the largest over 30 updates)",
        points_to="the stored recurrent state: the update must re-run each sequence from "
        "the state that entered its first step",
        measure=replay_log_ratio,
        low=-math.inf,
        high=1e-4,
        updates=30,
        num_steps=7,
        overrides={"update_epochs": 1, "num_minibatches": 1},
        applies=memory_applies,
        note="one epoch of one minibatch per update; 7-step rollouts of 5-step episodes, so "
        "most sequences start mid-episode",
    ),
    Probe(
        row="action mask",
        env=ProbeMaskedAction,
        isolates="worst update's mean return (a masked action costs -1000)",
        points_to="the action mask (masked logits when sampling and in the loss)",
        measure=worst_update_return,
        low=0.0,
        high=math.inf,
        updates=40,
        applies=mask_applies,
    ),
    Probe(
        row="continuous bound",
        env=ProbeContinuousBound,
        isolates="return when the best action lies at the Box's bound (chance 0)",
        points_to="the continuous log-prob: stored for the sampled action, not the clipped one",
        measure=final_return,
        low=0.8,
        high=math.inf,
        applies=continuous_applies,
    ),
    Probe(
        row="policy clip",
        env=ProbeTrustRegion,
        isolates=_policy_clip_isolates(ProbeTrustRegion),
        points_to="the clipped surrogate (the pessimistic bound: the min of the clipped and "
        "unclipped objectives; the ratio's clip range) and advantage normalisation (about "
        "0 when the advantages keep their common offset)",
        measure=policy_rise,
        low=0.5,
        high=3.5,  # at clip_coef 0.2: 1 + 0.5 / clip_coef (`_policy_clip_for`)
        updates=1,
        overrides=TRUST_REGION,
        note=_TRUST_NOTE,
        applies=policy_clip_applies,
        for_config=_policy_clip_for,
    ),
    Probe(
        row="value clip",
        env=ProbeTrustRegion,
        isolates="move of V([0]) from the rollout's values in one long update, in clips "
        "(its target is about 51)",
        points_to="the clipped value loss: clipped around the rollout's V_old, the larger "
        "of the two losses",
        measure=value_move,
        low=0.5,
        high=10.0,
        updates=1,
        overrides=TRUST_REGION,
        applies=value_clip_applies,
        note=_TRUST_NOTE,
        for_config=_trust_region_for,
    ),
    Probe(
        row="scaled observations",
        env=ProbeScaledObs,
        isolates=f"return of probe 5 seen as obs {ProbeScaledObs.OFFSET:g} + "
        f"{ProbeScaledObs.SCALE:g} * cue",
        points_to="observation normalisation: its statistics, and the same normalisation "
        "when acting and learning",
        measure=final_return,
        low=0.9,
        high=math.inf,
        applies=normalisation_applies,
    ),
)
"""The battery, in the order of the report."""


def probes_for(config: Any) -> tuple[Probe, ...]:
    """`PROBES` as they run for `config` (each row's `for_config` applied), in order."""
    return tuple(p.for_config(p, config) if p.for_config else p for p in PROBES)
