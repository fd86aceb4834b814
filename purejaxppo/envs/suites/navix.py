"""Navix environments (`"navix:<id>"`, e.g. "navix:Navix-Empty-5x5-v0") as gymnax 1.0 envs.

Navix's `step` auto-resets lazily (the step AFTER a last timestep resets and ignores its
action); we call its `_step` (no reset) and reset in the same step, so
`final_observation` is the observation of the last timestep. Its own flags give:

- `terminated = timestep.is_termination()` (step type 2, e.g. goal reached),
- `truncated = timestep.is_truncation()` (step type 1: `t >= max_steps`; a goal reached
  on the last allowed step is a termination, Navix's `check_truncation`).

Observations: Navix's default for the id (symbolic: uint8 `[H, W, 3]`, Box(0, 8)),
or the `observation` kwarg; actions `Discrete(n)` (7 for MiniGrid's action set);
reward float32.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from purejaxppo.envs.suites._common import SuiteEnv, SuiteParams, bad_kwargs, box, unknown_name

EXTRA = "navix"


class NavixEnv(SuiteEnv):
    """A Navix `Environment` with the gymnax 1.0 API; the env state is Navix's `Timestep`."""

    def __init__(self, name: str, env: Any):
        space = env.observation_space
        obs_space = box(
            np.asarray(space.minimum), np.asarray(space.maximum), space.shape, space.dtype
        )
        action_space = spaces.Discrete(int(env.action_space.maximum) + 1)
        super().__init__(name, obs_space=obs_space, action_space=action_space)
        self.env = env
        self.max_steps_in_episode = int(env.max_steps)

    def reset_env(self, key: jax.Array, params: SuiteParams) -> tuple[jax.Array, Any]:
        timestep = self.env.reset(key)
        return timestep.observation, timestep

    def step_env(self, key: jax.Array, state: Any, action: jax.Array, params: SuiteParams):
        del key  # the Navix state carries its own key
        timestep = self.env._step(state, jnp.asarray(action, jnp.int32))
        return (
            timestep.observation,
            timestep,
            timestep.reward,
            timestep.is_termination(),
            timestep.is_truncation(),
            {},
        )


def make(name: str, env_kwargs: Mapping[str, Any]) -> tuple[NavixEnv, SuiteParams]:
    """Builds `"navix:<id>"`.

    env_kwargs: `max_steps` (Navix's default 100), `observation` (the name of a
    `navix.observations` function: "symbolic" (the default of most ids),
    "symbolic_first_person", "categorical", "rgb", ...), and any other field of the Navix
    environment (e.g. `gamma`, `penality_coeff`).

    Raises:
      ImportError: navix is not installed.
      ValueError: unknown id (close matches listed) or a kwarg the env rejects.
    """
    try:
        import navix
    except ImportError as err:
        raise ImportError(
            f"navix:{name} needs the optional extra: pip install 'purejaxppo[{EXTRA}]' ({err})"
        ) from None
    if name not in navix.registry():
        raise unknown_name("navix", name, navix.registry())
    kwargs = dict(env_kwargs)
    if "observation" in kwargs:
        observation = kwargs.pop("observation")
        if not isinstance(observation, str) or not hasattr(navix.observations, observation):
            raise ValueError(
                f"env_kwargs of navix:{name}: observation={observation!r} is not a function of "
                "navix.observations (e.g. 'symbolic', 'categorical', 'rgb')"
            )
        kwargs["observation_fn"] = getattr(navix.observations, observation)
    try:
        env = navix.make(name, **kwargs)
    except (TypeError, ValueError) as err:
        raise bad_kwargs("navix", name, env_kwargs, ["max_steps", "observation", "..."]) from err
    suite_env = NavixEnv(f"navix:{name}", env)
    return suite_env, suite_env.default_params
