"""N envs as R rows of the batch: the one interface the rollout steps.

Every kind of env (`kinds`) is adapted below the training loop into a `RowsEnv`, as
brax's `envs/wrappers/training.py:wrap` and JaxMARL's `batchify` do: the rollout
(`rollout.make_rollout`, the only rollout scan) never asks what kind of env it steps.

Rows: R = N for a single-agent env (row n = env n) and R = N * A for a multi-agent env with
A agents (row n * A + a = agent a of env n, `envs.agent_rows`). The policy acts on rows,
and a `Transition` is `[T, R]`; episode counters keep whatever per-env layout the kind
needs (`EnvCarry`).

Envs that step on the host (EnvPool, gymnasium) are vmapped like JAX envs: their adapters
batch the vmap into one host call (`envs.host_calls`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from purejaxppo.envs.resets import make_batched_step
from purejaxppo.metrics import CLIPPED_COUNT, CLIPPED_RETURN, EpisodeStats
from purejaxppo.types import EnvCarry

__all__ = [
    "EnvStep",
    "RowsEnv",
    "env_keys",
    "envpool_rows",
    "info_keys_of",
    "vmapped_envs",
]


class EnvStep(NamedTuple):
    """One step of N envs as R rows (see the module docstring)."""

    obs: Any  # [R, *obs_shape]; the reset observation where an episode ended
    env_state: Any  # the envs' state, leading axis [N]
    reward: jax.Array  # [R] float32
    terminated: jax.Array  # [R] bool
    truncated: jax.Array  # [R] bool
    final_obs: Any  # [R, *obs_shape]; the observation the step led to (before any reset)
    reset: jax.Array  # [R] bool; the row's episode ended at this step
    episode_return: jax.Array  # the carry's counter after the step (zero where ended)
    episode_length: jax.Array  # likewise
    ended: EpisodeStats  # sums over the episodes that ended at this step
    info: Any  # the env's info dict, leading axis [N] (JaxMARL: [N, A])


class RowsEnv(NamedTuple):
    """What the rollout and `make_init` need of a kind of env.

    reset(key, num_envs, networks) -> EnvCarry: resets N envs and starts the policy state
        of their R rows at `networks.initial_state(R)`.
    step(key, carry, env_action [R, ...]) -> EnvStep: steps the N envs with one key
        (split per env inside; `env_keys`).
    info_keys: the keys of `EpisodeStats.info_sum` that `step` fills (metrics `info/<key>`).
    num_agents: rows per env: 0 for one row per env (R = N), A for A agents per env
        (R = N * A, row n * A + a), whose per-env layout is `[N, A, ...]`.
    team_reward: per-env rewards (`[N]`, A agents: `[N, A]`) -> the envs' rewards `[N]`
        (JaxMARL: `JaxMARLEnv.team_reward`; one row per env: unchanged).
    """

    reset: Callable[[jax.Array, int, Any], EnvCarry]
    step: Callable[[jax.Array, EnvCarry, Any], EnvStep]
    info_keys: tuple[str, ...] = ()
    num_agents: int = 0
    team_reward: Callable[[jax.Array], jax.Array] = lambda reward: reward


def env_keys(key: jax.Array, num_envs: int) -> jax.Array:
    """The N envs' keys `[N]`: `key` split N ways; a typed key array `[N]` is taken as
    the envs' own keys (one env stepped with its key as is: `key[None]`)."""
    if jnp.ndim(key) == 1 and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape[0] != num_envs:
            raise ValueError(f"env_keys: {key.shape[0]} keys for num_envs={num_envs}")
        return key
    return jax.random.split(key, num_envs)


def _zero_counters(num_envs: int) -> dict[str, jax.Array]:
    return {
        "episode_return": jnp.zeros((num_envs,), jnp.float32),
        "episode_length": jnp.zeros((num_envs,), jnp.int32),
    }


#: `count(done, episode_return, episode_length, info) -> (ended, next_length)`: the
#: `EpisodeStats` of one step of N envs and the running lengths after it (`vmapped_envs`).
Counter = Callable[[jax.Array, jax.Array, jax.Array, Any], tuple[EpisodeStats, jax.Array]]


def _count_episodes(info_keys: tuple[str, ...]) -> Counter:
    """The learner's episodes: those that ended (`done`), and `info_keys` at their ends."""

    def count(done, episode_return, episode_length, info):
        ended = EpisodeStats(
            return_sum=jnp.sum(jnp.where(done, episode_return, 0.0)),
            length_sum=jnp.sum(jnp.where(done, episode_length, 0)).astype(jnp.float32),
            count=jnp.sum(done).astype(jnp.float32),
            info_sum={key: _sum_where(done, info[key]) for key in info_keys},
        )
        return ended, jnp.where(done, 0, episode_length)

    return count


