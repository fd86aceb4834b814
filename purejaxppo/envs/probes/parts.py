"""Probes for the parts of PPO that probes 1-7 do not isolate: truncation bootstrapping,
the entropy term, observation normalisation and the continuous log-prob at a bound.

Each one follows Andy Jones's recipe ("Debugging RL, Without the Agonizing Pain",
andyljones.com/posts/rl-debugging.html): the smallest env whose right answer is known in
closed form and differs from the answer a named bug gives. `purejaxppo.check` runs them
with a user's PPO settings. See `purejaxppo.envs.probes` for the shared conventions.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

from purejaxppo.envs.probes.base import EnvParams, EnvState, StepOutput, _coin, _info, _ProbeEnv
from purejaxppo.envs.probes.classic import Probe1, Probe2, Probe3, Probe4, Probe5

__all__ = [
    "BatteryParams",
    "ProbeBattery",
    "ProbeContinuousBound",
    "ProbeEqualReward",
    "ProbeScaledObs",
    "ProbeTruncation",
    "ProbeLambda",
    "ProbeLambdaTimeLimit",
    "ProbeTrustRegion",
    "ProbeTrustRegionNoOffset",
    "TruncationParams",
]


@struct.dataclass
class TruncationParams(EnvParams):
    """Parameters of `ProbeTruncation`.

    Attributes:
      max_steps_in_episode: the time limit (gymnax's truncation), default 4.
      episode_length: the real end of a terminating episode, default 4 (= the limit, so
        both kinds of episode stop after the same number of steps and differ only in the
        flag).
    """

    max_steps_in_episode: int = 4
    episode_length: int = 4


class _BlankProbe(_ProbeEnv):
    """A probe whose observation is always ``[0.0]``: what it teaches lies in its rewards
    and its time.

    Args:
      pad: None for the observation ``[0.0]``; a float for ``[0.0, pad]``, a constant
        input beside it. A ReLU network fed only ``[0.0]`` keeps every hidden unit at
        ``relu(0) = 0`` with no gradient (biases start at 0), so only its output biases
        learn; `purejaxppo.check` gives such a network ``pad = 1``.
    """

    PADDABLE = True

    def __init__(self, pad: float | None = None) -> None:
        super().__init__()
        self.pad = pad
        if pad is not None:
            self.obs_shape = (2,)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """Box ``(1,)`` holding 0, or ``(2,)`` holding ``[0.0, pad]``."""
        if self.pad is None:
            return super().observation_space(params)
        low, high = min(0.0, self.pad), max(0.0, self.pad)
        return spaces.Box(low, high, (2,), jnp.float32)

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """Always ``[0.0]`` (``[0.0, pad]`` with a pad)."""
        if self.pad is None:
            return jnp.zeros((1,), jnp.float32)
        return jnp.asarray([0.0, self.pad], jnp.float32)


class ProbeTruncation(_ProbeEnv):
    """Truncation probe: the same length of episode, once a time limit, once a real end.

    Dynamics: one action; reward +1 on every step. At reset a cue ``c`` in {0, 1} is
    drawn. ``c = 1``: the episode TERMINATES after ``episode_length`` steps, and the
    observation ``[1, t / episode_length]`` shows the time. ``c = 0``: the episode never
    terminates; gymnax TRUNCATES it at ``max_steps_in_episode`` steps, and the
    observation is always ``[0, 0]`` (a stationary, endless task).

    Learned (discount ``gamma``): ``V([0, 0]) = 1 / (1 - gamma)``, the value of an endless
    stream of +1 (bootstrapped from ``V(final_observation)`` at the limit), and
    ``V([1, 0]) = (1 - gamma**L) / (1 - gamma)`` with ``L = episode_length`` (nothing
    after a real end). Treating the time limit as an end pulls ``V([0, 0])`` down to
    about the mean of the truncated sums; treating the real end as a limit pushes
    ``V([1, 0])`` up.
    """

    _n_actions = 1

    def __init__(self) -> None:
        super().__init__()
        self.obs_shape = (2,)

    @property
    def default_params(self) -> TruncationParams:
        """Default parameters (limit 4, real end 4)."""
        return TruncationParams()

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """``Box(0, 1, (2,))``."""
        return spaces.Box(0.0, 1.0, (2,), jnp.float32)

    def _draw_cue(self, key: jax.Array) -> jax.Array:
        """The cue: 0 (time limit) or 1 (real end), uniformly."""
        return _coin(key)

    def get_obs(
        self, state: EnvState, params: TruncationParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """``[1, t / L]`` for a terminating episode, ``[0, 0]`` for an endless one."""
        length = (params or self.default_params).episode_length
        cue = state.cue.astype(jnp.float32)
        return jnp.stack([cue, cue * state.time.astype(jnp.float32) / length])

    def _transition(
        self, state: EnvState, action: jax.Array, params: TruncationParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward +1; terminated only at the real end of a ``c = 1`` episode."""
        end = jnp.logical_and(state.cue == 1, state.time + 1 >= params.episode_length)
        return jnp.asarray(1.0), end

    def is_terminated(self, state: EnvState, params: TruncationParams) -> jax.Array:
        """Terminal after the real end of a ``c = 1`` episode (never for ``c = 0``)."""
        return jnp.logical_and(state.cue == 1, state.time >= params.episode_length)

    @staticmethod
    def values(gamma: float, params: TruncationParams | None = None) -> tuple[float, float]:
        """The true ``(V([0, 0]), V([1, 0]))`` under discount ``gamma``."""
        length = (params or TruncationParams()).episode_length
        return 1.0 / (1.0 - gamma), (1.0 - gamma**length) / (1.0 - gamma)


class ProbeEqualReward(_BlankProbe):
    """Entropy probe: every action earns the same reward.

    Dynamics: observation ``[0.0]``, ``N_ACTIONS`` actions, one step, reward +1 whatever
    the action, then terminated.

    Learned: nothing to prefer, so the advantages are zero and only the entropy bonus
    moves the policy: with ``ent_coef > 0`` the entropy stays at its maximum,
    ``log(N_ACTIONS)``. A bonus of the wrong sign (or a missing one with noisy
    advantages) lets it collapse.
    """

    N_ACTIONS = 4
    _n_actions = N_ACTIONS

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward +1; terminated."""
        return jnp.asarray(1.0), jnp.asarray(True)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1


class ProbeTrustRegion(_BlankProbe):
    """Trust-region probe: one update of a bandit, to see PPO's clip bind.

    Dynamics: observation ``[0.0]`` (``[0.0, pad]`` with a pad, as `purejaxppo.check`
    gives a ReLU network), two actions, one step; reward ``OFFSET + PAY`` (52)
    for action 1 and ``OFFSET`` (50) for action 0, then terminated.

    Learned in ONE update of many minibatch steps (Schulman et al. 2017, eq. 7 and the
    clipped value loss of the PPO2 baselines): from the first policy (nearly uniform:
    the actor head starts at 0.01 scale) the clipped surrogate lets the probability of
    action 1 rise by at most the clip, ``P <= P_0 (1 + clip_coef)``, and the clipped value
    loss lets ``V([0])`` move at most ``clip_coef`` from the rollout's values towards its
    target (the mean reward, about 51). A surrogate that takes the optimistic bound, or a
    value clip around the current prediction, lets both run to their targets.

    The offset is for advantage normalisation (Huang et al. 2022, detail 7): the critic
    starts near 0, so every advantage is about 50 and only 2 separates the actions.
    Normalised per minibatch they are about -1 and +1 and the clip binds as without the
    offset. Left unnormalised, the common 50 pulls ``P`` towards the rollout's sampled
    frequency of action 1 (about 0.5) and the 2 moves it by about 0.5 / 50 beyond that:
    ``P`` barely rises.
    """

    PAY = 2.0
    OFFSET = 50.0
    _n_actions = 2

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward ``OFFSET + PAY`` for action 1, ``OFFSET`` for action 0; terminated."""
        return self.OFFSET + jnp.where(action == 1, self.PAY, 0.0), jnp.asarray(True)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1


class ProbeTrustRegionNoOffset(ProbeTrustRegion):
    """`ProbeTrustRegion` without the offset: rewards ``PAY`` (2) for action 1 and 0 for
    action 0, then terminated.

    For configs without advantage normalisation (``norm_adv: false``): the advantages are
    then about +2 and 0 as they are, so the clip binds as in `ProbeTrustRegion` with
    normalisation, and a surrogate that takes the optimistic bound again lets ``P`` run
    past it. It says nothing of normalisation, which such a config does not use.
    """

    OFFSET = 0.0


class ProbeLambda(_BlankProbe):
    """GAE-lambda probe: a fixed-length episode whose only reward comes at its end.

    Dynamics: one action (ignored); the observation is always ``[0.0]``; every episode is
    ``LENGTH`` (8) steps long, and its last step gives reward +1 and terminates.

    Read at the FIRST update, before any learning (Schulman et al. 2016, eq. 16): with
    gamma 1 and the same value ``v`` at every step (one observation; a feed-forward
    critic, or a recurrent one whose state stays at zero), the TD errors are 0 except the
    last, ``1 - v``, so GAE gives ``A_t = lambda^(LENGTH - 1 - t) (1 - v)`` and the
    rollout's mean advantage over ``1 - v`` is ``(1 - lambda^LENGTH) / (LENGTH (1 -
    lambda))``: the lambda the advantages were computed with, in closed form. Lambda
    ignored (Monte-Carlo returns) reads 1.
    """

    LENGTH = 8
    _n_actions = 1

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward +1 on the episode's last step (then terminated), else 0."""
        last = state.time >= self.LENGTH - 1
        return jnp.where(last, 1.0, 0.0), last

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after ``LENGTH`` steps."""
        return state.time >= self.LENGTH


class ProbeLambdaTimeLimit(_BlankProbe):
    """GAE-lambda probe at a time limit: `ProbeLambda`'s episode, cut by a time limit
    instead of ending.

    Dynamics: one action (ignored); the observation is always ``[0.0]``; reward
    ``REWARD`` (10) on the episode's ``LENGTH``-th (8th) step, else 0; the episode never
    terminates, and gymnax TRUNCATES it at ``max_steps_in_episode = LENGTH`` steps.

    Read at the FIRST update, gamma 1, as `ProbeLambda`: the last step bootstraps from
    ``V(final observation)``, the same ``v`` as every step's, so its TD error is
    ``REWARD + v - v = REWARD`` and the others' 0; GAE gives
    ``A_t = lambda^(LENGTH - 1 - t) REWARD``, a mean advantage over ``REWARD`` of
    ``(1 - lambda^LENGTH) / (LENGTH (1 - lambda))``. A recursion that runs on across the
    time limit (``not_terminated`` where ``not_done`` belongs in GAE) adds the next
    episode's first advantage, ``lambda^(LENGTH - 1) REWARD``, times gamma lambda to the
    truncated step's, and so raises every episode that another follows in the rollout:
    over 16 steps the mean by the factor ``1 + lambda^LENGTH / 2`` (1.33 at lambda 0.95).
    Once V is learned the next episode's TD errors are 0 and the bug is invisible; hence
    the first update. The reward is 10, not 1, so that a critic whose value drifts
    along the episode (a recurrent core fed a constant input: its state moves) adds TD
    errors a tenth as large beside it.
    """

    LENGTH = 8
    REWARD = 10.0
    _n_actions = 1

    @property
    def default_params(self) -> EnvParams:
        """The time limit at ``LENGTH`` steps."""
        return EnvParams(max_steps_in_episode=self.LENGTH)

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward ``REWARD`` on the step the time limit cuts, else 0; never terminated."""
        return jnp.where(state.time >= self.LENGTH - 1, self.REWARD, 0.0), jnp.asarray(False)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Never: only the time limit stops an episode."""
        return jnp.asarray(False)


class ProbeScaledObs(_ProbeEnv):
    """Scaled-observation probe: probe 5 seen through a far-off, wide observation.

    Dynamics: two actions, one step. At reset a cue ``c`` in {0, 1} is drawn and the
    observation is ``[OFFSET + SCALE * c]`` (1000 or 1200). Reward +1 if the action
    equals ``c``, else 0; terminated.

    Learned: act on the cue (return 1; chance 0.5). With observation normalisation the
    network sees about ``[-1, +1]`` and learns as in probe 5, and the running mean / std
    move to about ``OFFSET + SCALE / 2`` / ``SCALE / 2``. Normalised in training but not
    when acting, the rollout's actions come from raw inputs the network never saw.
    """

    OFFSET = 1000.0
    SCALE = 200.0
    _n_actions = 2
    _obs_low = OFFSET
    _obs_high = OFFSET + SCALE

    def _draw_cue(self, key: jax.Array) -> jax.Array:
        """The cue: 0 or 1, uniformly."""
        return _coin(key)

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """``[OFFSET + SCALE * cue]``."""
        return jnp.reshape(self.OFFSET + self.SCALE * state.cue.astype(jnp.float32), (1,))

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward +1 if the action equals the cue; terminated."""
        return (action == state.cue).astype(jnp.float32), jnp.asarray(True)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1


class ProbeContinuousBound(_BlankProbe):
    """Continuous probe whose best action lies at the bound of its Box.

    Dynamics: observation ``[0.0]``; the action is ``Box(-1, 1, (1,))``; one step whose
    reward is the action clipped into the bound, ``clip(a, -1, 1)`` (so +1 at and beyond
    the upper bound), then terminated.

    Learned: push the Gaussian's mean to and past +1 (return -> 1; a fresh N(0, 1) policy
    gets 0). The ratio of PPO is pi(a) / pi_old(a) of the SAMPLED action: a log-prob
    taken at the clipped action instead piles every sample beyond the bound onto +1,
    stalls the mean near the bound and keeps the return well below 1.
    """

    def action_space(self, params: EnvParams | None = None) -> spaces.Box:
        """``Box(-1, 1, (1,))``."""
        return spaces.Box(-1.0, 1.0, (1,), jnp.float32)

    @property
    def num_actions(self) -> int:
        """One action dimension."""
        return 1

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward ``clip(a, -1, 1)``; terminated."""
        return jnp.clip(jnp.reshape(action, ()), -1.0, 1.0), jnp.asarray(True)

    def step_env(
        self, key: jax.Array, state: EnvState, action: Any, params: EnvParams
    ) -> StepOutput:
        """As the other probes, but the action stays a float."""
        del key
        reward, terminated = self._transition(state, jnp.asarray(action, jnp.float32), params)
        new_state = state.replace(time=state.time + 1)
        terminated = jnp.asarray(terminated, dtype=jnp.bool_)
        obs = self.get_obs(new_state, params)
        return obs, new_state, jnp.asarray(reward, jnp.float32), terminated, _info(terminated)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1


@struct.dataclass
class BatteryParams(EnvParams):
    """Parameters of `ProbeBattery` (both may be traced, one value per vmapped lane).

    Attributes:
      max_steps_in_episode: gymnax's time limit (int32).
      probe: the index into `ProbeBattery.PROBES` of the probe this lane plays (int32).
      pad: what pads a 1-d probe's observation to ``(2,)`` (float32): 0, or 1 as a
        constant input a ReLU network's units can see (`purejaxppo check`).
    """

    max_steps_in_episode: Any = 100
    probe: Any = 0
    pad: Any = 0.0


class ProbeBattery(_ProbeEnv):
    """Several 1-d probes as one env, the probe chosen by `BatteryParams.probe`, so that
    one compiled program trains them all as the lanes of one `vmap`.

    Every probe of `PROBES` plays as on its own, with two adaptations: the observation is
    padded with zeros to ``(2,)`` (the widest, `ProbeTruncation`'s), and the action space
    is ``Discrete(4)`` (the largest, `ProbeEqualReward`'s); a probe with fewer actions
    gives every action beyond its own the reward of an action it never rewards (probes 1-3
    ignore the action; probe 4 rewards action 1 alone, probe 5 the action equal to the
    cue alone). `time_limit(probe)` is the limit a lane must set in its params.
    """

    PROBES: tuple[type[_ProbeEnv], ...] = ()  # set below the class
    _n_actions = ProbeEqualReward.N_ACTIONS

    def __init__(self) -> None:
        super().__init__()
        self.obs_shape = (2,)
        self._probes = [cls() for cls in self.PROBES]

    @property
    def default_params(self) -> BatteryParams:
        """Probe 0 with the default time limit."""
        return BatteryParams()

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """``Box(-1, 1, (2,))``."""
        return spaces.Box(-1.0, 1.0, (2,), jnp.float32)

    @classmethod
    def index(cls, probe: type[_ProbeEnv]) -> int:
        """The `BatteryParams.probe` of a probe class."""
        return cls.PROBES.index(probe)

    @classmethod
    def time_limit(cls, probe: type[_ProbeEnv]) -> int:
        """The time limit (`max_steps_in_episode`) a lane playing `probe` sets."""
        return probe().default_params.max_steps_in_episode

    def _draw_cue(self, key: jax.Array) -> jax.Array:
        """A coin for every probe (those without a cue ignore it)."""
        return _coin(key)

    def _switch(self, params: BatteryParams, method: str, *args: Any) -> Any:
        branches = [lambda *a, p=p: getattr(p, method)(*a, p.default_params) for p in self._probes]
        return jax.lax.switch(jnp.asarray(params.probe, jnp.int32), branches, *args)

    def get_obs(
        self, state: EnvState, params: BatteryParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """The lane's probe's observation, padded to ``(2,)`` with `BatteryParams.pad`."""
        params = params or self.default_params
        pad = jnp.asarray(params.pad, jnp.float32)

        def padded(probe: _ProbeEnv) -> Any:
            def obs(state: EnvState) -> jax.Array:
                x = probe.get_obs(state, probe.default_params)
                return jnp.concatenate([x, jnp.broadcast_to(pad, (2 - x.shape[0],))])

            return obs

        index = jnp.asarray(params.probe, jnp.int32)
        return jax.lax.switch(index, [padded(p) for p in self._probes], state)

    def _transition(
        self, state: EnvState, action: jax.Array, params: BatteryParams
    ) -> tuple[jax.Array, jax.Array]:
        """The lane's probe's reward (float32) and termination (bool)."""
        reward, terminated = self._switch(params, "_transition", state, action)
        return jnp.asarray(reward, jnp.float32), jnp.asarray(terminated, jnp.bool_)

    def is_terminated(self, state: EnvState, params: BatteryParams) -> jax.Array:
        """The lane's probe's real end."""
        return jnp.asarray(self._switch(params, "is_terminated", state), jnp.bool_)


ProbeBattery.PROBES = (
    Probe1,
    Probe2,
    Probe3,
    Probe4,
    Probe5,
    ProbeTruncation,
    ProbeEqualReward,
    ProbeLambda,
    ProbeLambdaTimeLimit,
)
