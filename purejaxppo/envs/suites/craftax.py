"""Craftax environments (`"craftax:<id>"`, e.g. "craftax:Craftax-Classic-Symbolic-v1")
as gymnax 1.0 envs.

Built from Craftax's no-auto-reset classes (`make_craftax_env_from_name(id,
auto_reset=False)`); we call its `reset_env` / `step_env` (gymnax 0.0.x 5-tuple, one
`done`) and auto-reset ourselves so `final_observation` is exact. Craftax's `done` is
`is_terminal(state, params)` = time limit (`state.timestep >= params.max_timesteps`) or
a natural end (death; in full Craftax also beating the final boss). We split it with
Craftax's own test under params without the time limit:

- `terminated = is_terminal(state, params.replace(max_timesteps=2**31 - 1))`;
- `truncated = done & ~terminated` (the time limit alone).

Observations: Symbolic ids float32 `[n]` in [0, 1] (Classic: 1345); Pixels ids float32
`[H, W, 3]`. Actions `Discrete(17)` (Classic) / `Discrete(43)`. `info`: Craftax's (the
achievements and `discount`) plus `final_observation`. `env_params` is Craftax's
`EnvParams`: env_kwargs naming its fields (`max_timesteps`, `day_length`, ...) replace
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from gymnax.environments import spaces

from purejaxppo.envs.suites._common import SuiteEnv, box, unknown_name

EXTRA = "craftax"

#: The ids `craftax.craftax_env.make_craftax_env_from_name` builds without auto-reset.
CRAFTAX_IDS = (
    "Craftax-Symbolic-v1",
    "Craftax-Pixels-v1",
    "Craftax-Classic-Symbolic-v1",
    "Craftax-Classic-Pixels-v1",
)

_NO_TIME_LIMIT = 2**31 - 1


def _space(space: Any) -> Any:
    """A Craftax (gymnax 0.0.x copy) space as a gymnax 1.0 space."""
    if hasattr(space, "n"):
        return spaces.Discrete(int(space.n))
    return box(space.low, space.high, tuple(space.shape), space.dtype)


class CraftaxEnv(SuiteEnv):
    """A Craftax no-auto-reset env with the gymnax 1.0 API; see the module docstring."""

    def __init__(self, name: str, env: Any):
        super().__init__(name, default_params=env.default_params)
        self.env = env

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        return self.env.reset_env(key, params)

    def step_env(self, key: jax.Array, state: Any, action: jax.Array, params: Any):
        obs, state, reward, done, info = self.env.step_env(key, state, action, params)
        terminated = self.env.is_terminal(state, params.replace(max_timesteps=_NO_TIME_LIMIT))
        truncated = jnp.asarray(done, bool) & ~terminated
        return obs, state, reward, terminated, truncated, info

    def observation_space(self, params: Any) -> Any:
        return _space(self.env.observation_space(params))

    def action_space(self, params: Any) -> Any:
        return _space(self.env.action_space(params))


def make(name: str, env_kwargs: Mapping[str, Any]) -> tuple[CraftaxEnv, Any]:
    """Builds `"craftax:<id>"` (one of `CRAFTAX_IDS`).

    env_kwargs: fields of Craftax's `EnvParams` (e.g. `max_timesteps`, default 10000).

    Raises:
      ImportError: craftax is not installed.
      ValueError: unknown id (close matches listed) or a key that is not an `EnvParams`
        field (or a value of the wrong type).
    """
    try:
        from craftax.craftax_env import make_craftax_env_from_name
    except ImportError as err:
        raise ImportError(
            f"craftax:{name} needs the optional extra: pip install 'purejaxppo[{EXTRA}]' ({err})"
        ) from None
    if name not in CRAFTAX_IDS:
        raise unknown_name("craftax", name, CRAFTAX_IDS)
    from purejaxppo.envs.registry import check_overrides

    env = CraftaxEnv(f"craftax:{name}", make_craftax_env_from_name(name, auto_reset=False))
    params = env.default_params
    overrides = check_overrides(params, env_kwargs, f"env_kwargs of craftax:{name}")
    return env, params.replace(**overrides)
