"""Host environments: envs that step on the host (NumPy / Python), not in XLA.

A `HostEnv` (for example `make_env("gymnasium:CartPole-v1")`) declares gymnax spaces, so
`make_networks` builds the right actor-critic for it, and has gymnax's `reset` / `step`:
vmapped over the N envs of a run (and over R runs batched in one program: `--num-seeds`,
sweeps, PBT), they become ONE `io_callback` of one vector env of R x N copies
(`envs.host_calls.batched_call`), so a host env trains in the same compiled rollout as
every other kind. Evaluation, datasets and video play their episodes in a Python loop
around the jitted policy step (`purejaxppo.acting.host`). An error of the env's own code
is one `EnvError` line.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from purejaxppo.envs.episodes import space_structs
from purejaxppo.envs.host_calls import after, batched_call
from purejaxppo.errors import EnvError, describe_error

__all__ = [
    "HOST_SUITES",
    "EnvError",
    "HostEnv",
    "HostState",
    "HostVecEnv",
    "is_host_env",
    "kill_workers",
    "track_workers",
]

#: Suite prefixes of `make_env` ids whose environments step on the host.
HOST_SUITES = ("gymnasium",)


#: Vector envs whose copies step in worker processes (gymnasium's AsyncVectorEnv), so a stop
#: at once can end them (`kill_workers`): a hung worker outlives its parent otherwise.
_WITH_WORKERS: weakref.WeakSet = weakref.WeakSet()


def track_workers(vec: Any) -> Any:
    """Registers a vector env whose `processes` are worker processes; returns it."""
    _WITH_WORKERS.add(vec)
    return vec


def kill_workers() -> int:
    """Kills (SIGKILL) the live worker processes of every tracked vector env, for a stop
    at once (a second Ctrl-C, the process about to end without closing its envs); returns
    how many it killed. A worker hung in the env's own code cannot be asked to close."""
    killed = 0
    for vec in list(_WITH_WORKERS):
        for process in getattr(vec, "processes", None) or ():
            if process.is_alive():
                process.kill()
                killed += 1
        for process in getattr(vec, "processes", None) or ():
            process.join(timeout=5)
    return killed


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

    def reset(self, seed: int | Sequence[int]) -> Any:
        """Resets the N envs (env i seeded with `seed + i`, or with `seed[i]` given N
        seeds); returns obs `[N, ...]`."""
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


@struct.dataclass
class HostState:
    """One host env's state inside the program; the env itself lives on the host.

    Attributes:
      elapsed_step: steps of the current episode; int32 `[]`. It also orders the host
        calls (each step's action reads the previous one's).
    """

    elapsed_step: jax.Array  # shape=(), dtype=int32


