"""Probe environments for debugging PPO, as pure, jittable gymnax 1.0 environments.

Source: Andy Jones, "Debugging RL, Without the Agonizing Pain"
(andyljones.com/posts/rl-debugging.html). Each probe isolates one part of an RL agent
(value learning, reward discounting, policy learning, observation dependence, memory), so
a failure points at the broken component.

Common conventions:

* Observations are float32 arrays of shape ``(1,)``; rewards are float32 scalars and
  ``terminated`` is a bool scalar.
* Every probe terminates naturally after a fixed number of steps. ``EnvParams`` carries
  gymnax's ``max_steps_in_episode`` (truncation when ``state.time >= max_steps_in_episode``)
  and defaults it to 100, so natural termination always comes first unless it is lowered.
* ``step_env`` returns gymnax 1.0's 5-tuple ``(obs, state, reward, terminated, info)``; the
  public ``Environment.step`` adds ``truncated`` and ``info["final_observation"]`` and
  auto-resets. The observation ``step_env`` returns after the terminal step is a
  placeholder (it is never bootstrapped from, since the episode terminated).
* ``info`` holds ``"discount"``: 0.0 after the terminal step, else 1.0.

The environments are not registered with gymnax here; ``purejaxppo.envs.registry`` does
that from :data:`PROBE_ENVS`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from purejaxppo.envs.spaces import MultiBinary, MultiDiscrete

__all__ = [
    "PROBE_ENVS",
    "PROBE_VARIANT_ENVS",
    "EnvParams",
    "EnvState",
    "Probe1",
    "Probe2",
    "Probe3",
    "Probe4",
    "Probe5",
    "Probe6",
    "Probe6Params",
    "Probe7",
    "Probe7Params",
    "MaskedEnvState",
    "ProbeMaskedAction",
    "ProbeMultiBinary",
    "ProbeMultiDiscrete",
]

StepOutput = tuple[jax.Array, "EnvState", jax.Array, jax.Array, dict[str, Any]]


@struct.dataclass
class EnvState(environment.EnvState):
    """State shared by all probes.

    Attributes:
      time: number of steps taken in the current episode (int32 scalar).
      cue: the value drawn at reset (int32 scalar in {0, 1}); 0 for probes without one.
    """

    time: jax.Array
    cue: jax.Array


@struct.dataclass
class EnvParams(environment.EnvParams):
    """Parameters of Probe1-Probe5.

    Attributes:
      max_steps_in_episode: gymnax's truncation limit; high by default so the natural
        termination of the probe comes first.
    """

    max_steps_in_episode: int = 100


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


def _obs(value: jax.Array | float) -> jax.Array:
    """Wraps a scalar into a float32 observation of shape (1,)."""
    return jnp.reshape(jnp.asarray(value, dtype=jnp.float32), (1,))


def _coin(key: jax.Array) -> jax.Array:
    """Draws 0 or 1 uniformly at random (int32 scalar)."""
    return jax.random.bernoulli(key).astype(jnp.int32)


def _info(terminated: jax.Array) -> dict[str, Any]:
    """The info dict of one transition."""
    return {"discount": 1.0 - terminated.astype(jnp.float32)}


class _ProbeEnv(environment.Environment[EnvState, EnvParams]):
    """Shared plumbing of the probes: state layout, spaces and the step wrapper.

    Subclasses define ``_n_actions``, ``_obs_low``/``_obs_high`` (or override
    ``observation_space``), ``_draw_cue``, ``get_obs`` and ``_transition``.
    """

    _n_actions: int = 1
    _obs_low: float = 0.0
    _obs_high: float = 0.0

    def __init__(self) -> None:
        super().__init__()
        self.obs_shape = (1,)

    @property
    def default_params(self) -> EnvParams:
        """Default parameters."""
        return EnvParams()

    @property
    def name(self) -> str:
        """Environment id, e.g. ``"Probe1-v0"``."""
        return f"{type(self).__name__}-v0"

    @property
    def num_actions(self) -> int:
        """Number of discrete actions."""
        return self._n_actions

    def action_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        """Discrete action space."""
        return spaces.Discrete(self._n_actions)

    def observation_space(self, params: EnvParams | None = None) -> spaces.Box:
        """Box of shape (1,) holding every observation the probe can emit."""
        return spaces.Box(self._obs_low, self._obs_high, (1,), jnp.float32)

    def _draw_cue(self, key: jax.Array) -> jax.Array:
        """The cue stored at reset; 0 unless the probe draws one."""
        del key
        return jnp.asarray(0, dtype=jnp.int32)

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """Observation of a state (float32, shape (1,))."""
        raise NotImplementedError

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward (float) and terminated (bool) of taking ``action`` in ``state``."""
        raise NotImplementedError

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, EnvState]:
        """Starts an episode at time 0 with a freshly drawn cue."""
        state = EnvState(time=jnp.asarray(0, dtype=jnp.int32), cue=self._draw_cue(key))
        return self.get_obs(state, params), state

    def step_env(
        self,
        key: jax.Array,
        state: EnvState,
        action: int | float | jax.Array,
        params: EnvParams,
    ) -> StepOutput:
        """One transition: ``(obs, state, reward, terminated, info)``."""
        del key
        action = jnp.asarray(action).astype(jnp.int32)
        reward, terminated = self._transition(state, action, params)
        new_state = state.replace(time=state.time + 1)
        obs = self.get_obs(new_state, params)
        reward = jnp.asarray(reward, dtype=jnp.float32)
        terminated = jnp.asarray(terminated, dtype=jnp.bool_)
        return obs, new_state, reward, terminated, _info(terminated)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Whether ``state`` lies after the probe's last step."""
        raise NotImplementedError


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


