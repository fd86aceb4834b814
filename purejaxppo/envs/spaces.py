"""Action spaces that gymnax 1.0.1 lacks: `MultiDiscrete` and `MultiBinary`.

They follow the gymnax `Space` API (`sample(key)`, `contains(x)`, `shape`, `dtype`) and the
meaning of Gymnasium's classes of the same names, so an environment written against
Gymnasium's semantics can declare them from its `action_space(params)`.
`purejaxppo.networks.action_spec` reads them into independent categorical heads
(MultiDiscrete) and per-bit Bernoulli heads (MultiBinary).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

__all__ = ["MultiBinary", "MultiDiscrete"]


class MultiDiscrete(spaces.Space):
    """K independent discrete components; component k takes values in {0, ..., nvec[k]-1}.

    As `gymnasium.spaces.MultiDiscrete` with a 1-d `nvec` (start 0).

    Args:
      nvec: number of values of each component, a sequence of K ints >= 1.

    Attributes:
      nvec: tuple of K ints.
      shape: `(K,)`; an element is an int32 array `[K]`.
      dtype: int32.

    Raises:
      ValueError: for an empty `nvec` or a count < 1.
    """

    def __init__(self, nvec: Sequence[int]):
        nvec = tuple(int(n) for n in np.asarray(nvec).reshape(-1))
        if not nvec or min(nvec) < 1:
            raise ValueError(f"nvec={list(nvec)}: must be a non-empty list of counts >= 1")
        self.nvec = nvec
        self.shape = (len(nvec),)
        self.dtype = jnp.int32

    def __repr__(self) -> str:
        return f"MultiDiscrete({list(self.nvec)})"

    def sample(self, key: jax.Array) -> jax.Array:
        """Uniform int32 `[K]`: each component uniform over its own values."""
        return jax.random.randint(key, self.shape, 0, jnp.asarray(self.nvec), jnp.int32)

    def contains(self, x: jax.Array) -> jax.Array:
        """Whether every component of `x` `[K]` is in range (bool scalar)."""
        x = jnp.asarray(x)
        return jnp.all((x >= 0) & (x < jnp.asarray(self.nvec)))


class MultiBinary(spaces.Space):
    """n independent bits, as `gymnasium.spaces.MultiBinary(n)` with an int n.

    Args:
      n: number of bits (>= 1).

    Attributes:
      n: number of bits.
      shape: `(n,)`; an element is an int32 array `[n]` of 0s and 1s.
      dtype: int32.

    Raises:
      ValueError: for n < 1.
    """

    def __init__(self, n: int):
        if int(n) < 1:
            raise ValueError(f"n={n!r}: must be >= 1")
        self.n = int(n)
        self.shape = (self.n,)
        self.dtype = jnp.int32

    def __repr__(self) -> str:
        return f"MultiBinary({self.n})"

    def sample(self, key: jax.Array) -> jax.Array:
        """Uniform random bits, int32 `[n]`."""
        return jax.random.bernoulli(key, 0.5, self.shape).astype(jnp.int32)

    def contains(self, x: jax.Array) -> jax.Array:
        """Whether every entry of `x` `[n]` is 0 or 1 (bool scalar)."""
        x = jnp.asarray(x)
        return jnp.all((x == 0) | (x == 1))


# Where each env family keeps its episode limit: gymnax `EnvParams.max_steps_in_episode`,
# adapters' `max_steps_in_episode` attribute (Brax / Playground `episode_length`, EnvPool
# `max_episode_steps`, Navix / Jumanji / JaxMARL limits), Craftax `EnvParams.max_timesteps`,
# XLand-MiniGrid `EnvParams.max_steps`.
_LIMIT_FIELDS = (
    ("params", "max_steps_in_episode"),
    ("env", "max_steps_in_episode"),
    ("params", "max_timesteps"),
    ("params", "max_steps"),
)


def episode_limit(env, env_params) -> int:
    """The most steps an episode of `env` under `env_params` lasts (an int), read from
    where the env's family keeps it (see `_LIMIT_FIELDS`).

    Raises:
      ValueError: the env exposes no limit; the message asks for an explicit `max_steps`.
    """
    sources = {"params": env_params, "env": env}
    for source, field in _LIMIT_FIELDS:
        value = getattr(sources[source], field, None)
        if value is not None:
            return int(value)
    name = getattr(env, "name", type(env).__name__)
    raise ValueError(f"{name}: the env does not expose its episode length; pass max_steps=")
