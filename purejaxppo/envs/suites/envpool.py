"""EnvPool environments ("envpool:<task id>"): MuJoCo and Atari stepped by EnvPool's C++
thread pool from inside the one jitted training program.

`make("HalfCheetah-v4", env_kwargs)` returns an `EnvPoolEnv` with the gymnax 1.0 API.
The rollout vmaps `env.step` over its N envs; the adapter's batching rule
(`jax.custom_batching.custom_vmap`) turns that vmap into ONE call of a pool of N envs
(`envpool.make(id, env_type="gymnasium", num_envs=N)`), made through
`jax.experimental.io_callback` inside the compiled program (no Python loop around it).

Why a host callback and not EnvPool's XLA `(handle, recv, send, step) = env.xla()`:
  * MuJoCo's XLA `send` takes float64 actions and `recv` gives float64 observations.
    With JAX's default (x64 off) the call refuses float32 actions; enabling x64 only
    around the step inside `jit` aborted the process. The callback converts
    on the host, so the training program stays float32 whatever `jax_enable_x64` says.
  * EnvPool auto-resets on the step AFTER an episode ends (the action is ignored, the
    reward is 0). The gymnax API needs the new episode's first observation in the same
    step. The adapter resets the ended envs at once (`pool.reset(env_ids)`, a partial
    reset, which the fixed-shape XLA `send` cannot express), so the learner never sees
    EnvPool's extra reset step.
  * An XLA handle is bound to one pool when the program is traced; EnvPool pools cannot
    be reseeded, so runs with different keys would share one random stream.
The cost: one host round trip per step of all N envs. Measured (benchmarks/reference.py
--env-only, HalfCheetah-v4, 2-core CPU shared with other jobs, so noisy): the adapter in
jit ran 1850 (1 env) / 5779 (8 envs) env steps/s against 6303 / 14253 stepping EnvPool
directly from Python; more envs per step amortise it. Later, nearly idle: 20.5k (8 envs) /
45.0k (32 envs) in jit against EnvPool's own 46.8k / 64.1k, about 80-120 us of callback
round trip plus ~45 us of numpy per call (benchmarks/mujoco_speed.py). So
configs/mujoco.yaml uses 32 envs x 64 steps.

Semantics:
  * `terminated` / `truncated` are EnvPool's own flags (`truncated` = its TimeLimit,
    `max_episode_steps`); `info["final_observation"]` is the observation the step led to
    (before the reset), so GAE bootstraps truncated steps from V(final observation)
    exactly.
  * Observations are float32 (MuJoCo) or uint8 `[84, 84, stack]` channels-last frames
    (Atari, EnvPool's `[stack, 84, 84]` transposed); actions are float32 `[A]` or an int.
  * Atari `info`: `game_return` (the unclipped return of the whole game so far, all
    lives), `game_over` (1.0 where the game ended, 0.0 at a lost life under
    `episodic_life`) and `game_over_return` (`game_return` where the game ended, else 0):
    the training metrics count games from them (`envs.rows.envpool_rows`: `episode_return`
    is the mean full-game return, whatever `episodic_life` / `reward_clip` do to the
    learning signal; `info/episode_return_clipped` the learner's episodes).
  * Video: EnvPool renders no frames; Atari videos show each observation's newest frame
    (`newest_frame`), MuJoCo tasks play their gymnasium twin (`envs.twins`).
  * Seeding: `reset` (vmapped over N keys) rebuilds the pool with one EnvPool seed per
    env drawn from its key, so a run is reproducible from its key.
  * Runs batched in one program (`--num-seeds`, sweeps, PBT: a vmap over R runs of the
    vmap over each run's N envs) share ONE pool of R x N envs: the batching rule of the
    outer vmap flattens `[R, N, ...]` to `[R * N, ...]`, makes one host call and reshapes
    back, so run r owns envs r * N .. r * N + N - 1, seeded from run r's keys: a run in a
    batch steps the episodes it steps alone. Their inits are vmapped too
    (`parallel.batch_runs(vmap_init=True)`; a `lax.map` of R inits would rebuild the pool
    R times, N envs each), so the runs' reset is one reset of the R x N pool. The pool
    lives on one host and one device: runs split over several devices and data-parallel
    training are refused before anything compiles (`kinds.ENVPOOL`'s table).
  * Pools are kept per env object and batch size: evaluation, `collect` and evaluation
    during training make their own env object (`make_env`), so their pools never
    disturb the training pool.
  * Resuming a checkpoint: the pool lives on the host and is rebuilt only by `reset`, so
    `purejaxppo train --resume` (one run) restarts the envs' episodes and continues the
    params, optimizer state and statistics (not bitwise the uninterrupted run). A PBT
    population does not resume on an EnvPool id (refused from `kinds`' table before
    anything on disk changes).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import spaces

from purejaxppo.envs.host_calls import after, batched_call
from purejaxppo.envs.suites._common import (
    SuiteEnv,
    SuiteParams,
    box,
    raw_key,
    unknown_name,
)

__all__ = [
    "ATARI_OPTIONS",
    "EXTRA",
    "EnvPoolEnv",
    "EnvPoolState",
    "is_envpool_id",
    "make",
]

#: The pip extra that installs EnvPool.
EXTRA = "envpool"

#: EnvPool settings that belong to the pool, not the task: the adapter sets them.
_POOL_KEYS = frozenset(
    {
        "num_envs",
        "batch_size",
        "num_threads",
        "max_num_players",
        "thread_affinity_offset",
        "base_path",
        "seed",
        "env_seed",
        "gym_reset_return_info",
    }
)

#: Options of EnvPool's Atari tasks (refused on other tasks, naming the option).
ATARI_OPTIONS = frozenset(
    {
        "stack_num",
        "frame_skip",
        "noop_max",
        "zero_discount_on_life_loss",
        "episodic_life",
        "reward_clip",
        "use_fire_reset",
        "img_height",
        "img_width",
        "task",
        "mode",
        "difficulty",
        "full_action_space",
        "repeat_action_probability",
        "use_inter_area_resize",
        "gray_scale",
    }
)

#: Options of EnvPool's MuJoCo tasks that Atari tasks do not take.
MUJOCO_OPTIONS = frozenset(
    {
        "xml_file",
        "frame_stack",
        "post_constraint",
        "reset_noise_scale",
        "ctrl_cost_weight",
        "forward_reward_weight",
        "healthy_reward",
        "terminate_when_unhealthy",
        "exclude_current_positions_from_observation",
    }
)


def _envpool():
    try:
        import envpool
    except ImportError as err:
        raise ImportError(
            f"envpool environments need envpool: pip install 'purejaxppo[{EXTRA}]'"
        ) from err
    return envpool


@struct.dataclass
class EnvPoolState:
    """Per-env state; the env itself lives in the pool on the host.

    Attributes:
      elapsed_step: steps of the current episode (EnvPool's `elapsed_step`); int32 `[]`.
        It also orders the host calls (each step's action reads the previous one's).
      game_return: unclipped return of the current game so far (all lives); float32 `[]`.
    """

    elapsed_step: jax.Array  # shape=(), dtype=int32
    game_return: jax.Array  # shape=(), dtype=float32


class _Pools:
    """The host side: one EnvPool pool per batch size N, rebuilt by each reset."""

    def __init__(self, task_id: str, options: Mapping[str, Any], atari: bool):
        self.task_id, self.options, self.atari = task_id, dict(options), atari
        self._pools: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        if self.atari:  # [N, stack, H, W] -> [N, H, W, stack]
            return np.ascontiguousarray(np.transpose(obs, (0, 2, 3, 1)))
        return np.asarray(obs, np.float32)

    def reset(self, seeds: np.ndarray) -> np.ndarray:
        """Builds a pool of N = len(seeds) envs (env i seeded with seeds[i]) and resets it."""
        num_envs = int(seeds.shape[0])
        with self._lock:
            old = self._pools.pop(num_envs, None)
            if old is not None:
                old.close()
            pool = _envpool().make(
                self.task_id,
                env_type="gymnasium",
                num_envs=num_envs,
                batch_size=num_envs,
                env_seed=[int(s) for s in np.asarray(seeds, np.int64) % (2**31 - 1)],
                **self.options,
            )
            self._pools[num_envs] = pool
        obs, _ = pool.reset()
        return self._obs(obs)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, ...]:
        """Steps the N envs; ended games are reset at once (`pool.reset(env_ids)`).

        Returns obs (reset where done), reward, terminated, truncated, final obs, elapsed
        step, raw reward and game-over flag, all `[N, ...]`.
        """
        num_envs = int(action.shape[0])
        pool = self._pools.get(num_envs)
        if pool is None:
            raise RuntimeError(f"envpool:{self.task_id}: step before reset for {num_envs} envs")
        pool_action = np.asarray(action, np.int32 if self.atari else np.float64)
        obs, reward, terminated, truncated, info = pool.step(pool_action)
        terminated = np.asarray(terminated, bool)
        truncated = np.asarray(truncated, bool)
        final_obs = self._obs(obs)
        next_obs = final_obs
        elapsed = np.asarray(info["elapsed_step"], np.int32)
        if self.atari:
            # Under episodic_life a lost life is `terminated` but the game goes on (EnvPool
            # resets only where the game ended: its info["terminated"], or the time limit).
            raw_reward = np.asarray(info["reward"], np.float32)
            game_over = truncated | (np.asarray(info["terminated"]) != 0)
        else:
            raw_reward = np.asarray(reward, np.float32)
            game_over = terminated | truncated
        if game_over.any():
            reset_obs, reset_info = pool.reset(np.flatnonzero(game_over).astype(np.int32))
            next_obs = final_obs.copy()
            next_obs[reset_info["env_id"]] = self._obs(reset_obs)
            elapsed = np.where(game_over, 0, elapsed).astype(np.int32)
        return (
            next_obs,
            np.asarray(reward, np.float32),
            terminated,
            truncated,
            final_obs,
            elapsed,
            raw_reward,
            game_over,
        )


def is_envpool_id(env_id: str) -> bool:
    """Whether `env_id` names an EnvPool task ("envpool:<task id>")."""
    return env_id.startswith("envpool:")


class EnvPoolEnv(SuiteEnv):
    """An EnvPool task with the gymnax 1.0 API (see the module docstring).

    `reset(key, params) -> (obs, EnvPoolState)` and `step(key, state, action, params) ->
    (obs, state, reward, terminated, truncated, info)` are meant to be vmapped over the N
    envs of a run: one vmapped call is one call of a pool of N envs. `info` holds
    `final_observation`, `terminated`, `truncated`, `elapsed_step`, and for Atari
    `game_return`, `game_over`, `game_over_return` (float32).
    """

    def __init__(self, task_id: str, options: Mapping[str, Any], atari: bool, spec: Any):
        self.task_id, self.atari = task_id, atari
        self.options = dict(options)
        self._pools = _Pools(task_id, options, atari)
        obs_space, act_space = spec.observation_space, spec.action_space
        if atari:
            stack, height, width = obs_space.shape
            obs_box = box(0, 255, (height, width, stack), jnp.uint8)
            action = spaces.Discrete(int(act_space.n))
        else:
            low = np.clip(obs_space.low, -np.inf, np.inf)
            obs_box = box(low, obs_space.high, obs_space.shape, jnp.float32)
            action = box(act_space.low, act_space.high, act_space.shape, jnp.float32)
        super().__init__(f"envpool:{task_id}", obs_space=obs_box, action_space=action)
        self.max_steps_in_episode = int(spec.config.max_episode_steps)
        obs_shape, obs_dtype = self._obs_space.shape, self._obs_space.dtype

        def reset_shapes(n: int) -> jax.ShapeDtypeStruct:
            return jax.ShapeDtypeStruct((n, *obs_shape), obs_dtype)

        # Two packed results (each callback result is one more transfer): the obs pair
        # [N, 2, ...] (next obs, final obs) and the scalars [N, 6] float32 (reward,
        # terminated, truncated, elapsed step, raw reward, game over; all exact in float32).
        def step_shapes(n: int) -> tuple[jax.ShapeDtypeStruct, ...]:
            return (
                jax.ShapeDtypeStruct((n, 2, *obs_shape), obs_dtype),
                jax.ShapeDtypeStruct((n, 6), jnp.float32),
            )

        def host_reset(seeds: np.ndarray) -> np.ndarray:
            return self._pools.reset(np.asarray(seeds))

        def host_step(action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            obs, reward, term, trunc, final_obs, elapsed, raw, over = self._pools.step(
                np.asarray(action)
            )
            scalars = np.stack([reward, term, trunc, elapsed, raw, over], axis=1)
            return np.stack([obs, final_obs], axis=1), scalars.astype(np.float32)

        self._reset_call = batched_call(host_reset, reset_shapes)
        self._step_call = batched_call(host_step, step_shapes)

    def newest_frame(self, obs: jax.Array) -> jax.Array:
        """An Atari observation's newest frame: `[H, W]` grey (of `[H, W, stack]`, oldest
        frame first, as EnvPool stacks them) or `[H, W, 3]` RGB (`gray_scale: false`: of
        `[H, W, 3 * stack]`); a MuJoCo observation unchanged. Video frames
        (`video.make_renderer`) are drawn from it: EnvPool renders no frames itself."""
        if not self.atari:
            return obs
        return obs[..., -1] if self.options.get("gray_scale", True) else obs[..., -3:]

    def reset(self, key: jax.Array, params: Any = None) -> tuple[jax.Array, EnvPoolState]:
        key = raw_key(key)
        seed = jax.random.bits(key, (), jnp.uint32)
        obs = self._reset_call(seed)
        state = EnvPoolState(
            elapsed_step=jnp.zeros((), jnp.int32), game_return=jnp.zeros((), jnp.float32)
        )
        return obs, state

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, EnvPoolState]:
        return self.reset(key, params)

    def step_env(self, key: jax.Array, state: Any, action: Any, params: Any) -> tuple:
        return self.step(key, state, action, params)

    def step(self, key: jax.Array, state: EnvPoolState, action: Any, params: Any = None) -> tuple:
        if self.atari:
            action = jnp.asarray(action, jnp.int32)
        else:
            action = jnp.asarray(action, jnp.float32)
        obs_pair, scalars = self._step_call(after(action, state.elapsed_step))
        obs, final_obs = obs_pair[0], obs_pair[1]
        reward, raw_reward = scalars[0], scalars[4]
        terminated, truncated, game_over = scalars[1] > 0, scalars[2] > 0, scalars[5] > 0
        elapsed = scalars[3].astype(jnp.int32)
        game_return = state.game_return + raw_reward
        info = {
            "final_observation": final_obs,
            "terminated": terminated,
            "truncated": truncated,
            "elapsed_step": elapsed,
        }
        if self.atari:
            info["game_return"] = game_return
            info["game_over"] = game_over.astype(jnp.float32)
            info["game_over_return"] = jnp.where(game_over, game_return, jnp.float32(0))
        state = EnvPoolState(
            elapsed_step=elapsed, game_return=jnp.where(game_over, jnp.float32(0), game_return)
        )
        return obs, state, reward, terminated, truncated, info


def _kind(config: Mapping[str, Any]) -> str:
    if "stack_num" in config:
        return "atari"
    if "xml_file" in config:
        return "mujoco"
    return "other"


def make(name: str, env_kwargs: Mapping[str, Any] | None = None) -> tuple[EnvPoolEnv, SuiteParams]:
    """Builds an EnvPool MuJoCo or Atari task as an `EnvPoolEnv`.

    Args:
      name: an EnvPool task id ("HalfCheetah-v4", "Hopper-v4", "Pong-v5", ...).
      env_kwargs: the task's EnvPool options, e.g. `max_episode_steps`; Atari:
        `episodic_life`, `reward_clip`, `noop_max`, `stack_num`, `frame_skip`,
        `repeat_action_probability`, ...; MuJoCo: `reset_noise_scale`, ... (the keys of
        `envpool.make_spec(name).config` other than the pool's own: num_envs, seed, ...).

    Returns:
      `(env, SuiteParams())`.

    Raises:
      ImportError: envpool is missing (names the `[envpool]` extra).
      ValueError: an unknown id (close matches listed), a task that is neither MuJoCo nor
        Atari, an Atari option on a MuJoCo id or the reverse (naming the option), any
        other option the task does not take, or a value out of range (naming key and
        value; checked before the pool is built): frame_skip, stack_num, noop_max,
        img_height, img_width and max_episode_steps must be integers >= 1,
        repeat_action_probability a number in [0, 1].
    """
    envpool = _envpool()
    env_kwargs = dict(env_kwargs or {})
    known = envpool.list_all_envs()
    if name not in known:
        raise unknown_name("envpool", name, known)
    spec = envpool.make_spec(name)
    config = dict(spec.config._asdict())
    kind = _kind(config)
    env_id = f"envpool:{name}"
    if kind == "other":
        raise ValueError(
            f"env_name={env_id!r}: only EnvPool's MuJoCo and Atari tasks are supported"
        )
    accepted = set(config) - _POOL_KEYS
    for key in sorted(set(env_kwargs) - accepted):
        if kind == "mujoco" and key in ATARI_OPTIONS:
            raise ValueError(
                f"env_kwargs of {env_id}: {key!r} is an Atari option; {name} is a MuJoCo task"
            )
        if kind == "atari" and key in MUJOCO_OPTIONS:
            raise ValueError(
                f"env_kwargs of {env_id}: {key!r} is a MuJoCo option; {name} is an Atari task"
            )
        raise ValueError(
            f"env_kwargs of {env_id}: {key!r} not accepted; this task takes {sorted(accepted)}"
        )
    _check_values(env_id, env_kwargs)
    spec = envpool.make_spec(name, **env_kwargs)
    return EnvPoolEnv(name, env_kwargs, kind == "atari", spec), SuiteParams()


#: Integer options and their least value. noop_max >= 1: EnvPool 1.2.5's Atari reset
#: crashes the process (SIGSEGV) with noop_max=0.
_INT_MINIMUM = {
    "frame_skip": 1,
    "stack_num": 1,
    "noop_max": 1,
    "img_height": 1,
    "img_width": 1,
    "max_episode_steps": 1,
}


def _check_values(env_id: str, env_kwargs: Mapping[str, Any]) -> None:
    """Raises a one-line ValueError naming the key and value of an option out of range
    (EnvPool takes them silently, or crashes the process): `_INT_MINIMUM`'s integers,
    `repeat_action_probability` a number in [0, 1]."""
    for key, least in _INT_MINIMUM.items():
        if key not in env_kwargs:
            continue
        value = env_kwargs[key]
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"env_kwargs of {env_id}: {key}={value!r} must be an integer")
        if value < least:
            raise ValueError(f"env_kwargs of {env_id}: {key}={value!r} must be >= {least}")
    if "repeat_action_probability" in env_kwargs:
        value = env_kwargs["repeat_action_probability"]
        number = not isinstance(value, bool) and isinstance(value, int | float | np.number)
        if not number or not 0.0 <= float(value) <= 1.0:
            raise ValueError(
                f"env_kwargs of {env_id}: repeat_action_probability={value!r} must be a "
                "number in [0, 1]"
            )
