"""Jumanji environments (`"jumanji:<id>"`, e.g. "jumanji:Snake-v1") as gymnax 1.0 envs.

Jumanji steps as `reset(key) -> (state, TimeStep)` and `step(state, action) -> (state,
TimeStep)` with dm_env step types; its own flags give:

- `terminated = last & (discount == 0)`, `truncated = last & (discount != 0)`
  (Jumanji's `termination(...)` / `truncation(...)` TimeSteps). The flags are the env's:
  Snake-v1, for one, ends at its `time_limit` with `termination` (discount 0), so that
  end comes out as `terminated`.
- observations: the NamedTuple observation becomes a dict (one entry per field, nested
  NamedTuples as nested dicts) in a gymnax `Dict` space; each entry keeps its dtype
  (Snake: `grid` float32 `[12, 12, 5]` in [0, 1], `step_count` int32 `[]`,
  `action_mask` bool `[4]`, read by the policy through `action_mask_key`). A plain
  array observation stays a plain array.
- actions: `DiscreteArray(n)` -> `Discrete(n)`, `MultiDiscreteArray(nvec)` ->
  `purejaxppo.envs.spaces.MultiDiscrete(nvec)`, a float `BoundedArray` -> `Box`.
- `info`: the TimeStep's `extras` plus `final_observation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from purejaxppo.envs.spaces import MultiDiscrete
from purejaxppo.envs.suites._common import SuiteEnv, SuiteParams, bad_kwargs, box, unknown_name

EXTRA = "jumanji"


def _as_dict(obs: Any) -> Any:
    """NamedTuple observations (nested too) as dicts; arrays unchanged."""
    if hasattr(obs, "_asdict"):
        return {key: _as_dict(value) for key, value in obs._asdict().items()}
    if isinstance(obs, Mapping):
        return {key: _as_dict(value) for key, value in obs.items()}
    return obs


def _obs_space(spec: Any) -> Any:
    """A Jumanji observation spec as a gymnax space (`Dict` for structured specs)."""
    from jumanji import specs

    if isinstance(spec, specs.Array):
        if isinstance(spec, specs.BoundedArray):
            low, high = np.asarray(spec.minimum), np.asarray(spec.maximum)
        else:
            low, high = -np.inf, np.inf
        return box(low, high, spec.shape, spec.dtype)
    return spaces.Dict({key: _obs_space(sub) for key, sub in vars(spec)["_specs"].items()})


def _action_space(spec: Any) -> Any:
    from jumanji import specs

    if isinstance(spec, specs.DiscreteArray):
        return spaces.Discrete(int(spec.num_values))
    if isinstance(spec, specs.MultiDiscreteArray):
        return MultiDiscrete(np.asarray(spec.num_values).reshape(-1))
    if isinstance(spec, specs.BoundedArray):
        return box(np.asarray(spec.minimum), np.asarray(spec.maximum), spec.shape, spec.dtype)
    raise ValueError(f"Jumanji action spec {spec!r} has no gymnax / purejaxppo counterpart")


class JumanjiEnv(SuiteEnv):
    """A Jumanji `Environment` with the gymnax 1.0 API; see the module docstring.

    The env state is `(jumanji_state, timestep)`.
    """

    def __init__(self, name: str, env: Any, obs_keys: tuple[str, ...] | None):
        obs_space = _obs_space(env.observation_spec)
        if obs_keys is not None:
            obs_space = spaces.Dict({k: obs_space.spaces[k] for k in obs_keys})
        super().__init__(name, obs_space=obs_space, action_space=_action_space(env.action_spec))
        self.env = env
        self.obs_keys = obs_keys
        self.max_steps_in_episode = getattr(env, "time_limit", None)

    def _observe(self, timestep: Any) -> Any:
        obs = _as_dict(timestep.observation)
        if self.obs_keys is not None:
            obs = {key: obs[key] for key in self.obs_keys}
        return obs

    def reset_env(self, key: jax.Array, params: SuiteParams) -> tuple[Any, Any]:
        state, timestep = self.env.reset(key)
        return self._observe(timestep), (state, timestep)

    def step_env(self, key: jax.Array, state: Any, action: Any, params: SuiteParams):
        del key  # the Jumanji state carries its own key
        jumanji_state, timestep = self.env.step(state[0], action)
        last = timestep.last()
        no_discount = jnp.all(timestep.discount == 0)
        terminated = last & no_discount
        truncated = last & ~no_discount
        info = dict(timestep.extras or {})
        return (
            self._observe(timestep),
            (jumanji_state, timestep),
            timestep.reward,
            terminated,
            truncated,
            info,
        )


def make(name: str, env_kwargs: Mapping[str, Any]) -> tuple[JumanjiEnv, SuiteParams]:
    """Builds `"jumanji:<id>"`.

    env_kwargs: `obs_keys` (a list of observation fields to keep, e.g. `["grid",
    "action_mask"]`, to drop an unscaled counter such as Snake's `step_count`; default
    all), and any constructor argument of the Jumanji env (Snake: `num_rows`,
    `num_cols`, `time_limit`).

    Raises:
      ImportError: jumanji is not installed.
      ValueError: unknown id (close matches listed), a constructor argument the env
        rejects, or an `obs_keys` entry that is not an observation field.
    """
    try:
        import jumanji
    except ImportError as err:
        raise ImportError(
            f"jumanji:{name} needs the optional extra: pip install 'purejaxppo[{EXTRA}]' ({err})"
        ) from None
    if name not in jumanji.registered_environments():
        raise unknown_name("jumanji", name, jumanji.registered_environments())
    kwargs = dict(env_kwargs)
    obs_keys = kwargs.pop("obs_keys", None)
    try:
        env = jumanji.make(name, **kwargs)
    except TypeError as err:
        raise bad_kwargs("jumanji", name, kwargs, ["obs_keys", "<constructor args>"]) from err
    if obs_keys is not None:
        obs_keys = tuple(obs_keys)
        fields = _obs_space(env.observation_spec)
        fields = list(fields.spaces) if isinstance(fields, spaces.Dict) else []
        if not obs_keys or set(obs_keys) - set(fields):
            raise ValueError(
                f"env_kwargs of jumanji:{name}: obs_keys={list(obs_keys)} must be a non-empty "
                f"list of observation fields {fields}"
            )
    suite_env = JumanjiEnv(f"jumanji:{name}", env, obs_keys)
    return suite_env, suite_env.default_params
