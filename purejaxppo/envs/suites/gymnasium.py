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
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces as gx

from purejaxppo.envs.host import HostEnv, HostVecEnv, track_workers
from purejaxppo.envs.spaces import MultiBinary, MultiDiscrete
from purejaxppo.errors import EnvError, describe_error

__all__ = ["EXTRA", "convert_space", "from_factory", "make"]

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


def _caster(space: Any, env_id: str = "gymnasium env", where: str = "observation"):
    """`cast(obs, what)`: obs batch `[N, ...]` -> arrays of the converted space's dtypes
    (Dict / Tuple: trees), checked against the space: an observation that does not convert
    or is of another shape, or a non-finite float one, is the env's `EnvError`, naming the
    env, the part of the observation, the env row and `what` ("reset" / "step")."""
    if isinstance(space, gx.Dict):
        casts = {k: _caster(v, env_id, f"{where}[{k!r}]") for k, v in space.spaces.items()}
        return lambda x, what="step": {k: cast(x[k], what) for k, cast in casts.items()}
    if isinstance(space, gx.Tuple):
        casts = [_caster(v, env_id, f"{where}[{i}]") for i, v in enumerate(space.spaces)]
        return lambda x, what="step": tuple(cast(v, what) for cast, v in zip(casts, x, strict=True))
    dtype, shape = np.dtype(space.dtype), tuple(getattr(space, "shape", ()) or ())
    floating = np.issubdtype(dtype, np.floating)

    def cast(x: Any, what: str = "step") -> np.ndarray:
        try:
            out = np.asarray(x, dtype)
        except (TypeError, ValueError) as err:
            raise EnvError(
                f"env {env_id} returned an {where} that is not {dtype} {shape} in {what} "
                f"({type(x).__name__}: {err})"
            ) from None
        if out.shape[1:] != shape:
            raise EnvError(
                f"env {env_id} returned an {where} of shape {out.shape[1:]} in {what}; its "
                f"observation space says {shape}"
            )
        if floating and not np.isfinite(out).all():
            row = int(np.flatnonzero(~np.isfinite(out.reshape(len(out), -1)).all(axis=1))[0])
            raise EnvError(
                f"env {env_id} returned a non-finite {where} (env {row}) in {what}: the env "
                "produced it, not the training"
            )
        return out

    return cast


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
      name: a gymnasium id ("CartPole-v1", "LunarLander-v3", ...; the probes as
        "purejaxppo/Probe1-v0", `envs.probes.gymnasium_probes`).
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
    if name.startswith("purejaxppo/"):  # the probes (registered on import)
        import purejaxppo.envs.probes.gymnasium_probes  # noqa: F401
    if name not in gym.registry:
        raise _unknown_id(gym, name, env_id)

    def factory(**kwargs: Any) -> Any:
        return gym.make(name, **env_kwargs, **kwargs)

    try:
        probe = factory()
    except gym.error.DependencyNotInstalled as err:  # Box2D, MuJoCo, ...
        found = [e for e in ("box2d", "mujoco") if e in str(err).lower()]
        extra = found[0] if found else EXTRA
        raise ImportError(f"{env_id} needs: pip install 'purejaxppo[{extra}]' ({err})") from err
    except TypeError as err:
        found = re.search(r"keyword argument '(\w+)'", str(err))
        bad = found.group(1) if found else sorted(env_kwargs)
        raise ValueError(
            f"env_kwargs={env_kwargs!r} for {env_id}: {bad!r} is not accepted ({err})"
        ) from None

    def make_vec(num_envs: int, mode: str = "sync") -> Any:
        return gym.make_vec(
            name,
            num_envs=num_envs,
            vectorization_mode=mode,  # "async": gymnasium's AsyncVectorEnv, a process each
            vector_kwargs=_vector_kwargs(gym, mode),
            **env_kwargs,
        )

    return _host_env(env_id, probe, make_vec, factory), None


def _unknown_id(gym: Any, name: str, env_id: str) -> ValueError:
    """The error of `make` for `name`, not in gymnasium's registry: a "module:EnvId"
    (naming the module to import first), else an unknown id (with close matches)."""
    module, colon, registered = name.rpartition(":")
    if colon:  # gymnasium's "module:EnvId" form: importing is the command line's call
        return ValueError(
            f"env_name={env_id!r}: purejaxppo does not import modules named in env ids; "
            f"import {module!r} first (the CLI: --import {module} --env-name "
            f"gymnasium:{registered}; Python: import {module})"
        )
    close = difflib.get_close_matches(name, list(gym.registry), n=5, cutoff=0.5)
    hint = f" Close matches: {', '.join(close)}." if close else ""
    return ValueError(f"env_name={env_id!r}: {name!r} is not a gymnasium id.{hint}")


