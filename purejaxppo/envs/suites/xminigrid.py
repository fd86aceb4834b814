"""XLand-MiniGrid environments (`"xminigrid:<id>"`, e.g. "xminigrid:MiniGrid-Empty-6x6")
as gymnax 1.0 envs.

`env, env_params = xminigrid.make(id)`; XLand-MiniGrid steps as `reset(params, key) ->
TimeStep`, `step(params, timestep, action) -> TimeStep` (no auto-reset) with dm_env step
types. Its own flags give:

- `terminated = last & (discount == 0)` (goal reached),
- `truncated = last & (discount != 0)` (`step_num == params.max_steps` without the goal).

Observations: uint8 `[view_size, view_size, 2]` (tile id, colour; Box(0, 12));
actions `Discrete(6)`; reward float32 (`1 - 0.9 * steps / max_steps` at the goal).
`env_params` is XLand-MiniGrid's `EnvParams` (static fields: height, width,
view_size, max_steps); env_kwargs naming its fields replace them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from gymnax.environments import spaces

from purejaxppo.envs.suites._common import SuiteEnv, bad_kwargs, box, unknown_name

EXTRA = "xminigrid"


class XMiniGridEnv(SuiteEnv):
    """An XLand-MiniGrid env with the gymnax 1.0 API; the env state is its `TimeStep`."""

    def __init__(self, name: str, env: Any, params: Any):
        super().__init__(name, default_params=params)
        self.env = env

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        timestep = self.env.reset(params, key)
        return timestep.observation, timestep

    def step_env(self, key: jax.Array, state: Any, action: jax.Array, params: Any):
        del key  # the XLand-MiniGrid state carries its own key
        timestep = self.env.step(params, state, jnp.asarray(action, jnp.int32))
        last = timestep.last()
        no_discount = timestep.discount == 0
        return (
            timestep.observation,
            timestep,
            timestep.reward,
            last & no_discount,
            last & ~no_discount,
            {},
        )

    def observation_space(self, params: Any) -> spaces.Box:
        from xminigrid.core.constants import NUM_COLORS, NUM_TILES

        high = max(NUM_TILES, NUM_COLORS) - 1
        return box(0, high, self.env.observation_shape(params), jnp.uint8)

    def action_space(self, params: Any) -> spaces.Discrete:
        return spaces.Discrete(int(self.env.num_actions(params)))


def make(name: str, env_kwargs: Mapping[str, Any]) -> tuple[XMiniGridEnv, Any]:
    """Builds `"xminigrid:<id>"`.

    env_kwargs: fields of XLand-MiniGrid's `EnvParams` (`max_steps`, `view_size`, ...;
    `height` / `width` only where the env allows).

    Raises:
      ImportError: xminigrid is not installed.
      ValueError: unknown id (close matches listed) or a key that is not an `EnvParams`
        field.
    """
    try:
        import xminigrid
    except ImportError as err:
        raise ImportError(
            f"xminigrid:{name} needs the optional extra: pip install 'purejaxppo[{EXTRA}]' ({err})"
        ) from None
    if name not in xminigrid.registered_environments():
        raise unknown_name("xminigrid", name, xminigrid.registered_environments())
    env, params = xminigrid.make(name)
    fields = [f.name for f in dataclasses.fields(params)]
    if set(env_kwargs) - set(fields):
        raise bad_kwargs("xminigrid", name, set(env_kwargs) - set(fields), fields)
    from purejaxppo.envs.registry import _check_values

    where = f"env_kwargs of xminigrid:{name}"
    defaults = {k: getattr(params, k) for k in fields if getattr(params, k) is not None}
    params = params.replace(**_check_values(defaults, env_kwargs, where))
    return XMiniGridEnv(f"xminigrid:{name}", env, params), params
