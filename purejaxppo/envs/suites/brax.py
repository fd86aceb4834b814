"""Brax environments (`"brax:<name>"`, e.g. "brax:inverted_pendulum") as gymnax 1.0 envs.

The Brax env is wrapped in Brax's own `EpisodeWrapper(episode_length, action_repeat)`;
the auto-reset is ours (not Brax's `AutoResetWrapper`, which returns a cached first
state and keeps no final observation):

- `terminated = done & ~truncation`, `truncated = truncation`, where
  `truncation = state.info["truncation"]` is what `EpisodeWrapper` writes when the step
  count reaches `episode_length` and the env did not itself end the episode.
- observations: float32 `[observation_size]`, `Box(-inf, inf)`;
  actions: float32 `[action_size]`, `Box(-1, 1)`; reward: float32 scalar (summed over
  `action_repeat` physics steps).
- `info["final_observation"]`: the observation the step led to, before the reset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.envs.suites._common import SuiteEnv, SuiteParams, bad_kwargs, box, unknown_name

EXTRA = "brax"

#: Brax backend used unless env_kwargs names one. "spring" is the fastest of
#: "generalized" / "spring" / "positional" for inverted_pendulum on CPU
#: (8 envs x 200 steps, 2 CPU cores: compile 15 s / 21 s / 20 s, 31k / 18k / 10k steps/s
#: for spring / positional / generalized).
DEFAULT_BACKEND = "spring"


class EpisodeEnv(SuiteEnv):
    """A Brax-style env (`reset(rng) -> State`, `step(state, action) -> State`, with
    `observation_size` / `action_size`) inside Brax's `EpisodeWrapper`, auto-reset by
    `SuiteEnv`. Also used for MuJoCo Playground envs."""

    def __init__(self, name: str, wrapped: Any, obs_space: Any, action_size: int):
        action_space = box(-1.0, 1.0, (int(action_size),), jnp.float32)
        super().__init__(name, obs_space=obs_space, action_space=action_space)
        self.wrapped = wrapped  # EpisodeWrapper(env, episode_length, action_repeat)
        self.max_steps_in_episode = int(wrapped.episode_length)

    def reset_env(self, key: jax.Array, params: SuiteParams) -> tuple[Any, Any]:
        state = self.wrapped.reset(key)
        return state.obs, state

    def step_env(self, key: jax.Array, state: Any, action: jax.Array, params: SuiteParams):
        del key  # Brax steps are deterministic
        state = self.wrapped.step(state, jnp.asarray(action, jnp.float32))
        truncation = state.info["truncation"].astype(bool)
        terminated = state.done.astype(bool) & ~truncation
        return state.obs, state, state.reward, terminated, truncation, {}


def split_episode_kwargs(env_kwargs: Mapping[str, Any], where: str) -> tuple[int, int, dict]:
    """`(episode_length, action_repeat, the other kwargs)`; ValueError for a value < 1."""
    kwargs = dict(env_kwargs)
    episode_length = kwargs.pop("episode_length", 1000)
    action_repeat = kwargs.pop("action_repeat", 1)
    for key, value in (("episode_length", episode_length), ("action_repeat", action_repeat)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"env_kwargs of {where}: {key}={value!r} must be an integer >= 1")
    return episode_length, action_repeat, kwargs


def make(name: str, env_kwargs: Mapping[str, Any]) -> tuple[EpisodeEnv, SuiteParams]:
    """Builds `"brax:<name>"`.

    env_kwargs: `episode_length` (default 1000), `action_repeat` (default 1), `backend`
    (default `DEFAULT_BACKEND`), and any other constructor argument of the Brax env.

    Raises:
      ImportError: brax is not installed.
      ValueError: unknown name (close matches listed) or a kwarg the env rejects.
    """
    try:
        from brax import envs
        from brax.envs.wrappers.training import EpisodeWrapper
    except ImportError as err:
        raise ImportError(
            f"brax:{name} needs the optional extra: pip install 'purejaxppo[{EXTRA}]' ({err})"
        ) from None
    if name not in envs._envs:
        raise unknown_name("brax", name, envs._envs)
    episode_length, action_repeat, kwargs = split_episode_kwargs(env_kwargs, f"brax:{name}")
    kwargs.setdefault("backend", DEFAULT_BACKEND)
    try:
        env = envs.get_environment(name, **kwargs)
    except (TypeError, ValueError, KeyError, NotImplementedError) as err:
        raise bad_kwargs(
            "brax", name, kwargs, ["episode_length", "action_repeat", "backend", "..."]
        ) from err
    obs_space = box(-np.inf, np.inf, (int(env.observation_size),), jnp.float32)
    wrapped = EpisodeWrapper(env, episode_length, action_repeat)
    suite_env = EpisodeEnv(f"brax:{name}", wrapped, obs_space, env.action_size)
    return suite_env, suite_env.default_params
