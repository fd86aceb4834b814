"""Probes for the other action spaces (MultiDiscrete, MultiBinary), for action masks and
for Discrete observations.
See `purejaxppo.envs.probes`."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

from purejaxppo.envs.probes.base import EnvParams, EnvState, _coin, _obs, _ProbeEnv
from purejaxppo.envs.spaces import MultiBinary, MultiDiscrete

__all__ = [
    "MaskedEnvState",
    "ProbeDiscreteObs",
    "ProbeMaskedAction",
    "ProbeMultiBinary",
    "ProbeMultiDiscrete",
]


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


class ProbeDiscreteObs(_ProbeEnv):
    """Discrete-observation probe: one step, the best action is a shuffle of the cue.

    Dynamics: the observation is the cue itself, an int32 index drawn uniformly from
    ``Discrete(5)`` at reset (DTI's tabular worlds, gymnasium's FrozenLake / Taxi). The
    single step gives reward 1 for action ``(2 * cue) % 5`` (0, 2, 4, 1, 3: not monotone
    in the index), else 0, then terminates.

    Learned: the map for each cue (return 1; a random policy gets 0.2). Tests that
    Discrete observations are one-hot encoded (`networks.observation_inputs`): each cue
    then has its own input unit.
    """

    _n_actions = 5

    def observation_space(self, params: EnvParams | None = None) -> spaces.Discrete:
        """``Discrete(5)``."""
        return spaces.Discrete(self._n_actions)

    def _draw_cue(self, key: jax.Array) -> jax.Array:
        """Uniform in {0, ..., 4} (int32)."""
        return jax.random.randint(key, (), 0, self._n_actions, jnp.int32)

    def get_obs(
        self, state: EnvState, params: EnvParams | None = None, key: jax.Array | None = None
    ) -> jax.Array:
        """The cue, an int32 scalar."""
        return jnp.asarray(state.cue, jnp.int32)

    def _transition(
        self, state: EnvState, action: jax.Array, params: EnvParams
    ) -> tuple[jax.Array, jax.Array]:
        """Reward 1 for ``(2 * cue) % 5``; terminated."""
        best = (2 * state.cue) % self._n_actions
        return (action == best).astype(jnp.float32), jnp.asarray(True)

    def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
        """Terminal after one step."""
        return state.time >= 1
