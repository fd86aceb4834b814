"""A policy's episodes on a `RowsEnv`: evaluation, videos and datasets in one loop.

Every kind of env stepped inside the program (JAX, EnvPool, JaxMARL's agents on rows) is
the `RowsEnv` the rollout steps (`kinds.EnvKind.rows`). `make_play` steps it in one
`lax.scan` with the bookkeeping of evaluation episodes, as brax's `EvalWrapper` and
Stoix's `evaluator_setup` do: each of the N envs plays ONE episode, `active` marks its
steps before the episode's end, and the return and length count those steps only. What
an operation keeps of each step is its `output`: nothing (`make_rows_episode_runner`:
the returns and lengths of the carry, in a `lax.while_loop` that stops when the last
episode ends), one env's states and observations
(`make_rows_recorder`, videos), or the records of a dataset (`make_rows_chunk_runner`).
Host envs, stepped from Python, play the same episodes in `acting.host`.

An episode is what `envs.episodes.Episodes` says (EnvPool Atari: the whole game, raw
rewards); a stateful policy starts afresh where a row's life ended (`EnvStep.reset`), as
its learner's did. Multi-agent envs (A agents per env, `RowsEnv.num_agents`): the policy
acts on the rows `[N * A]`; a step's outputs are per env `[N, A, ...]`, its reward the
team reward (`RowsEnv.team_reward`), and an episode's return the team reward of the
agents' returns.

Keys: `start(key, N)` splits `key` into (reset key, scan key) and resets the N envs with
the reset key; each step's key (of `jax.random.split(scan_key, max_steps)`) splits into
(action key, env key), and the `RowsEnv` splits reset and env keys N ways (`one_env`: the
one env takes them as they are).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from purejaxppo.envs.episodes import Episodes
from purejaxppo.envs.rows import RowsEnv
from purejaxppo.networks import Networks, select_action
from purejaxppo.types import EnvCarry

__all__ = [
    "Playing",
    "Step",
    "check_info_keys",
    "make_play",
    "make_rows_chunk_runner",
    "make_rows_episode_runner",
    "make_rows_recorder",
]


class Playing(NamedTuple):
    """The carry of `make_play`: N envs, each playing one episode."""

    rows: EnvCarry  # the `RowsEnv`'s; `rows.reset` [R]: the rows whose life just ended
    active: jax.Array  # bool [N]: the env's episode has not ended
    returns: jax.Array  # float32 [N] (A agents: [N, A]): rewards of the active steps
    lengths: jax.Array  # int32 [N]: active steps
    score: jax.Array  # float32 [N]: `Episodes.step`'s state (Atari: the game's return)


class Step(NamedTuple):
    """One step of the N envs, per env (A agents: `[N, A, ...]` where marked)."""

    env_state: Any  # the state the actions were taken in, leading axis [N]
    obs: Any  # the observations they were taken in [N, ...] ([N, A, ...])
    action: Any  # [N, ...] ([N, A, ...])
    log_prob: jax.Array  # float32 [N] ([N, A]), of the action under the policy
    value: jax.Array  # float32 [N] ([N, A]), V(obs)
    reward: jax.Array  # float32 [N]: the episode's reward (A agents: the team reward)
    agent_reward: jax.Array  # float32 [N] ([N, A]: each agent's)
    terminated: jax.Array  # bool [N]: the episode ended (A agents: JaxMARL's `__all__`)
    truncated: jax.Array  # bool [N]
    final_obs: Any  # [N, ...] ([N, A, ...]): the observation the step led to
    info: Any  # the env's info dict, leading axis [N]
    active: jax.Array  # bool [N]: the step is one of the env's episode


Output = Callable[[Step], Any]  # what an operation keeps of a step (leaves per step)


def make_play(
    rows_env: RowsEnv,
    networks: Networks,
    episodes: Episodes,
    output: Output,
    one_env: bool = False,
    until_ended: bool = False,
) -> tuple[Callable[..., tuple[Playing, jax.Array]], Callable[..., tuple[Playing, Any]]]:
    """`(start(key, N) -> (Playing, scan_key), play(params, carry, keys [C], temperature)
    -> (Playing, outputs [C, ...]))`: the episode loop (module docstring), unjitted.

    `play` steps all N envs C times (`networks.step`, `networks.select_action`: temperature
    0 greedy, 1 the policy's own distribution) and stacks `output(step)` of each step.
    `one_env`: N = 1, the env stepped with the keys as they are (`envs.rows.env_keys`).
    `until_ended` (no outputs: None): a `lax.while_loop` that stops once every env's
    episode has ended, at most C steps. The steps it skips are inactive ones, which add
    nothing to a return or a length, so the carry's returns and lengths are the scan's;
    short episodes (a greedy policy's early falls) then cost their own length, not C.
    """
    as_keys = (lambda key: key[None]) if one_env else (lambda key: key)

    def start(key: jax.Array, num_envs: int) -> tuple[Playing, jax.Array]:
        reset_key, scan_key = jax.random.split(key)
        rows = rows_env.reset(as_keys(reset_key), num_envs, networks)
        carry = Playing(
            rows=rows.replace(reset=jnp.zeros_like(rows.reset)),
            active=jnp.ones((num_envs,), bool),
            returns=jnp.zeros(rows.episode_return.shape, jnp.float32),
            lengths=jnp.zeros((num_envs,), jnp.int32),
            score=jnp.zeros((num_envs,), jnp.float32),
        )
        return carry, scan_key

    def per_env(x: Any, num_envs: int) -> Any:
        """`[R, ...]` rows -> `[N, ...]` (A agents: `[N, A, ...]`)."""
        if not rows_env.num_agents:
            return x
        shape = (num_envs, rows_env.num_agents)
        return jax.tree.map(lambda leaf: leaf.reshape(shape + leaf.shape[1:]), x)

    def ended(flag: jax.Array, num_envs: int) -> jax.Array:
        """`[R]` flags -> `[N]`: any of the env's rows."""
        return jnp.any(flag.reshape((num_envs, -1)), axis=1)

    def step(params, temperature, carry: Playing, step_key) -> tuple[Playing, Any]:
        rows, num_envs = carry.rows, carry.active.shape[0]
        act_key, env_key = jax.random.split(step_key)
        policy_state, dist, value = networks.step(params, rows.policy_state, rows.obs, rows.reset)
        action, _ = select_action(networks.action_spec, dist, value, act_key, temperature)
        out = rows_env.step(as_keys(env_key), rows, action)
        reward = per_env(out.reward, num_envs).astype(jnp.float32)
        terminated, truncated = ended(out.terminated, num_envs), ended(out.truncated, num_envs)
        reward, terminated, truncated, score = episodes.step(
            reward, terminated, truncated, out.info, carry.score
        )
        active = carry.active
        mask = active.reshape(active.shape + (1,) * (reward.ndim - 1))
        next_carry = Playing(
            rows=rows.stepped(out, policy_state),
            active=jnp.logical_and(active, ~jnp.logical_or(terminated, truncated)),
            returns=carry.returns + jnp.where(mask, reward, 0.0),
            lengths=carry.lengths + active.astype(jnp.int32),
            score=score,
        )
        seen = Step(
            env_state=rows.env_state,
            obs=per_env(rows.obs, num_envs),
            action=per_env(action, num_envs),
            log_prob=per_env(dist.log_prob(action).astype(jnp.float32), num_envs),
            value=per_env(value.astype(jnp.float32), num_envs),
            reward=rows_env.team_reward(reward),
            agent_reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=per_env(out.final_obs, num_envs),
            info=out.info,
            active=active,
        )
        return next_carry, output(seen)

    def play(params, carry: Playing, keys: jax.Array, temperature) -> tuple[Playing, Any]:
        if not until_ended:
            return jax.lax.scan(lambda c, k: step(params, temperature, c, k), carry, keys)

        def more(state: tuple[jax.Array, Playing]) -> jax.Array:
            index, playing = state
            return jnp.logical_and(index < keys.shape[0], jnp.any(playing.active))

        def advance(state: tuple[jax.Array, Playing]) -> tuple[jax.Array, Playing]:
            index, playing = state
            return index + 1, step(params, temperature, playing, keys[index])[0]

        return jax.lax.while_loop(more, advance, (jnp.int32(0), carry))[1], None

    return start, play


def make_rows_episode_runner(
    rows_env: RowsEnv, networks: Networks, episodes: Episodes, num_episodes: int, max_steps: int
) -> Callable[[Any, jax.Array, Any], tuple[jax.Array, jax.Array]]:
    """Jitted `run(params, key, temperature) -> (returns float32 [E], lengths int32 [E])`:
    E envs play one episode each in at most `max_steps` steps, stopping when the last one
    ends (`acting.evaluation`); a return is undiscounted (A agents: the team reward of the
    agents' returns)."""
    start, play = make_play(rows_env, networks, episodes, lambda step: None, until_ended=True)

    @jax.jit
    def run(params, key, temperature):
        carry, scan_key = start(key, num_episodes)
        carry, _ = play(params, carry, jax.random.split(scan_key, max_steps), temperature)
        return rows_env.team_reward(carry.returns), carry.lengths

    return run


def make_rows_recorder(
    rows_env: RowsEnv,
    networks: Networks,
    episodes: Episodes,
    max_steps: int,
    num_envs: int | None = None,
) -> Callable[[Any, jax.Array, Any], tuple[Any, ...]]:
    """Jitted `record(params, key, temperature) -> (states, obs, actions, rewards,
    active)` of one env's episode (`acting.video`): `[max_steps]` leaves, the state and
    what a video keeps of the observation (`Episodes.frame`; A agents: `[A, ...]`) each
    step's actions were taken in, the step's (team) reward, and `active` marking the
    steps before the episode ended. One env stepped with the keys as they are; with
    `num_envs` E, the E envs of `make_rows_episode_runner` (the same keys), the first
    one's steps kept: the first of the episodes an evaluation with that key plays."""

    def output(step: Step) -> tuple[Any, ...]:
        first = lambda x: x[0]  # noqa: E731
        obs = episodes.frame(jax.tree.map(first, step.obs))
        state = jax.tree.map(first, step.env_state)
        return state, obs, jax.tree.map(first, step.action), step.reward[0], step.active[0]

    one_env = num_envs is None
    start, play = make_play(rows_env, networks, episodes, output, one_env=one_env)

    @jax.jit
    def record(params, key, temperature):
        carry, scan_key = start(key, 1 if one_env else num_envs)
        _, outs = play(params, carry, jax.random.split(scan_key, max_steps), temperature)
        return outs

    return record


def make_rows_chunk_runner(
    rows_env: RowsEnv, networks: Networks, episodes: Episodes, info_keys: tuple[str, ...]
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Jitted `(start(key, E), chunk(params, carry, keys [C], temperature))` of
    `acting.datasets`: `chunk` plays C steps of the E envs and returns the carry and the
    records `[C, E]`: `obs`, `action`, `reward`, `terminated`, `truncated`, `log_prob`,
    `value`, `final_obs`, `active` and `info` (`info_keys`); A agents: an agent axis
    after the env's (`[C, E, A, ...]`), `reward` the team reward and `agent_reward`
    each agent's."""

    def output(step: Step) -> dict[str, Any]:
        record = {
            "obs": step.obs,
            "action": step.action,
            "reward": step.reward,
            "terminated": step.terminated,
            "truncated": step.truncated,
            "log_prob": step.log_prob,
            "value": step.value,
            "final_obs": step.final_obs,
            "active": step.active,
            "info": {key: step.info[key] for key in info_keys},
        }
        if rows_env.num_agents:
            record["agent_reward"] = step.agent_reward
        return record

    start, play = make_play(rows_env, networks, episodes, output)
    return jax.jit(start, static_argnums=1), jax.jit(play)


def check_info_keys(
    rows_env: RowsEnv, env: Any, env_params: Any, networks: Networks, info_keys: tuple[str, ...]
) -> None:
    """Raises ValueError naming the `info_keys` that the env's info dict lacks (its keys
    from `jax.eval_shape` of one step of one env, every row taking a sampled action)."""
    if not info_keys:
        return

    def info(key: jax.Array) -> dict[str, Any]:
        carry = rows_env.reset(key, 1, networks)
        num_rows = jax.tree.leaves(carry.obs)[0].shape[0]
        action = env.action_space(env_params).sample(key)
        actions = jnp.broadcast_to(action, (num_rows, *jnp.shape(action)))
        return rows_env.step(key, carry, actions).info

    unknown = sorted(set(info_keys) - set(jax.eval_shape(info, jax.random.key(0))))
    if unknown:
        raise ValueError(f"collect: info keys {unknown} not in the env's info dict")