def _count_games(info_keys: tuple[str, ...]) -> Counter:
    """Atari games (every life, raw score: `info["game_over"]`, `info["game_over_return"]`),
    with the learner's (per-life, clipped) episodes as `CLIPPED_RETURN` / `CLIPPED_COUNT`."""

    def count(done, episode_return, game_length, info):
        game_over = info["game_over"] > 0
        info_sum = {key: _sum_where(game_over, info[key]) for key in info_keys}
        info_sum[CLIPPED_RETURN] = jnp.sum(jnp.where(done, episode_return, 0.0))
        info_sum[CLIPPED_COUNT] = jnp.sum(done).astype(jnp.float32)
        ended = EpisodeStats(
            return_sum=jnp.sum(jnp.where(game_over, info["game_over_return"], 0.0)),
            length_sum=jnp.sum(jnp.where(game_over, game_length, 0)).astype(jnp.float32),
            count=jnp.sum(game_over).astype(jnp.float32),
            info_sum=info_sum,
        )
        return ended, jnp.where(game_over, 0, game_length)

    return count


def vmapped_envs(
    env: Any,
    env_params: Any,
    info_keys: tuple[str, ...] = (),
    reset_ratio: int | None = None,
    count: Counter | None = None,
    stats_keys: tuple[str, ...] | None = None,
) -> RowsEnv:
    """N copies of a single-agent JAX env (gymnax API), vmapped: one row per env.

    `step` steps every env with its own key (gymnax auto-resets ended episodes; with
    `reset_ratio` > 1, optimistic resets: `envs.resets.make_batched_step`) and updates the
    running episode return / length; `ended` sums the episodes that ended at this step, and
    for each of `info_keys` the env's `info[key]` at their last step (mean over any
    trailing axes). EnvPool envs ("envpool:") and host envs ("gymnasium:") take this
    path too: their adapters batch the vmap into one host call. `count` (default: the
    episodes that ended) and `stats_keys` (default `info_keys`: the keys of
    `ended.info_sum`) let `envpool_rows` count Atari games instead.
    """
    batched_step = make_batched_step(env, env_params, reset_ratio)
    count = _count_episodes(tuple(info_keys)) if count is None else count

    def reset(key: jax.Array, num_envs: int, networks: Any) -> EnvCarry:
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(env_keys(key, num_envs), env_params)
        return EnvCarry(
            env_state=env_state,
            obs=obs,
            policy_state=networks.initial_state(num_envs),
            reset=jnp.ones((num_envs,), bool),
            **_zero_counters(num_envs),
        )

    def step(key: jax.Array, carry: EnvCarry, env_action: Any) -> EnvStep:
        num_envs = carry.reset.shape[0]
        obs, env_state, reward, terminated, truncated, info = batched_step(
            env_keys(key, num_envs), carry.env_state, env_action
        )
        reward = reward.astype(jnp.float32)
        done = jnp.logical_or(terminated, truncated)
        episode_return = carry.episode_return + reward
        ended, episode_length = count(done, episode_return, carry.episode_length + 1, info)
        return EnvStep(
            obs=obs,
            env_state=env_state,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=info["final_observation"],
            reset=done,
            episode_return=jnp.where(done, 0.0, episode_return),
            episode_length=episode_length,
            ended=ended,
            info=info,
        )

    keys = tuple(info_keys) if stats_keys is None else tuple(stats_keys)
    return RowsEnv(reset=reset, step=step, info_keys=keys)


def envpool_rows(
    env: Any,
    env_params: Any,
    info_keys: tuple[str, ...] = (),
    reset_ratio: int | None = None,
) -> RowsEnv:
    """An EnvPool env's rows: MuJoCo tasks as `vmapped_envs`; Atari tasks step the same
    (the same rewards, `terminated`, resets: the learning is unchanged) but count games.

    Atari episode statistics are per game (every life, unclipped rewards), whatever
    `episodic_life` / `reward_clip` do to the learning signal: `ended.return_sum` sums the
    raw scores of the games that ended (`info["game_over_return"]`), `length_sum` their
    lengths in steps, `count` how many ended, and `info_keys` are read at the games' last
    steps. `info/episode_return_clipped` is the mean return of the learner's episodes
    (one life under `episodic_life`, clipped rewards) over `info/episode_count_clipped` of
    them. Carry: `episode_return` the learner's episode's (clipped) return `[N]`,
    `episode_length` the game's steps so far `[N]`.
    """
    if not env.atari:
        return vmapped_envs(env, env_params, info_keys, reset_ratio)
    keys = (*info_keys, CLIPPED_RETURN, CLIPPED_COUNT)
    return vmapped_envs(env, env_params, info_keys, reset_ratio, _count_games(info_keys), keys)


def _sum_where(done: jax.Array, values: jax.Array) -> jax.Array:
    """Sum over the envs where `done` `[N]` of `values` `[N, ...]` (trailing axes averaged)."""
    values = jnp.asarray(values, jnp.float32).reshape((done.shape[0], -1)).mean(axis=1)
    return jnp.sum(jnp.where(done, values, 0.0))


def info_keys_of(env: Any, env_params: Any) -> tuple[str, ...]:
    """The keys of `env.step`'s info dict (from `jax.eval_shape`, nothing runs)."""

    def info(key: jax.Array) -> dict[str, Any]:
        _, state = env.reset(key, env_params)
        action = env.action_space(env_params).sample(key)
        return env.step(key, state, action, env_params)[5]

    return tuple(sorted(jax.eval_shape(info, jax.random.key(0))))
