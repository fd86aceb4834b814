"""Evaluation, video and dataset episodes on a host env (`envs.host.HostEnv`, "gymnasium:<id>").

The envs the program steps play their episodes in one jitted scan (`acting.episodes`); a
host env steps in Python, so here the same episodes are a Python loop around the same
jitted policy step (`networks.step` and `networks.select_action`, compiled once per
runner), with the same results: one episode per env, undiscounted returns, steps after an
episode's end not counted. Evaluation and datasets share one loop (`_steps`, over E
copies of the env); a video plays one rendering copy (`make_host_recorder`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.networks import Networks, select_action

__all__ = [
    "HostChunkCarry",
    "make_host_chunk_runner",
    "make_host_episode_runner",
    "make_host_recorder",
]


def _seed(key: jax.Array) -> int:
    """A host seed (0 .. 2**31 - 2) drawn from a typed PRNG key."""
    return int(jax.random.randint(key, (), 0, 2**31 - 1))


def _policy_step(networks: Networks) -> Callable[..., tuple[Any, jax.Array, jax.Array, Any]]:
    """Jitted `policy(params, state, obs [B], key, temperature) -> (state, action,
    log_prob float32 [B], value)`: no row starts afresh (each env plays one episode)."""

    @jax.jit
    def policy(params, state, obs, key, temperature):
        reset = jnp.zeros((jax.tree.leaves(obs)[0].shape[0],), bool)
        state, dist, value = networks.step(params, state, obs, reset)
        action, _ = select_action(networks.action_spec, dist, value, key, temperature)
        return state, action, dist.log_prob(action).astype(jnp.float32), value

    return policy


class HostChunkCarry:
    """The envs' carry on the host: the vector env and the running state. `close()`
    closes the envs (`acting.datasets.collect` calls it when the group is done)."""

    def __init__(self, vec: Any, obs: Any, active: np.ndarray, policy_state: Any):
        self.vec, self.obs, self.active, self.policy_state = vec, obs, active, policy_state

    def close(self) -> None:
        self.vec.close()


def _start(
    env: Any, networks: Networks, key: jax.Array, num_envs: int, mode: str = "sync"
) -> tuple[HostChunkCarry, jax.Array]:
    """E = `num_envs` copies of `env` (`env.make_vec(E, mode)`), reset with a seed from
    the first half of `key`; returns their carry and the second half (the step keys')."""
    reset_key, scan_key = jax.random.split(key)
    vec = env.make_vec(num_envs, mode)
    try:
        obs = vec.reset(_seed(reset_key))
    except BaseException:
        vec.close()
        raise
    active = np.ones(num_envs, bool)
    return HostChunkCarry(vec, obs, active, networks.initial_state(num_envs)), scan_key


def _steps(
    policy: Callable[..., Any], params: Any, carry: HostChunkCarry, keys: Any, temperature: Any
) -> Iterator[dict[str, Any]]:
    """The host episode loop: one step of the E envs per key, each yielding its numpy
    records `[E]` (the keys of `acting.episodes.make_rows_chunk_runner`'s, `info` empty:
    a host env keeps no traced info dict); `carry` moves on after each."""
    for step_key in keys:
        carry.policy_state, action, log_prob, value = policy(
            params, carry.policy_state, carry.obs, step_key, temperature
        )
        action = np.asarray(action)
        obs, reward, terminated, truncated, final_obs = carry.vec.step(action)
        yield {
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
        carry.active &= ~(terminated | truncated)
        carry.obs = obs


def make_host_episode_runner(
    env: Any, networks: Networks, num_episodes: int, max_steps: int, mode: str = "sync"
) -> Callable[[Any, jax.Array, Any], tuple[np.ndarray, np.ndarray]]:
    """`run(params, key, temperature) -> (returns float32 [E], lengths int32 [E])`.

    E = `num_episodes` copies of `env` (`env.make_vec(E, mode)`, seeded from `key`), each
    playing one episode of at most `max_steps` steps (temperature 0: greedy). The envs
    are closed when `run` returns or raises.
    """
    policy = _policy_step(networks)

    def run(params: Any, key: jax.Array, temperature: Any) -> tuple[np.ndarray, np.ndarray]:
        carry, scan_key = _start(env, networks, key, num_episodes, mode)
        returns = np.zeros(num_episodes, np.float32)
        lengths = np.zeros(num_episodes, np.int32)
        try:
            keys = jax.random.split(scan_key, max_steps)
            for record in _steps(policy, params, carry, keys, temperature):
                active = record["active"]
                returns += np.where(active, record["reward"], 0.0).astype(np.float32)
                lengths += active.astype(np.int32)
                if not (active & ~(record["terminated"] | record["truncated"])).any():
                    break
        finally:
            carry.close()
        return returns, lengths

    return run


def make_host_chunk_runner(
    env: Any, networks: Networks, info_keys: tuple = ()
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """`acting.datasets.make_chunk_runner`'s `(start, chunk)` for a host env:
    `start(key, E)` makes and resets E copies (seeded from `key`); `chunk(params, carry,
    keys [C], temperature)` plays C steps on the host around a jitted policy step and
    returns the carry and numpy records `[C, E]` with the same keys (no `info` keys: host
    envs have no traced info dict).

    Raises:
      ValueError: `info_keys` asked of a host env.
    """
    if info_keys:
        raise ValueError(
            f"collect: info_keys={list(info_keys)}: {env.name} is a host env (no info dict is kept)"
        )
    policy = _policy_step(networks)

    def start(key: jax.Array, num_envs: int) -> tuple[HostChunkCarry, jax.Array]:
        return _start(env, networks, key, num_envs)

    def chunk(params, carry: HostChunkCarry, keys, temperature):
        records = list(_steps(policy, params, carry, keys, temperature))
        stacked = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *records)
        return carry, stacked

    return start, chunk


def make_host_recorder(
    env: Any, networks: Networks, max_steps: int, num_envs: int | None = None
) -> Callable[[Any, jax.Array, Any], tuple[Any, ...]]:
    """`record(params, key, temperature) -> (frames, obs, actions, rewards, active)`, as
    `acting.video.make_episode_recorder`'s but on one rendering copy of a host env
    (`env.make_render()`, gymnasium's `render_mode="rgb_array"`): the "state" of each
    step is its frame, uint8 `[L, H, W, 3]`, before the action; L <= `max_steps`. With
    `num_envs` E, the policy acts on E rows (the observation repeated) and the first
    row's action is taken: the actions, seed and keys of the first of the E episodes
    `make_host_episode_runner` plays.

    Raises:
      ValueError: the env cannot render a frame (`HostEnv.check_render`).
    """
    policy = _policy_step(networks)
    env.check_render()  # fails now, not after training, if it cannot render
    rows = 1 if num_envs is None else num_envs

    def record(params: Any, key: jax.Array, temperature: Any) -> tuple[Any, ...]:
        reset_key, key = jax.random.split(key)
        gym_env = env.make_render()
        frames, observations, actions, rewards = [], [], [], []
        try:
            obs, _ = gym_env.reset(seed=_seed(reset_key))
            state = networks.initial_state(rows)
            for step_key in jax.random.split(key, max_steps):
                batch = jax.tree.map(lambda x: np.repeat(np.asarray(x)[None], rows, 0), obs)
                state, action, _, _ = policy(params, state, batch, step_key, temperature)
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
