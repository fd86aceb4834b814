"""What every suite adapter shares: the gymnax 1.0 step with auto-reset, key and space
conversions, and the ValueErrors for unknown names and kwargs."""

from __future__ import annotations

import abc
import difflib
from collections.abc import Iterable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import spaces


@struct.dataclass
class SuiteParams:
    """Params of a suite env whose settings are fixed when it is built (no fields)."""


def raw_key(key: jax.Array) -> jax.Array:
    """A uint32 `[2]` key (the suites are written for `jax.random.PRNGKey`) from a typed
    or raw key."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return key


def select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """`lax.select(pred, a, b)` leaf by leaf of two pytrees of one structure."""
    return jax.tree.map(lambda a, b: jax.lax.select(pred, a, b), on_true, on_false)


class SuiteEnv(abc.ABC):
    """The gymnax 1.0 API over a suite: `reset(key, params) -> (obs, state)` and
    `step(key, state, action, params) -> (obs, state, reward, terminated, truncated,
    info)` with auto-reset.

    Subclasses define `reset_env(key, params)` and `step_env(key, state, action, params)
    -> (obs, state, reward, terminated, truncated, info)` (no reset; keys are raw uint32
    `[2]`), and pass `name`, the spaces and `default_params` to `SuiteEnv.__init__`
    (or override `observation_space` / `action_space` where they depend on the params). `step`
    splits the key as gymnax does (step, reset), and where `terminated | truncated`
    returns the reset's observation and state; `info["final_observation"]` is the
    observation the step led to, `info["terminated"]` / `info["truncated"]` repeat the
    flags. `reward` is float32, the flags bool scalars.
    """

    name: str = "SuiteEnv"

    def __init__(
        self,
        name: str,
        *,
        obs_space: Any = None,
        action_space: Any = None,
        default_params: Any = None,
    ):
        """`name` ("<suite>:<id>"); fixed spaces (a subclass whose spaces depend on the
        params overrides `observation_space` / `action_space` instead); `default_params`
        (default `SuiteParams()`: settings fixed when the env is built)."""
        self.name = name
        self._obs_space = obs_space
        self._action_space = action_space
        self._default_params = SuiteParams() if default_params is None else default_params

    @property
    def default_params(self) -> Any:
        return self._default_params

    def observation_space(self, params: Any = None) -> Any:
        return self._obs_space

    def action_space(self, params: Any = None) -> Any:
        return self._action_space

    @property
    def num_actions(self) -> int:
        """Discrete: the number of actions; Box: the action size."""
        space = self.action_space(self.default_params)
        return int(space.n) if hasattr(space, "n") else int(np.prod(space.shape))

    @abc.abstractmethod
    def reset_env(self, key: jax.Array, params: Any) -> tuple[Any, Any]:
        """`(obs, state)` of a new episode (raw uint32 `[2]` key)."""

    @abc.abstractmethod
    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any) -> tuple:
        """`(obs, state, reward, terminated, truncated, info)` of one step, no reset."""

    def reset(self, key: jax.Array, params: Any = None) -> tuple[Any, Any]:
        params = self.default_params if params is None else params
        return self.reset_env(raw_key(key), params)

    def step(self, key: jax.Array, state: Any, action: Any, params: Any = None) -> tuple:
        params = self.default_params if params is None else params
        step_key, reset_key = jax.random.split(raw_key(key))
        obs_st, state_st, reward, terminated, truncated, info = self.step_env(
            step_key, state, action, params
        )
        terminated = jnp.asarray(terminated, bool)
        truncated = jnp.asarray(truncated, bool)
        done = terminated | truncated
        obs_re, state_re = self.reset_env(reset_key, params)
        info = {
            **info,
            "terminated": terminated,
            "truncated": truncated,
            "final_observation": obs_st,
        }
        return (
            select(done, obs_re, obs_st),
            select(done, state_re, state_st),
            jnp.asarray(reward, jnp.float32),
            terminated,
            truncated,
            info,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def unknown_name(suite: str, name: str, known: Iterable[str]) -> ValueError:
    """ValueError for an id the suite does not register, with close matches."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.4)
    hint = f"Close matches: {', '.join(close)}." if close else f"Known: {', '.join(known)}."
    return ValueError(f"env_name={suite + ':' + name!r} is not a known {suite} environment. {hint}")


def bad_kwargs(suite: str, name: str, keys: Iterable[str], accepted: Iterable[str]) -> ValueError:
    """ValueError for env_kwargs the suite does not take, naming the id and the keys."""
    return ValueError(
        f"env_kwargs of {suite}:{name}: {sorted(keys)} not accepted; this env takes "
        f"{sorted(accepted)}"
    )


def box(low: Any, high: Any, shape: tuple[int, ...], dtype: Any) -> spaces.Box:
    """A gymnax Box with numpy bounds broadcast to `shape`."""
    shape = tuple(int(s) for s in shape)
    low, high = np.asarray(low), np.asarray(high)
    # uniform bounds as scalars (short reprs); others as arrays [*shape]
    low = (
        low.flat[0].item()
        if low.size and np.all(low == low.flat[0])
        else np.broadcast_to(low, shape)
    )
    high = (
        high.flat[0].item()
        if high.size and np.all(high == high.flat[0])
        else np.broadcast_to(high, shape)
    )
    return spaces.Box(low, high, shape, dtype)


def check_kwargs(suite: str, name: str, kwargs: Mapping[str, Any], accepted: Iterable[str]) -> None:
    """Raises `bad_kwargs` for any key of `kwargs` outside `accepted`."""
    unknown = set(kwargs) - set(accepted)
    if unknown:
        raise bad_kwargs(suite, name, unknown, accepted)