def from_factory(factory: Callable[..., Any], name: str | None = None) -> HostEnv:
    """A `HostEnv` from your own gymnasium env: `factory()` returns a new `gymnasium.Env`.

    Every copy the run steps is `factory()` (`gymnasium.vector.SyncVectorEnv`, or
    `AsyncVectorEnv` under `host_vectorization: async`, which needs a factory that pickles:
    a module-level function, not a lambda). Video calls `factory(render_mode="rgb_array")`
    when the factory takes that keyword.

    Args:
      factory: a callable returning a `gymnasium.Env`.
      name: the env's name in messages and run directories (default: the env spec's id,
        else the env's class name), prefixed "gymnasium:".

    Raises:
      ValueError: `factory` is not callable, returns no `gymnasium.Env` (names what it
        returned), or returns envs whose spaces differ (names both).
    """
    gym = _gymnasium()
    if not callable(factory):
        raise ValueError(f"env={factory!r}: pass a gymnasium env factory (a callable)")
    probe = factory()
    if not isinstance(probe, gym.Env):
        raise ValueError(
            f"env factory {getattr(factory, '__name__', factory)!r} returned "
            f"{type(probe).__name__}, not a gymnasium.Env"
        )
    if name is None:
        name = probe.spec.id if probe.spec is not None else type(probe.unwrapped).__name__
    env_id = name if name.startswith("gymnasium:") else f"gymnasium:{name}"
    spaces = (probe.observation_space, probe.action_space)

    def checked_factory(**kwargs: Any) -> Any:
        env = factory(**kwargs)
        if not isinstance(env, gym.Env):
            raise ValueError(f"{env_id}: the factory returned {type(env).__name__}")
        if (env.observation_space, env.action_space) != spaces:
            got = (env.observation_space, env.action_space)
            env.close()
            raise ValueError(
                f"{env_id}: the factory returned envs with different spaces: {spaces} and {got}"
            )
        return env

    def make_vec(num_envs: int, mode: str = "sync") -> Any:
        cls = gym.vector.AsyncVectorEnv if mode == "async" else gym.vector.SyncVectorEnv
        return cls([checked_factory] * num_envs, **_vector_kwargs(gym, mode))

    return _host_env(env_id, probe, make_vec, checked_factory)


def _vector_kwargs(gym: Any, mode: str) -> dict[str, Any]:
    return {
        "autoreset_mode": gym.vector.AutoresetMode.SAME_STEP,
        # JAX's threads are running here: a forked child could deadlock on a lock one of
        # them held. The workers start from a clean server process.
        **({"context": "forkserver"} if mode == "async" else {}),
    }


def _host_env(
    env_id: str, probe: Any, make_gym_vec: Callable[[int, str], Any], factory: Callable
) -> HostEnv:
    """The `HostEnv` of `probe`'s spaces whose `make_vec` wraps `make_gym_vec`'s vector
    env (SAME_STEP autoreset) and whose `make_render` builds one rgb_array env."""
    try:
        observation_space = convert_space(probe.observation_space, f"{env_id} observation")
        action_space = convert_space(probe.action_space, f"{env_id} action")
        max_steps = probe.spec.max_episode_steps if probe.spec is not None else None
        gym_action_space = probe.action_space
    finally:
        probe.close()
    cast = _caster(observation_space, env_id)
    action_dtype = gym_action_space.dtype

    def make_vec(num_envs: int, mode: str = "sync") -> HostVecEnv:
        vec = make_gym_vec(num_envs, mode)
        if mode == "async":  # a stop at once kills its workers (`host.kill_workers`)
            track_workers(vec)
        where = f" (in one of its {num_envs} worker processes)" if mode == "async" else ""

        def guarded(what: str, call: Callable[[], Any]) -> Any:
            """`call()`, with an error of the env's own code as one `EnvError` line."""
            gym = _gymnasium()
            level = gym.logger.min_level
            gym.logger.min_level = gym.logger.ERROR + 10  # async: no worker traceback dump
            try:
                return call()
            except (EOFError, BrokenPipeError, ConnectionError) as err:
                raise EnvError(
                    f"env {env_id}: a worker process died during {what}{where} "
                    f"({describe_error(err)})"
                ) from err
            except Exception as err:
                raise EnvError(
                    f"env {env_id} raised in {what}{where}: {describe_error(err)}"
                ) from err
            finally:
                gym.logger.min_level = level

        def reset(seed: int | Sequence[int]) -> Any:
            seed = int(seed) if np.ndim(seed) == 0 else [int(s) for s in seed]
            obs, _ = guarded("reset", lambda: vec.reset(seed=seed))
            return cast(obs, "reset")

        def step(action: np.ndarray):
            shaped = np.asarray(action, action_dtype).reshape((num_envs, *gym_action_space.shape))
            obs, reward, terminated, truncated, info = guarded("step", lambda: vec.step(shaped))
            reward = np.asarray(reward, np.float32)
            if not np.isfinite(reward).all():
                bad = int(np.flatnonzero(~np.isfinite(reward))[0])
                raise EnvError(
                    f"env {env_id} returned a non-finite reward {reward[bad]} (env {bad}) in step"
                )
            terminated = np.asarray(terminated, bool)
            truncated = np.asarray(truncated, bool)
            done = terminated | truncated
            final_obs = _with_final(obs, info["final_obs"], done) if done.any() else obs
            return (
                cast(obs),
                reward,
                terminated,
                truncated,
                cast(final_obs),
            )

        return HostVecEnv(reset, step, vec.close, num_envs)

    def make_render() -> Any:
        # pygame (classic control, Box2D) opens an audio device it never uses; without
        # one it prints ALSA errors. Frames need no sound.
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            # Without a display gymnasium's MuJoCo renderer tries GLFW first, which needs
            # one, and fails; EGL renders headless (a GPU or libEGL).
            os.environ.setdefault("MUJOCO_GL", "egl")
        try:
            return factory(render_mode="rgb_array")
        except TypeError as err:
            raise ValueError(f"{env_id}: the env cannot render rgb_array frames ({err})") from None

    return HostEnv(env_id, observation_space, action_space, make_vec, max_steps, make_render)
