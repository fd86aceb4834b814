"""Evaluation and video episodes on a host env (`envs.host.HostEnv`, "gymnasium:<id>").

The JAX kinds play their episodes inside one jitted scan (`policy.make_episode_runner`,
`video.make_episode_recorder`); a host env steps in Python, so here the same episodes are
a Python loop around the same jitted policy step (`policy.make_act`, compiled once per
runner), with the same results: one episode per env, undiscounted returns, steps after an
episode's end not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "HostChunkCarry",
    "make_host_chunk_runner",
    "make_host_episode_recorder",
    "make_host_episode_runner",
]

Act = Callable[..., tuple[Any, jax.Array, Any]]  # policy.make_act's act


def _seed(key: jax.Array) -> int:
    """A host seed (0 .. 2**31 - 2) drawn from a typed PRNG key."""
    return int(jax.random.randint(key, (), 0, 2**31 - 1))


def make_host_episode_runner(
    env: Any,
    act: Act,
    initial_state: Callable[[int], Any],
    num_episodes: int,
    max_steps: int,
    mode: str = "sync",
) -> Callable[[Any, jax.Array, Any], tuple[np.ndarray, np.ndarray]]:
    """`run(params, key, temperature) -> (returns float32 [E], lengths int32 [E])`.

    E = `num_episodes` copies of `env` (`env.make_vec(E, mode)`, seeded from `key`), each
    playing one episode of at most `max_steps` steps; `act` is `policy.make_act`'s act
    (temperature 0: greedy). The envs are closed when `run` returns or raises.
    """
    step_policy = jax.jit(act)

    def run(params: Any, key: jax.Array, temperature: Any) -> tuple[np.ndarray, np.ndarray]:
        reset_key, key = jax.random.split(key)
        vec = env.make_vec(num_episodes, mode)
        try:
            obs = vec.reset(_seed(reset_key))
            state = initial_state(num_episodes)
            no_reset = jnp.zeros((num_episodes,), bool)
            returns = np.zeros(num_episodes, np.float32)
            lengths = np.zeros(num_episodes, np.int32)
            active = np.ones(num_episodes, bool)
            for step_key in jax.random.split(key, max_steps):
                state, action, _ = step_policy(params, state, obs, no_reset, step_key, temperature)
                obs, reward, terminated, truncated, _ = vec.step(np.asarray(action))
                returns += np.where(active, reward, 0.0).astype(np.float32)
                lengths += active.astype(np.int32)
                active &= ~(terminated | truncated)
                if not active.any():
                    break
        finally:
            vec.close()
        return returns, lengths

    return run


def make_host_episode_recorder(
    env: Any, act: Act, initial_state: Callable[[int], Any], max_steps: int
) -> Callable[[Any, jax.Array, Any], tuple[Any, ...]]:
    """`record(params, key, temperature) -> (frames, obs, actions, rewards, active)`, as
    `video.make_episode_recorder`'s but on one rendering copy of a host env
    (`env.make_render()`, gymnasium's `render_mode="rgb_array"`): the "state" of each
    step is its frame, uint8 `[L, H, W, 3]`, before the action; L <= `max_steps`.

    Raises:
      ValueError: the env cannot render (`HostEnv.make_render`).
    """
    step_policy = jax.jit(act)
    env.make_render().close()  # fails now, not after training, if it cannot render

    def record(params: Any, key: jax.Array, temperature: Any) -> tuple[Any, ...]:
        reset_key, key = jax.random.split(key)
        gym_env = env.make_render()
        frames, observations, actions, rewards = [], [], [], []
        try:
            obs, _ = gym_env.reset(seed=_seed(reset_key))
            state = initial_state(1)
            for step_key in jax.random.split(key, max_steps):
                batch = jax.tree.map(lambda x: np.asarray(x)[None], obs)
                state, action, _ = step_policy(
                    params, state, batch, jnp.zeros((1,), bool), step_key, temperature
                )
                frames.append(np.asarray(gym_env.render(), np.uint8))
                observations.append(obs)
                actions.append(np.asarray(action)[0])
                obs, reward, terminated, truncated, _ = gym_env.step(np.asarray(action)[0])
                rewards.append(np.float32(reward))
                if terminated or truncated:
                    break
        finally:
            gym_env.close()
        stack = lambda *xs: np.stack([np.asarray(x) for x in xs])  # noqa: E731
        return (
            np.stack(frames),
            jax.tree.map(stack, *observations),
            np.stack(actions),
            np.asarray(rewards, np.float32),
            np.ones(len(rewards), bool),
        )

    return record


class HostChunkCarry:
    """The carry of `make_host_chunk_runner`: the vector env and the running state.
    `close()` closes the envs (`datasets.collect` calls it when the group is done)."""

    def __init__(self, vec: Any, obs: Any, active: np.ndarray, policy_state: Any):
        self.vec, self.obs, self.active, self.policy_state = vec, obs, active, policy_state

    def close(self) -> None:
        self.vec.close()


def make_host_chunk_runner(
    env: Any, networks: Any, select_action: Callable[..., Any], info_keys: tuple = ()
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """`datasets.make_chunk_runner`'s `(start, chunk)` for a host env: `start(key, E)`
    makes and resets E copies (seeded from `key`); `chunk(params, carry, keys [C],
    temperature)` plays C steps on the host around a jitted policy step and returns the
    carry and numpy records `[C, E]` with the same keys (no `info` keys: host envs have no
    traced info dict).

    Raises:
      ValueError: `info_keys` asked of a host env.
    """
    if info_keys:
        raise ValueError(
            f"collect: info_keys={list(info_keys)}: {env.name} is a host env (no info dict is kept)"
        )

    @jax.jit
    def policy(params, state, obs, key, temperature):
        reset = jnp.zeros((jax.tree.leaves(obs)[0].shape[0],), bool)
        state, dist, value = networks.step(params, state, obs, reset)
        action, _ = select_action(networks.action_spec, dist, value, key, temperature)
        return state, action, dist.log_prob(action).astype(jnp.float32), value

    def start(key: jax.Array, num_envs: int) -> tuple[HostChunkCarry, jax.Array]:
        reset_key, scan_key = jax.random.split(key)
        vec = env.make_vec(num_envs)
        obs = vec.reset(_seed(reset_key))
        active = np.ones(num_envs, bool)
        return HostChunkCarry(vec, obs, active, networks.initial_state(num_envs)), scan_key

    def chunk(params, carry: HostChunkCarry, keys, temperature):
        records = []
        for step_key in keys:
            carry.policy_state, action, log_prob, value = policy(
                params, carry.policy_state, carry.obs, step_key, temperature
            )
            action = np.asarray(action)
            obs, reward, terminated, truncated, final_obs = carry.vec.step(action)
            records.append(
                {
                    "obs": carry.obs,
                    "action": action,
                    "reward": reward,
                    "terminated": terminated,
                    "truncated": truncated,
                    "log_prob": np.asarray(log_prob),
                    "value": np.asarray(value, np.float32),
                    "final_obs": final_obs,
                    "active": carry.active.copy(),
                    "info": {},
                }
            )
            carry.active &= ~(terminated | truncated)
            carry.obs = obs
        stacked = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *records)
        return carry, stacked

    return start, chunk
