"""Gymnasium environments ("gymnasium:<id>"), stepped on the host.

`make("CartPole-v1", env_kwargs)` returns a `HostEnv` whose spaces are the gymnax
equivalents of gymnasium's (Box, Discrete, Dict, Tuple, and purejaxppo's MultiDiscrete /
MultiBinary), and whose `make_vec(N, mode)` builds `gymnasium.make_vec(id, N, mode)` (mode
"sync" or "async", `PPOConfig.host_vectorization`) with
`AutoresetMode.SAME_STEP`: an env whose episode ends returns the new episode's first
observation in the same step and the last one in `info["final_obs"]`, which the wrapper
hands out as `final_obs` (terminated and truncated stay separate).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces as gx

from purejaxppo.envs.host import HostEnv, HostVecEnv
from purejaxppo.envs.spaces import MultiBinary, MultiDiscrete

__all__ = ["EXTRA", "convert_space", "make"]

#: The pip extra that installs gymnasium.
EXTRA = "gymnasium"


def _gymnasium():
    try:
        import gymnasium
    except ImportError as err:
        raise ImportError(
            f"gymnasium environments need gymnasium: pip install 'purejaxppo[{EXTRA}]'"
        ) from err
    return gymnasium


def convert_space(space: Any, where: str = "space") -> Any:
    """The gymnax space equivalent to a gymnasium space.

    Box -> gymnax Box (float64 becomes float32), Discrete (start 0) -> Discrete,
    MultiDiscrete (1-d, start 0) / MultiBinary (1-d) -> purejaxppo's, Dict / Tuple ->
    gymnax Dict / Tuple of the converted subspaces.

    Raises:
      ValueError: naming `where` for any other space, a Discrete / MultiDiscrete with a
        non-zero start, or a multi-dimensional MultiDiscrete / MultiBinary.
    """
    gym = _gymnasium()
    s = gym.spaces
    if isinstance(space, s.Box):
        dtype = jnp.float32 if np.issubdtype(space.dtype, np.floating) else space.dtype
        return gx.Box(space.low.astype(dtype), space.high.astype(dtype), space.shape, dtype)
    if isinstance(space, s.Discrete):
        if int(space.start) != 0:
            raise ValueError(f"{where}: Discrete start={space.start} (only start 0 is supported)")
        return gx.Discrete(int(space.n))
    if isinstance(space, s.MultiDiscrete):
        if space.nvec.ndim != 1 or np.any(space.start != 0):
            raise ValueError(f"{where}: {space} (only 1-d nvec with start 0 is supported)")
        return MultiDiscrete(space.nvec)
    if isinstance(space, s.MultiBinary):
        if np.ndim(space.n) != 0:
            raise ValueError(f"{where}: {space} (only MultiBinary(n) with an int n)")
        return MultiBinary(int(space.n))
    if isinstance(space, s.Dict):
        return gx.Dict({k: convert_space(v, f"{where}[{k!r}]") for k, v in space.spaces.items()})
    if isinstance(space, s.Tuple):
        return gx.Tuple([convert_space(v, f"{where}[{i}]") for i, v in enumerate(space.spaces)])
    raise ValueError(f"{where}: {type(space).__name__} spaces are not supported ({space})")


def _caster(space: Any):
    """obs batch `[N, ...]` -> arrays of the converted space's dtypes (Dict / Tuple: trees)."""
    if isinstance(space, gx.Dict):
        casts = {k: _caster(v) for k, v in space.spaces.items()}
        return lambda x: {k: cast(x[k]) for k, cast in casts.items()}
    if isinstance(space, gx.Tuple):
        casts = [_caster(v) for v in space.spaces]
        return lambda x: tuple(cast(v) for cast, v in zip(casts, x, strict=True))
    dtype = np.dtype(space.dtype)
    return lambda x: np.asarray(x, dtype)


