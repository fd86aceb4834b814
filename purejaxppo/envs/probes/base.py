"""What every probe shares: `EnvState`, `EnvParams`, the step wrapper (`_ProbeEnv`) and
the observation / coin / info helpers. See `purejaxppo.envs.probes`."""

from __future__ import annotations

import abc
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

__all__ = ["EnvParams", "EnvState", "StepOutput"]

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


def _obs(value: jax.Array | float) -> jax.Array:
    """Wraps a scalar into a float32 observation of shape (1,)."""
    return jnp.reshape(jnp.asarray(value, dtype=jnp.float32), (1,))


def _coin(key: jax.Array) -> jax.Array:
    """Draws 0 or 1 uniformly at random (int32 scalar)."""
    return jax.random.bernoulli(key).astype(jnp.int32)


def _info(terminated: jax.Array) -> dict[str, Any]:
    """The info dict of one transition."""
    return {"discount": 1.0 - terminated.astype(jnp.float32)}


class _ProbeEnv(environment.Environment[EnvState, EnvParams], abc.ABC):
    """Shared plumbing of the probes: state layout, spaces and the step wrapper.

    Subclasses define ``_n_actions``, ``_obs_low``/``_obs_high`` (or override
    ``observation_space``), ``_draw_cue``, ``get_obs`` and ``_transition``.
    """

    _n_actions: int = 1
    _obs_low: float = 0.0
    _obs_high: float = 0.0
    #: Whether the env takes ``pad``, a constant input beside its observation.
    PADDABLE = False

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

    @abc.abstractmethod
    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """Observation of a state (float32, shape (1,))."""

    @abc.abstractmethod
    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward (float) and terminated (bool) of taking ``action`` in ``state``."""

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

    @abc.abstractmethod
    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Whether ``state`` lies after the probe's last step."""