class HostEnv:
    """An environment that steps on the host, described by gymnax spaces.

    `reset(key, params) -> (obs, HostState)` and `step(key, state, action, params) ->
    (obs, state, reward, terminated, truncated, info)` have gymnax's API and are meant to
    be vmapped over the N envs of a run: one vmapped call is one call of a vector env of N
    copies (`make_vec(N, mode)`), made on the host from inside the compiled program.
    `info["final_observation"]` is the observation a step led to (before gymnasium's
    same-step autoreset), so GAE bootstraps truncated steps exactly. Vector envs are kept
    per env object and batch size, and every `reset` reseeds one (env i from key i):
    evaluation and datasets make their own env object and vector env.

    Attributes:
      name: the `make_env` id ("gymnasium:CartPole-v1").
      default_params: None (host envs take their settings at construction).
      max_steps_in_episode: the env's time limit, or None.
      mode: how the copies step: "sync" (in this process) or "async" (one subprocess
        each; `PPOConfig.host_vectorization`, set by `vectorized`).
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
        mode: str = "sync",
    ):
        self.name = name
        self._observation_space = observation_space
        self._action_space = action_space
        self._make_vec = make_vec
        self._make_render = make_render
        self.max_steps_in_episode = max_steps_in_episode
        self.mode = mode
        self._vecs: dict[int, HostVecEnv] = {}
        self._lock = threading.Lock()
        self._renders = False  # `check_render` passed
        obs = self.row_observation()

        def shapes(n: int, tree: Any = obs) -> Any:
            return jax.tree.map(lambda s: jax.ShapeDtypeStruct((n, *s.shape), s.dtype), tree)

        def step_shapes(n: int) -> tuple[Any, Any, jax.ShapeDtypeStruct]:
            # reward, terminated, truncated packed as float32 [N, 3]: one transfer less.
            return shapes(n), shapes(n), jax.ShapeDtypeStruct((n, 3), jnp.float32)

        self._reset_call = batched_call(self._host_reset, shapes)
        self._step_call = batched_call(self._host_step, step_shapes)

    def __repr__(self) -> str:
        return f"HostEnv({self.name!r})"

    def vectorized(self, mode: str) -> HostEnv:
        """This env with its copies stepped in `mode` ("sync" / "async"): itself when
        already so, else a new env object (with vector envs of its own)."""
        if mode == self.mode:
            return self
        return HostEnv(
            self.name,
            self._observation_space,
            self._action_space,
            self._make_vec,
            self.max_steps_in_episode,
            self._make_render,
            mode,
        )

    def _host_reset(self, seeds: np.ndarray) -> Any:
        num_envs = int(seeds.shape[0])
        with self._lock:
            vec = self._vecs.get(num_envs)
            if vec is None:
                vec = self._vecs[num_envs] = self._make_vec(num_envs, self.mode)
            return vec.reset([int(s) for s in np.asarray(seeds, np.int64) % (2**31 - 1)])

    def _host_step(self, action: np.ndarray) -> tuple[Any, Any, np.ndarray]:
        num_envs = int(action.shape[0])
        with self._lock:
            vec = self._vecs.get(num_envs)
            if vec is None:
                raise RuntimeError(f"{self.name}: step before reset for {num_envs} envs")
            obs, reward, terminated, truncated, final_obs = vec.step(action)
        scalars = np.stack([reward, terminated, truncated], axis=1).astype(np.float32)
        return obs, final_obs, scalars

    def reset(self, key: jax.Array, params: Any = None) -> tuple[Any, HostState]:
        """One env's reset (vmap it over N keys: one reset of a vector env of N copies,
        env i seeded from key i's bits). `key`: a typed or raw PRNG key; `params` unused.
        Returns obs (the space's shapes and dtypes) and `HostState`.

        Raises (when the compiled program runs; `errors_of_envs` re-raises them):
          EnvError: the env's own reset failed.
        """
        if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
            key = jax.random.key_data(key)
        obs = self._reset_call(jax.random.bits(key, (), jnp.uint32))
        return obs, HostState(elapsed_step=jnp.zeros((), jnp.int32))

    def step(self, key: jax.Array, state: HostState, action: Any, params: Any = None) -> tuple:
        """One env's step (vmap it over the N envs reset together: one step of their
        vector env, gymnasium's same-step autoreset). `action`: the env action
        (`networks.to_env_action`); `key` and `params` unused.

        Returns:
          `(obs, state, reward float32 [], terminated bool [], truncated bool [], info)`,
          `info["final_observation"]` the observation before any reset.

        Raises (when the compiled program runs; `errors_of_envs` re-raises them):
          EnvError: the env's own step failed or returned a non-finite reward.
        """
        obs, final_obs, scalars = self._step_call(after(action, state.elapsed_step))
        terminated, truncated = scalars[1] > 0, scalars[2] > 0
        elapsed = jnp.where(terminated | truncated, 0, state.elapsed_step + 1)
        info = {"final_observation": final_obs}
        return obs, HostState(elapsed_step=elapsed), scalars[0], terminated, truncated, info

    def observation_space(self, params: Any = None) -> Any:
        """The gymnax observation space (Box, Discrete, Dict, ...)."""
        return self._observation_space

    def action_space(self, params: Any = None) -> Any:
        """The gymnax action space (Discrete, Box, or purejaxppo's MultiDiscrete / MultiBinary)."""
        return self._action_space

    def row_observation(self, params: Any = None) -> Any:
        """One env's observation as `jax.ShapeDtypeStruct` leaves, from its space
        (`envs.episodes.row_observation`)."""
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

    def check_render(self) -> None:
        """Renders one frame of a fresh rendering copy (`make_render`, reset with seed 0),
        once per env object, so that a video fails before its episode runs.

        Raises:
          ValueError: the env cannot render an RGB frame, in one line (a MuJoCo env: the
            OpenGL backends to set, `MUJOCO_GL`).
        """
        if self._renders:
            return
        env = self.make_render()
        try:
            env.reset(seed=0)
            frame = np.asarray(env.render())
        except Exception as err:
            mujoco = "mujoco" in type(getattr(env, "unwrapped", env)).__module__
            hint = (
                "; MuJoCo renders with OpenGL: set MUJOCO_GL=egl (a GPU or libEGL) or "
                "MUJOCO_GL=osmesa (software), or run with a display"
                if mujoco
                else ""
            )
            raise ValueError(
                f"{self.name}: cannot render rgb_array frames ({describe_error(err)}){hint}"
            ) from None
        finally:
            with contextlib.suppress(Exception):  # a renderer that failed may fail closing
                env.close()
        if frame.ndim != 3 or frame.shape[-1] != 3:
            raise ValueError(
                f"{self.name}: render() returned shape {frame.shape}, not an RGB frame [H, W, 3]"
            )
        self._renders = True


def is_host_env(env: Any) -> bool:
    """Whether `env` steps on the host (a `HostEnv`): its copies live in host memory, called
    from inside the compiled program (`envs.host_calls`)."""
    return bool(getattr(env, "is_host_env", False))


def is_host_env_id(env_id: str) -> bool:
    """Whether a `make_env` id names a host suite ("gymnasium:CartPole-v1")."""
    prefix, sep, _ = env_id.partition(":")
    return bool(sep) and prefix in HOST_SUITES
