"""What an episode is to evaluation, datasets and videos, and what one row observes.

Each kind of env (`kinds`) names one `Episodes` (`EnvKind.episodes_of`), and every
env adapter gives one row's observation (`row_observation`), so `evaluation`, `datasets`,
`video` and `networks.factory` never ask what kind of env they hold:

* `STEPS`: an episode ends where a step is `terminated` or `truncated`; it scores the sum of
  the rewards; a video keeps the observations.
* `atari_games(env)`: EnvPool Atari under `episodic_life`: an episode is the game (every
  life), as the training headline and the Atari papers score it (Machado et al. 2018): it
  ends at `info["game_over"]`, scores the raw, unclipped rewards (the adapter's
  `info["game_return"]`), and a video keeps the newest frame of each observation
  (`EnvPoolEnv.newest_frame`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "STEPS",
    "Episodes",
    "atari_games",
    "envpool_episodes",
    "row_observation",
    "space_structs",
]


class Episodes(NamedTuple):
    """How evaluation, datasets and videos see an env's steps.

    step: `(reward, terminated, truncated, info, score) -> (reward, terminated, truncated,
      score)`, all `[E]` (or `[]`): one env step as a step of the episode; `reward` float32,
      the flags bool; `score` float32 is state the caller carries for it (zeros at a reset):
      Atari's game return before the step in, after it out.
    frame: `obs -> what a video keeps of it` (one env's observation).
    """

    step: Callable[..., tuple[jax.Array, jax.Array, jax.Array, jax.Array]]
    frame: Callable[[Any], Any]


def _env_steps(reward, terminated, truncated, info, score):
    """An env's own step: its reward and flags (`score` passed on unused)."""
    del info
    return reward, terminated, truncated, score


def _game_steps(reward, terminated, truncated, info, score):
    """An EnvPool Atari step as a step of the game: the raw reward (the adapter's game
    return `info["game_return"]` less `score`, the game's return before the step: exact,
    Atari rewards being integers), `terminated` where the game ended (`info["game_over"]`,
    not at a lost life), `truncated` as EnvPool's time limit (which also ends the game);
    `score` after the step (0 where the game ended)."""
    del reward, terminated
    game_over = info["game_over"] > 0
    raw = info["game_return"] - score
    score = jnp.where(game_over, 0.0, info["game_return"])
    return raw, jnp.logical_and(game_over, ~truncated), truncated, score


#: Every env but EnvPool's Atari games: steps as the env gives them.
STEPS = Episodes(step=_env_steps, frame=lambda obs: obs)


def atari_games(env: Any) -> Episodes:
    """An EnvPool Atari env's games as episodes (see the module docstring)."""
    return Episodes(step=_game_steps, frame=env.newest_frame)


def envpool_episodes(env: Any) -> Episodes:
    """An `EnvPoolEnv`'s episodes: its games for Atari tasks, else `STEPS` (MuJoCo)."""
    return atari_games(env) if env.atari else STEPS


def row_observation(env: Any, env_params: Any) -> Any:
    """One row's observation as `jax.ShapeDtypeStruct` leaves, without stepping the env:
    the env's own `row_observation(env_params)` where it has one (a host env: its
    spaces; a JaxMARL env: one agent's row of its `[A, ...]` observation), else the
    dtypes `reset` really returns (some envs' spaces declare float32 for integers)."""
    own = getattr(env, "row_observation", None)
    if callable(own):
        return own(env_params)
    example, _ = jax.eval_shape(env.reset, jax.random.key(0), env_params)
    return example


def space_structs(space: Any) -> Any:
    """A gymnax space as a pytree of `jax.ShapeDtypeStruct` (dicts / tuples unpacked)."""
    inner = getattr(space, "spaces", None)
    if isinstance(inner, dict):
        return {k: space_structs(s) for k, s in inner.items()}
    if isinstance(inner, (list, tuple)):
        return tuple(space_structs(s) for s in inner)
    return jax.ShapeDtypeStruct(tuple(space.shape), space.dtype)
