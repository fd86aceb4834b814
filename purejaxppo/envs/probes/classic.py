"""Probes 1-7 (Andy Jones, "Debugging RL, Without the Agonizing Pain"): value fitting,
observation dependence, discounting, policy learning, memory. See `purejaxppo.envs.probes`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

from purejaxppo.envs.probes.base import EnvParams, EnvState, _coin, _obs, _ProbeEnv

__all__ = [
    "Probe1",
    "Probe2",
    "Probe3",
    "Probe4",
    "Probe5",
    "Probe6",
    "Probe6Params",
    "Probe7",
    "Probe7Params",
]


@struct.dataclass
class Probe6Params(EnvParams):
    """Parameters of Probe6.

    Attributes:
      max_steps_in_episode: gymnax's truncation limit (default 100).
      episode_length: number of steps of every episode (default 6).
    """

    episode_length: int = 6


@struct.dataclass
class Probe7Params(EnvParams):
    """Parameters of Probe7.

    Attributes:
      max_steps_in_episode: gymnax's truncation limit (default 100).
      episode_length: number of steps of every episode; the reward comes on the last one
        (default 5).
    """

    episode_length: int = 5


class Probe1(_ProbeEnv):
    """Probe 1: constant observation, one-step episode, constant reward.

    Dynamics: one action; the observation is always ``[0.0]``; every episode is one step
    long and that step gives reward +1 and terminates.

    Learned: ``V([0]) = 1``. Tests that the value loss and optimiser can fit a constant;
    if not, the value network or its loss is broken.
    """

    _n_actions = 1
    _obs_low = 0.0
    _obs_high = 0.0

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """Always ``[0.0]``."""
        return _obs(0.0)

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward +1, terminated."""
        return jnp.asarray(1.0), jnp.asarray(True)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1


class Probe2(_ProbeEnv):
    """Probe 2: random observation, one-step episode, reward equal to the observation.

    Dynamics: one action; at reset the observation is ``[-1.0]`` or ``[+1.0]``, uniformly
    at random; the single step gives reward equal to that observation and terminates.

    Learned: ``V(obs) = obs``, i.e. ``V([-1]) = -1`` and ``V([+1]) = +1``. Tests that the
    value network uses its input (backprop through the observation works).
    """

    _n_actions = 1
    _obs_low = -1.0
    _obs_high = 1.0

    def _draw_cue(self, key: jax.Array) -> jax.Array:
        """0 (observation -1) or 1 (observation +1), uniformly."""
        return _coin(key)

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """``[2 * cue - 1]``, i.e. ``[-1.0]`` or ``[+1.0]``."""
        return _obs(2 * state.cue - 1)

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward equal to the observation, terminated."""
        return (2 * state.cue - 1).astype(jnp.float32), jnp.asarray(True)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1


class Probe3(_ProbeEnv):
    """Probe 3: two-step episode with a delayed reward (tests discounting).

    Dynamics: one action; the first observation is ``[0.0]`` and the step from it gives
    reward 0; the second observation is ``[1.0]`` and the step from it gives reward +1 and
    terminates. (The placeholder observation after termination is ``[1.0]``.)

    Learned: ``V([0]) = gamma`` and ``V([1]) = 1``. Tests that the value target
    bootstraps/discounts correctly across steps.
    """

    _n_actions = 1
    _obs_low = 0.0
    _obs_high = 1.0

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """``[0.0]`` at time 0, ``[1.0]`` afterwards."""
        return _obs(state.time >= 1)

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward 0 on the first step; +1 and terminated on the second."""
        last = state.time >= 1
        return last.astype(jnp.float32), last

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after two steps."""
        return state.time >= 2


class Probe4(_ProbeEnv):
    """Probe 4: constant observation, two actions, one-step episode (tests the policy).

    Dynamics: two actions; the observation is always ``[0.0]``; the single step gives
    reward -1 for action 0 and +1 for action 1, and terminates.

    Learned: always pick action 1 (``V([0]) -> 1``). Tests the policy-gradient loss and
    advantage sign.
    """

    _n_actions = 2
    _obs_low = 0.0
    _obs_high = 0.0

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """Always ``[0.0]``."""
        return _obs(0.0)

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward +1 for action 1, -1 for action 0; terminated."""
        return jnp.where(action == 1, 1.0, -1.0), jnp.asarray(True)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1