class _OneStepMatchProbe(_ProbeEnv):
    """One-step probe over a multi-component action: observation ``[0.0]``, reward the
    fraction of action components equal to ``best``, then terminated."""

    best: tuple[int, ...] = ()
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
        """Reward: fraction of components equal to ``best``; terminated."""
        return jnp.mean(action == jnp.asarray(self.best)), jnp.asarray(True)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1


class ProbeMultiDiscrete(_OneStepMatchProbe):
    """MultiDiscrete probe: one step, each component has its own best value.

    Dynamics: the observation is always ``[0.0]``; the action is a ``MultiDiscrete`` with
    ``nvec = (3, 2, 4)`` (components of different sizes, so the head's padding is used).
    The single step gives reward equal to the fraction of components that equal
    ``best = (2, 0, 3)`` and terminates.

    Learned: always pick ``best`` (return 1; a uniformly random policy gets
    (1/3 + 1/2 + 1/4) / 3 ~= 0.36). Tests that the per-component log-probs are summed and
    each component gets its own credit.
    """

    nvec = (3, 2, 4)
    best = (2, 0, 3)

    @property
    def num_actions(self) -> int:
        """Number of action components."""
        return len(self.nvec)

    def action_space(self, params: EnvParams | None = None) -> MultiDiscrete:
        """``MultiDiscrete((3, 2, 4))``."""
        return MultiDiscrete(self.nvec)


class ProbeMultiBinary(_OneStepMatchProbe):
    """MultiBinary probe: one step, each bit has its own best value.

    Dynamics: the observation is always ``[0.0]``; the action is a ``MultiBinary(4)``. The
    single step gives reward equal to the fraction of bits that equal
    ``best = (1, 0, 1, 1)`` and terminates.

    Learned: always emit ``best`` (return 1; random bits get 0.5). Tests the per-bit
    Bernoulli head: summed log-probs, each bit with its own credit.
    """

    n = 4
    best = (1, 0, 1, 1)

    @property
    def num_actions(self) -> int:
        """Number of bits."""
        return self.n

    def action_space(self, params: EnvParams | None = None) -> MultiBinary:
        """``MultiBinary(4)``."""
        return MultiBinary(self.n)


@struct.dataclass
class MaskedEnvState(EnvState):
    """State of `ProbeMaskedAction`: the cue plus the episode's action mask (bool `[4]`)."""

    mask: jax.Array


