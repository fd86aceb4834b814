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
