"""Stable-Baselines3's `predict` on a `Policy` (`Policy.predict`): its inputs, checked
and batched for the policy's jitted step with the recurrent state passed in (not kept on
the policy), and the step's actions as numpy arrays of the action space's dtype and shape.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.acting_checks import (
    batch_observation,
    check_flag,
    check_key,
    check_state,
    traced,
)
from purejaxppo.networks import Networks


class KeyStream:
    """`predict`'s default sampling keys: `jax.random.key(seed)`, made at the first
    `next()`, split once per call."""

    def __init__(self, seed: int):
        self.seed = seed
        self._key: jax.Array | None = None

    def next(self) -> jax.Array:
        if self._key is None:
            self._key = jax.random.key(self.seed)
        self._key, key = jax.random.split(self._key)
        return key


class PredictInputs(NamedTuple):
    """What `Policy.predict` steps with: the state entering the step, the observations
    with a batch axis, the reset flags `[B]`, the key and temperature (0: greedy, 1:
    sampled); and whether one observation was given."""

    state: Any
    batch: Any
    reset: jax.Array
    key: jax.Array
    temperature: jax.Array
    single: bool

    def step_args(self) -> tuple[Any, ...]:
        """The arguments of the policy's step after its params (`policy.make_act`)."""
        return self.state, self.batch, self.reset, self.key, self.temperature


def predict_inputs(
    obs: Any,
    state: Any,
    deterministic: Any,
    episode_start: Any,
    key: Any,
    *,
    shapes: Any,
    networks: Networks,
    keys: KeyStream,
) -> PredictInputs:
    """`predict`'s arguments checked: `deterministic` a bool, concrete inputs (numpy
    results cannot be traced), `key` one PRNG key or None (sampling then takes the next of
    `keys`), `obs` of the observation `shapes`, `state` None (initial) or a recurrent
    `networks`' state of B envs, `episode_start` None or B flags.

    Raises:
      TypeError: `deterministic` not a bool; a traced input; a `key` that is not one PRNG
        key.
      ValueError: `obs` as `batch_observation` refuses it; a `state` that is not the
        policy's state of B envs, or any state but None / `()` for a feed-forward policy;
        `episode_start` of another size than B.
    """
    deterministic = check_flag("deterministic", deterministic)
    recurrent, initial_state = networks.stateful, networks.initial_state
    if traced(obs, state, episode_start, key):
        raise TypeError(
            "Policy.predict returns numpy arrays and cannot run inside jax.jit / vmap / "
            "lax.scan; use policy.act or policy.get_action there"
        )
    if key is not None:
        check_key("predict: key", key)
    batch, single = batch_observation(obs, shapes)
    size = jax.tree.leaves(batch)[0].shape[0]
    if state is None or (not recurrent and isinstance(state, tuple) and not state):
        state = initial_state(size)
    elif not recurrent:
        raise ValueError(
            f"state: a feed-forward policy has no state; pass state=None (got "
            f"{type(state).__name__})"
        )
    else:
        check_state("state", state, initial_state(size), size)
    reset = np.zeros((size,), bool)
    if episode_start is not None:
        reset = np.asarray(episode_start, bool).reshape(-1)
        if reset.shape != (size,):
            raise ValueError(
                f"episode_start: expected {size} flags (one per observation), got "
                f"shape {np.shape(episode_start)}"
            )
    if deterministic:
        key, temperature = jax.random.key(0), 0.0  # greedy: the key is not used
    else:
        key, temperature = keys.next() if key is None else key, 1.0
    return PredictInputs(state, batch, jnp.asarray(reset), key, jnp.float32(temperature), single)


def numpy_actions(space: Any, action: Any, single: bool) -> np.ndarray:
    """The step's actions `[B, ...]` as a numpy array of the action `space`'s dtype (the
    action's own without one), Box actions in the env's action shape `[B,
    *space.shape]`; for one observation without the batch axis (a 0-d array for
    Discrete)."""
    dtype = getattr(space, "dtype", None)
    dtype = np.dtype(dtype) if dtype is not None else np.asarray(action).dtype
    actions = np.asarray(action).astype(dtype, copy=False)
    if getattr(space, "shape", None) is not None:  # Box: the env's action shape
        actions = actions.reshape((actions.shape[0], *tuple(space.shape)))
    if single:
        actions = actions.reshape(actions.shape[1:])  # a 0-d array for Discrete
    return actions