class ProbeMaskedAction(_ProbeEnv):
    """Action-masking probe: one step, the best VALID action depends on a cue.

    Dynamics: the observation is a dict, ``{"obs": one-hot cue float32 [2],
    "action_mask": bool [4]}``. At reset each of the 4 actions is valid with probability
    1/2, and one uniformly drawn action is always valid. Cue 0 ranks the actions 0 > 1 >
    2 > 3, cue 1 ranks them 3 > 2 > 1 > 0. The single step gives reward 1 for the
    highest-ranked valid action, 0 for another valid action, and ``MASKED_PENALTY``
    (-1000) for a masked one, then terminates.

    Learned: the ranking for each cue (return 1; a uniformly random valid action gets
    about 0.5). The penalty is so large that one masked action among fewer than 1000
    episodes drags their mean return below 0, so a training run whose per-update mean
    returns all stay >= 0 never took a masked action; with masking off
    (``action_mask_key: null``) the first updates' means are far below 0.
    """

    MASKED_PENALTY = -1000.0
    _n_actions = 4

    def observation_space(self, params: EnvParams | None = None) -> spaces.Dict:
        """``Dict(obs=Box(0, 1, (2,)), action_mask=Box(0, 1, (4,), bool))``."""
        return spaces.Dict(
            {
                "obs": spaces.Box(0.0, 1.0, (2,), jnp.float32),
                "action_mask": spaces.Box(0, 1, (self._n_actions,), jnp.bool_),
            }
        )

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[Any, MaskedEnvState]:
        """Draws the cue and the mask (at least one valid action)."""
        cue_key, mask_key, keep_key = jax.random.split(key, 3)
        mask = jax.random.bernoulli(mask_key, 0.5, (self._n_actions,))
        mask = mask | (jnp.arange(self._n_actions) == jax.random.randint(keep_key, (), 0, 4))
        state = MaskedEnvState(time=jnp.asarray(0, jnp.int32), cue=_coin(cue_key), mask=mask)
        return self.get_obs(state, params), state

    def get_obs(
        self, state: MaskedEnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> dict[str, jax.Array]:
        """``{"obs": one_hot(cue, 2), "action_mask": mask}``."""
        return {"obs": jax.nn.one_hot(state.cue, 2, dtype=jnp.float32), "action_mask": state.mask}

    def best_action(self, cue: jax.Array, mask: jax.Array) -> jax.Array:
        """The highest-ranked valid action (int32): the first valid one for cue 0, the
        last for cue 1. Works on batches (`cue [...]`, `mask [..., 4]`)."""
        first = jnp.argmax(mask, axis=-1)
        last = self._n_actions - 1 - jnp.argmax(mask[..., ::-1], axis=-1)
        return jnp.where(cue == 0, first, last).astype(jnp.int32)

    def _transition(
        self, state: MaskedEnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward 1 (best valid), 0 (other valid) or MASKED_PENALTY; terminated."""
        valid = state.mask[jnp.clip(action, 0, self._n_actions - 1)]
        best = (action == self.best_action(state.cue, state.mask)).astype(jnp.float32)
        return jnp.where(valid, best, self.MASKED_PENALTY), jnp.asarray(True)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1


PROBE_ENVS: dict[str, type[_ProbeEnv]] = {
    "Probe1-v0": Probe1,
    "Probe2-v0": Probe2,
    "Probe3-v0": Probe3,
    "Probe4-v0": Probe4,
    "Probe5-v0": Probe5,
    "Probe6-v0": Probe6,
    "Probe7-v0": Probe7,
}
"""Probe id -> environment class (registered with gymnax by ``purejaxppo.envs.registry``)."""

PROBE_VARIANT_ENVS: dict[str, type[_ProbeEnv]] = {
    "ProbeMultiDiscrete-v0": ProbeMultiDiscrete,
    "ProbeMultiBinary-v0": ProbeMultiBinary,
    "ProbeMaskedAction-v0": ProbeMaskedAction,
}
"""Probes for the other action spaces (MultiDiscrete, MultiBinary) and for action masks;
registered likewise."""