def _with_final(obs: Any, final_obs: Any, done: np.ndarray) -> Any:
    """`obs` `[N, ...]` with row i replaced by `final_obs[i]` where done (`final_obs`: a
    sequence of per-env observations, gymnasium's `info["final_obs"]`)."""
    if isinstance(obs, dict):
        return {
            k: _with_final(
                v, [f[k] if d else None for f, d in zip(final_obs, done, strict=True)], done
            )
            for k, v in obs.items()
        }
    if isinstance(obs, tuple):
        return tuple(
            _with_final(
                v, [f[j] if d else None for f, d in zip(final_obs, done, strict=True)], done
            )
            for j, v in enumerate(obs)
        )
    out = np.array(obs, copy=True)
    for i in np.flatnonzero(done):
        out[i] = final_obs[i]
    return out


def make(name: str, env_kwargs: Mapping[str, Any] | None = None) -> tuple[HostEnv, None]:
    """Builds a gymnasium environment as a `HostEnv`.

    Args:
      name: a gymnasium id ("CartPole-v1", "LunarLander-v3", ...).
      env_kwargs: keyword arguments of `gymnasium.make` (the env's constructor arguments,
        and `max_episode_steps`).

    Returns:
      `(env, None)`: host envs have no `EnvParams`.

    Raises:
      ImportError: gymnasium, or a package the env needs (Box2D: the `box2d` extra), is
        missing (names the extra).
      ValueError: an unknown id (lists close matches from gymnasium's registry), a kwarg
        the env rejects (names the id and the kwarg), or an unsupported space.
    """
    gym = _gymnasium()
    env_kwargs = dict(env_kwargs or {})
    env_id = f"gymnasium:{name}"
    if name not in gym.registry:
        close = difflib.get_close_matches(name, list(gym.registry), n=5, cutoff=0.5)
        hint = f" Close matches: {', '.join(close)}." if close else ""
        raise ValueError(f"env_name={env_id!r}: {name!r} is not a gymnasium id.{hint}")
    try:
        probe = gym.make(name, **env_kwargs)
    except gym.error.DependencyNotInstalled as err:  # Box2D, MuJoCo, ...
        extra = "box2d" if "box2d" in str(err).lower() else EXTRA
        raise ImportError(f"{env_id} needs: pip install 'purejaxppo[{extra}]' ({err})") from err
    except TypeError as err:
        found = re.search(r"keyword argument '(\w+)'", str(err))
        bad = found.group(1) if found else sorted(env_kwargs)
        raise ValueError(
            f"env_kwargs={env_kwargs!r} for {env_id}: {bad!r} is not accepted ({err})"
        ) from None
    try:
        observation_space = convert_space(probe.observation_space, f"{env_id} observation")
        action_space = convert_space(probe.action_space, f"{env_id} action")
        max_steps = probe.spec.max_episode_steps if probe.spec is not None else None
        gym_action_space = probe.action_space
    finally:
        probe.close()
    cast = _caster(observation_space)
    action_dtype = gym_action_space.dtype

    def make_vec(num_envs: int, mode: str = "sync") -> HostVecEnv:
        vec = gym.make_vec(
            name,
            num_envs=num_envs,
            vectorization_mode=mode,  # "async": gymnasium's AsyncVectorEnv, a process each
            vector_kwargs={
                "autoreset_mode": gym.vector.AutoresetMode.SAME_STEP,
                # JAX's threads are running here: a forked child could deadlock on a
                # lock one of them held. The workers start from a clean server process.
                **({"context": "forkserver"} if mode == "async" else {}),
            },
            **env_kwargs,
        )

        def reset(seed: int) -> Any:
            obs, _ = vec.reset(seed=int(seed))
            return cast(obs)

        def step(action: np.ndarray):
            obs, reward, terminated, truncated, info = vec.step(
                np.asarray(action, action_dtype).reshape((num_envs, *gym_action_space.shape))
            )
            terminated = np.asarray(terminated, bool)
            truncated = np.asarray(truncated, bool)
            done = terminated | truncated
            final_obs = _with_final(obs, info["final_obs"], done) if done.any() else obs
            return (
                cast(obs),
                np.asarray(reward, np.float32),
                terminated,
                truncated,
                cast(final_obs),
            )

        return HostVecEnv(reset, step, vec.close, num_envs)

    env = HostEnv(env_id, observation_space, action_space, make_vec, max_steps)
    return env, None
