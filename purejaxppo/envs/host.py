"""Host environments: envs that step on the host (NumPy / Python), not inside `jax.jit`.

A `HostEnv` (for example `make_env("gymnasium:CartPole-v1")`) declares gymnax spaces, so
`make_networks` builds the right actor-critic for it, but its episodes are stepped by
Python code: `make_train` trains on it with a host loop around a jitted policy step and
the jitted PPO update (`purejaxppo.host_train`); evaluation and video play their episodes
in a Python loop too (`purejaxppo.host_episodes`). Operations that trace the env inside a
compiled program (vmap over seeds, sweeps, PBT, data-parallel training) cannot use it and
are refused from `envs.kinds.HOST`'s table before anything compiles. An error of the env's
own code is one `EnvError` line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from purejaxppo.errors import EnvError

__all__ = ["HOST_SUITES", "EnvError", "HostEnv", "HostVecEnv", "is_host_env"]

#: Suite prefixes of `make_env` ids whose environments step on the host.
HOST_SUITES = ("gymnasium",)


class HostVecEnv:
    """N copies of a host environment stepped together (NumPy in, NumPy out).

    Every copy auto-resets in the step that ends its episode (gymnasium's `SAME_STEP`
    autoreset): `step` returns the first observation of the new episode in `obs` and the
    observation the step led to in `final_obs`, with `terminated` and `truncated` kept
    apart (GAE bootstraps truncated steps from V(final_obs)).
    """

    def __init__(
        self,
        reset: Callable[[int], Any],
        step: Callable[[np.ndarray], tuple[Any, np.ndarray, np.ndarray, np.ndarray, Any]],
        close: Callable[[], None],
        num_envs: int,
    ):
        self._reset, self._step, self._close = reset, step, close
        self.num_envs = num_envs

    def reset(self, seed: int) -> Any:
        """Resets the N envs (env i seeded with `seed + i`); returns obs `[N, ...]`."""
        return self._reset(seed)

    def step(self, action: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, Any]:
        """Steps the N envs with `action` `[N, ...]` (the env-action of `to_env_action`).

        Returns:
          `(obs, reward, terminated, truncated, final_obs)`: obs `[N, ...]` (the reset
          observation where the episode ended), reward float32 `[N]`, terminated / truncated
          bool `[N]`, final_obs `[N, ...]` (the observation before any reset; equal to obs
          where the episode goes on). Observations have the dtypes of
          `HostEnv.observation_space`.
        """
        return self._step(action)

    def close(self) -> None:
        self._close()


class HostEnv:
    """An environment that steps on the host, described by gymnax spaces.

    Not jittable: `make_vec(num_envs, mode)` builds the `HostVecEnv` that a training run steps.

    Attributes:
      name: the `make_env` id ("gymnasium:CartPole-v1").
      default_params: None (host envs take their settings at construction).
      max_steps_in_episode: the env's time limit, or None.
    """

    is_host_env = True
    default_params = None

    def __init__(
        self,
        name: str,
        observation_space: Any,
        action_space: Any,
        make_vec: Callable[[int, str], HostVecEnv],
        max_steps_in_episode: int | None = None,
        make_render: Callable[[], Any] | None = None,
    ):
        self.name = name
        self._observation_space = observation_space
        self._action_space = action_space
        self._make_vec = make_vec
        self._make_render = make_render
        self.max_steps_in_episode = max_steps_in_episode

    def __repr__(self) -> str:
        return f"HostEnv({self.name!r})"

    def observation_space(self, params: Any = None) -> Any:
        """The gymnax observation space (Box, Discrete, Dict, ...)."""
        return self._observation_space

    def action_space(self, params: Any = None) -> Any:
        """The gymnax action space (Discrete, Box, or purejaxppo's MultiDiscrete / MultiBinary)."""
        return self._action_space

    def row_observation(self, params: Any = None) -> Any:
        """One env's observation as `jax.ShapeDtypeStruct` leaves, from its space (a host
        env cannot be reset inside a trace; `envs.episodes.row_observation`)."""
        from purejaxppo.envs.episodes import space_structs

        return space_structs(self._observation_space)

    def make_vec(self, num_envs: int, mode: str = "sync") -> HostVecEnv:
        """N copies of the env, stepped together on the host: in this process ("sync") or
        one subprocess each ("async"; `PPOConfig.host_vectorization`)."""
        return self._make_vec(num_envs, mode)

    def make_render(self) -> Any:
        """One copy of the env that renders `rgb_array` frames (`env.render()` returns a
        uint8 `[H, W, 3]` array), stepped with the gymnasium API.

        Raises:
          ValueError: the env cannot render frames.
        """
        if self._make_render is None:
            raise ValueError(f"{self.name}: this host env has no renderer")
        return self._make_render()


def is_host_env(env: Any) -> bool:
    """Whether `env` steps on the host (a `HostEnv`), i.e. cannot be traced by `jax.jit`."""
    return bool(getattr(env, "is_host_env", False))


def is_host_env_id(env_id: str) -> bool:
    """Whether a `make_env` id names a host suite ("gymnasium:CartPole-v1")."""
    prefix, sep, _ = env_id.partition(":")
    return bool(sep) and prefix in HOST_SUITES
