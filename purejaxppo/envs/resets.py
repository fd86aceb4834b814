"""The vmapped step of a run's N envs, with gymnax's auto-reset or optimistic resets.

gymnax's auto-reset (`Environment.step`, and `SuiteEnv.step` for the suite adapters)
computes a reset for every env at every step and keeps it where the episode ended. Where
a reset costs as much as a step (Craftax: 1.6k resets/s against 1.1k steps/s on a 2-core
CPU), that halves the throughput. Optimistic resets (Craftax's
`OptimisticResetVecEnvWrapper`, Matthews et al. 2024, "Craftax: A Lightning-Fast Benchmark
for Open-Ended Reinforcement Learning", ICML) compute only N / `reset_ratio` resets per
step; the k-th env (in env order) whose episode ended at that step starts from reset
k mod (N / `reset_ratio`). When more envs end in one step than there are resets, some
start the same initial state (the "optimistic" bet that few episodes end together).

Keys: each env's key splits into (step key, reset key) as in gymnax's `step`, so the
steps are the ordinary path's; reset k uses env k's reset key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.envs.suites._common import SuiteEnv, raw_key

BatchedStep = Callable[[jax.Array, Any, Any], tuple]


def _no_reset_step(env: Any, env_params: Any) -> Callable[..., tuple] | None:
    """`step(key, state, action) -> (obs, state, reward, terminated, truncated, obs)` of one
    env without its auto-reset, for envs whose `step` is gymnax's / `SuiteEnv`'s own
    (a subclass overriding `step` may do more than step + reset); else None."""
    from gymnax.environments.environment import Environment

    if isinstance(env, SuiteEnv) and type(env).step is SuiteEnv.step:

        def suite_step(key, state, action):
            obs, state, reward, terminated, truncated, info = env.step_env(
                key, state, action, env_params
            )
            return obs, state, reward, terminated, truncated, info

        return suite_step
    if isinstance(env, Environment) and type(env).step is Environment.step:

        def gymnax_step(key, state, action):
            obs, state, reward, terminated, info = env.step_env(key, state, action, env_params)
            truncated = env.is_truncated(state, env_params)
            return obs, state, reward, terminated, truncated, info

        return gymnax_step
    return None


def check_reset_ratio(reset_ratio: int | None, env: Any, env_params: Any, num_envs: int) -> None:
    """Raises ValueError when `reset_ratio` cannot apply: it does not divide the
    (per-device) `num_envs`, or the env's `step` is not gymnax's / `SuiteEnv`'s step plus
    auto-reset (EnvPool resets on the host; wrappers and probes override `step`)."""
    if reset_ratio is None or reset_ratio == 1:
        return
    if num_envs % reset_ratio:
        raise ValueError(
            f"reset_ratio={reset_ratio}: must divide the per-device num_envs={num_envs} "
            f"(N / reset_ratio resets are computed per step)"
        )
    if _no_reset_step(env, env_params) is None:
        name = getattr(env, "name", type(env).__name__)
        raise ValueError(
            f"reset_ratio={reset_ratio}: optimistic resets need an env whose step is "
            f"gymnax's (or a suite adapter's) step plus auto-reset; {name!r} "
            f"({type(env).__name__}) overrides step. Set reset_ratio: null"
        )


def make_batched_step(env: Any, env_params: Any, reset_ratio: int | None = None) -> BatchedStep:
    """`step(keys [N], states, actions [N, ...]) -> (obs, state, reward, terminated,
    truncated, info)` of N envs, every output with leading axis `[N]`.

    `reset_ratio` None or 1: `jax.vmap(env.step)` (gymnax's auto-reset, one reset per env).
    Else optimistic resets (module docstring): N / `reset_ratio` resets per step; `info`
    gets `terminated`, `truncated` and `final_observation` (the observation the step led
    to, before any reset) as gymnax's `step` gives them.

    Raises:
      ValueError: see `check_reset_ratio`.
    """
    if reset_ratio is None or reset_ratio == 1:
        vmapped = jax.vmap(env.step, in_axes=(0, 0, 0, None))
        return lambda keys, states, actions: vmapped(keys, states, actions, env_params)

    step_one = _no_reset_step(env, env_params)

    def step(keys: jax.Array, states: Any, actions: Any) -> tuple:
        num_envs = keys.shape[0]
        check_reset_ratio(reset_ratio, env, env_params, num_envs)
        num_resets = num_envs // reset_ratio
        split = jax.vmap(lambda k: jax.random.split(raw_key(k)))(keys)  # [N, 2, 2]
        obs_st, state_st, reward, terminated, truncated, info = jax.vmap(step_one)(
            split[:, 0], states, actions
        )
        terminated = jnp.asarray(terminated, bool)
        truncated = jnp.asarray(truncated, bool)
        done = terminated | truncated
        obs_re, state_re = jax.vmap(env.reset_env, in_axes=(0, None))(
            split[:num_resets, 1], env_params
        )
        slot = (jnp.cumsum(done) - 1) % num_resets  # the k-th ended env takes reset k

        def pick(reset_leaf, step_leaf):
            chosen = reset_leaf[slot]
            where = done.reshape(done.shape + (1,) * (step_leaf.ndim - 1))
            return jnp.where(where, chosen, step_leaf)

        info = {
            **info,
            "terminated": terminated,
            "truncated": truncated,
            "final_observation": obs_st,
        }
        return (
            jax.tree.map(pick, obs_re, obs_st),
            jax.tree.map(pick, state_re, state_st),
            jnp.asarray(reward, jnp.float32),
            terminated,
            truncated,
            info,
        )

    return step