class Probe5(_ProbeEnv):
    """Probe 5: random observation, two actions, reward for matching it.

    Dynamics: two actions; at reset the observation is ``[0.0]`` or ``[1.0]``, uniformly at
    random; the single step gives reward +1 if ``action == obs`` and -1 otherwise, and
    terminates.

    Learned: pick the action equal to the observation (``V = 1`` for both observations).
    Tests that the policy conditions on its input.
    """

    _n_actions = 2
    _obs_low = 0.0
    _obs_high = 1.0

    def _draw_cue(self, key: jax.Array) -> jax.Array:
        """0 or 1, uniformly."""
        return _coin(key)

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """``[cue]``."""
        return _obs(state.cue)

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward +1 if the action matches the observation, else -1; terminated."""
        return jnp.where(action == state.cue, 1.0, -1.0), jnp.asarray(True)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1


class Probe6(_ProbeEnv):
    """Probe 6: observed step counter, reward for matching its parity.

    Dynamics: two actions; every episode lasts exactly ``params.episode_length`` steps
    (default 6). The observation is the step counter, ``[t]`` for ``t = 0, 1, ...,
    episode_length - 1``. Taking action ``a`` at observation ``[t]`` gives reward +1 if
    ``a == t mod 2`` and 0 otherwise; the step from ``t = episode_length - 1`` terminates.
    (The placeholder observation after termination is ``[episode_length]``.)

    Learned: action 0 at even ``t``, action 1 at odd ``t``; optimal return
    ``episode_length`` and ``V([t]) = sum_{k=0}^{L-1-t} gamma^k`` under it.

    Reading chosen: the seed text said both "reward 1 if action is 1" and "learn action 1
    when odd, 0 when even". We reward matching the parity of the current observation, so
    the optimal return is ``episode_length`` (a constant-action policy gets about half).
    """

    _n_actions = 2

    @property
    def default_params(self) -> Probe6Params:
        """Default parameters (``episode_length=6``)."""
        return Probe6Params()

    def observation_space(self, params: Probe6Params | None = None) -> spaces.Box:
        """``[0, episode_length]`` (the upper end is the post-terminal placeholder)."""
        if params is None:
            params = self.default_params
        return spaces.Box(0.0, params.episode_length, (1,), jnp.float32)

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """``[t]``."""
        return _obs(state.time)

    def _transition(
        self, state: EnvState, action: jax.Array, params: Probe6Params
    ) -> tuple[jax.Array, jax.Array]:
        """Reward +1 if ``action == t mod 2``; terminated after the last step."""
        reward = (action == state.time % 2).astype(jnp.float32)
        return reward, state.time + 1 >= params.episode_length

    def is_terminated(self, state: EnvState, params: Probe6Params) -> jax.Array:
        """Terminal after ``episode_length`` steps."""
        return state.time >= params.episode_length


class Probe7(_ProbeEnv):
    """Probe 7: memory probe, a cue shown once and rewarded at the end.

    Dynamics: two actions; every episode lasts exactly ``params.episode_length`` steps
    (default 5). At reset a cue ``c`` in {0, 1} is drawn uniformly and the first
    observation is ``[c]``; every later observation is ``[-1.0]``, a blank that reveals
    neither the cue nor the time. The reward is 0 on every step except the last one (the
    ``episode_length``-th, from ``t = episode_length - 1``), where it is +1 if the action
    equals ``c`` and 0 otherwise; that step terminates.

    Learned: remember the cue and replay it on the last step; optimal return 1. A
    memoryless (feed-forward) policy cannot tell the cue or the time from the blanks and
    gets 0.5 on average, so this probe separates recurrent agents from feed-forward ones.

    Reading chosen: the seed said both "4 timesteps" and "reward at the 5th"; we use 5
    steps with the reward on the 5th (last) action.
    """

    _n_actions = 2
    _obs_low = -1.0
    _obs_high = 1.0

    @property
    def default_params(self) -> Probe7Params:
        """Default parameters (``episode_length=5``)."""
        return Probe7Params()

    def _draw_cue(self, key: jax.Array) -> jax.Array:
        """The cue: 0 or 1, uniformly."""
        return _coin(key)

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """``[cue]`` at time 0, ``[-1.0]`` afterwards."""
        return _obs(jnp.where(state.time == 0, state.cue, -1))

    def _transition(
        self, state: EnvState, action: jax.Array, params: Probe7Params
    ) -> tuple[jax.Array, jax.Array]:
        """Reward +1 on the last step if the action equals the cue, else 0."""
        last = state.time + 1 >= params.episode_length
        reward = jnp.logical_and(last, action == state.cue).astype(jnp.float32)
        return reward, last

    def is_terminated(self, state: EnvState, params: Probe7Params) -> jax.Array:
        """Terminal after ``episode_length`` steps."""
        return state.time >= params.episode_length
