"""Evaluation: episodes of a policy, one per env, their returns and lengths.

`evaluate` plays `num_episodes` episodes of a `Policy` (or a trained state) and returns
them as an `EvalResult`; `make_episode_runner` is the compiled runner that the periodic
evaluation during training (`acting.make_evaluators`) and `eval --all-steps`
(`drivers.series`) reuse. JAX envs play in one `vmap` + `lax.scan`; host envs in a Python
loop around the same jitted policy step (`host_episodes`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.config import PPOConfig
from purejaxppo.envs import make_env
from purejaxppo.envs.agent_rows import make_agents_episode_runner
from purejaxppo.envs.spaces import episode_limit
from purejaxppo.host_episodes import make_host_episode_runner
from purejaxppo.kinds import check
from purejaxppo.memory import check_episodes
from purejaxppo.networks import Networks
from purejaxppo.policy import Policy, make_act, observation_shapes
from purejaxppo.types import TrainOutput, TrainState

__all__ = ["EvalResult", "evaluate", "make_episode_runner"]


class EvalResult(NamedTuple):
    """Per-episode results of `evaluate`."""

    returns: np.ndarray  # float32 [num_episodes], undiscounted
    lengths: np.ndarray  # int32 [num_episodes]

    def summary(self) -> dict[str, float]:
        """mean, std and IQM (mean of the middle 50%, Agarwal et al. 2021) of returns."""
        r = np.sort(np.asarray(self.returns, np.float64))
        n = len(r)
        middle = r[n // 4 : n - n // 4] if n >= 4 else r
        return {"mean": float(r.mean()), "std": float(r.std()), "iqm": float(middle.mean())}


def evaluate(
    policy_or_state: Policy | TrainOutput | TrainState,
    env_id: str | None = None,
    num_episodes: int = 100,
    key: jax.Array | None = None,
    greedy: bool = False,
    env_params: Any = None,
    config: PPOConfig | None = None,
    max_steps: int | None = None,
) -> EvalResult:
    """Runs `num_episodes` episodes in parallel (`vmap` over envs, `lax.scan` over time).

    Each env plays exactly one episode (steps after its end are masked out). An EnvPool
    Atari episode is the whole game (every life), its return the raw score, whatever
    `episodic_life` / `reward_clip` do to the learning signal (as the training metric
    `episode_return`); a stateful policy's state starts afresh after each lost life (where
    its learner's episodes started).

    Args:
      policy_or_state: a `Policy`, or a single-agent `TrainOutput` / `TrainState` (then
        `config` is required).
      env_id: env to evaluate on; default the policy's own `config.env_name`.
      num_episodes: episodes (= parallel envs).
      key: PRNG key; default `jax.random.key(0)`.
      greedy: argmax / mean actions instead of sampling.
      env_params: e.g. other physics for a validation split; default the env's own (with
        the config's `env_kwargs` when `env_id` is the training env).
      max_steps: scan length; default `env_params.max_steps_in_episode`.

    Returns:
      `EvalResult` with `returns` float32 `[num_episodes]` and `lengths` int32.

    Raises:
      ValueError: for `num_episodes < 1`, a missing config, or an env whose spaces do
        not match the policy.
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes={num_episodes!r}: must be >= 1")
    if not isinstance(policy_or_state, Policy):
        if config is None:
            raise ValueError("evaluate: pass config= with a TrainOutput / TrainState")
        policy_or_state = Policy.from_train_output(policy_or_state, config)
    policy = policy_or_state
    cfg = policy.config
    if env_id is None or env_id == cfg.env_name:  # the policy's own (configured) env
        env, default_params = policy.env, policy.env_params
    else:
        env, default_params = make_env(env_id)
    env_params = default_params if env_params is None else env_params
    env_shapes = observation_shapes(env.observation_space(env_params))
    if env_shapes != policy.obs_shape:
        raise ValueError(
            f"evaluate: {env_id} observations {env_shapes} do not match the policy's "
            f"{policy.obs_shape}"
        )
    if max_steps is None:
        max_steps = episode_limit(env, env_params)
    key = jax.random.key(0) if key is None else key
    run = make_episode_runner(policy, env, env_params, num_episodes, max_steps)
    returns, lengths = run(policy.get_params(), key, jnp.float32(0.0 if greedy else 1.0))
    return EvalResult(np.asarray(returns), np.asarray(lengths))


def make_episode_runner(
    policy: Policy | Networks, env: Any, env_params: Any, num_episodes: int, max_steps: int
) -> Any:
    """Jitted `run(params, key, temperature) -> (returns [E], lengths [E])`.

    `policy`: a `Policy` or its `Networks`. Build it once and call it with new params (the
    training loop's periodic evaluation does) to compile once. A host env plays the same
    episodes in a Python loop around the jitted policy step
    (`host_episodes.make_host_episode_runner`; numpy results).

    Raises:
      ValueError: a kind of env that cannot be evaluated (`kinds`' table); more
        episodes than fit in the device's free memory (`memory.check_episodes`).
    """
    kind = check("eval", getattr(env, "name", repr(env)), env)
    check_episodes(num_episodes, env, env_params)  # before any of them is allocated
    networks = policy.networks if isinstance(policy, Policy) else policy
    loop = _LOOPS[kind.loop]
    env, episodes = kind.acting_env(env, networks), kind.episodes_of(env)
    return loop(env, env_params, make_act(networks), networks, episodes, (num_episodes, max_steps))


def _program_episode_runner(
    env: Any, env_params: Any, act: Any, networks: Any, episodes: Any, size: tuple[int, int]
) -> Any:
    """`make_episode_runner` for an env stepped inside the program: E envs vmapped in
    one `lax.scan` of `max_steps` steps (EnvPool Atari: an episode is the game, scored
    raw, `envs.episodes`). `size`: (num_episodes, max_steps)."""
    num_episodes, max_steps = size

    @jax.jit
    def run(params, key, temperature):
        reset_key, scan_key = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_episodes), env_params
        )

        def step(carry, step_key):
            obs, state, ret, length, active, policy_state, life_end, score = carry
            act_key, env_key = jax.random.split(step_key)
            # A stateful policy starts afresh where its learner's episode started: after
            # a lost life under `episodic_life` too (only Atari ends one within a game).
            policy_state, action, _ = act(params, policy_state, obs, life_end, act_key, temperature)
            obs, state, reward, terminated, truncated, info = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(env_key, num_episodes), state, action, env_params)
            life_end = jnp.logical_or(terminated, truncated)
            length = length + active.astype(jnp.int32)
            reward, terminated, truncated, score = episodes.step(
                reward.astype(jnp.float32), terminated, truncated, info, score
            )
            ret = ret + jnp.where(active, reward, 0.0)
            active = jnp.logical_and(active, ~jnp.logical_or(terminated, truncated))
            carry = (obs, state, ret, length, active, policy_state, life_end, score)
            return carry, None

        init = (
            obs,
            state,
            jnp.zeros(num_episodes, jnp.float32),
            jnp.zeros(num_episodes, jnp.int32),
            jnp.ones(num_episodes, bool),
            networks.initial_state(num_episodes),
            jnp.zeros((num_episodes,), bool),
            jnp.zeros(num_episodes, jnp.float32),
        )
        (_, _, ret, length, *_), _ = jax.lax.scan(step, init, jax.random.split(scan_key, max_steps))
        return ret, length

    return run


def _agents_episode_runner(
    env: Any, env_params: Any, act: Any, networks: Any, episodes: Any, size: tuple[int, int]
) -> Any:
    """`make_episode_runner` for a JaxMARL env: its agents on rows, the team return."""
    del episodes
    return make_agents_episode_runner(env, env_params, act, networks.initial_state, *size)


def _host_episode_runner(
    env: Any, env_params: Any, act: Any, networks: Any, episodes: Any, size: tuple[int, int]
) -> Any:
    """`make_episode_runner` for a host env: a Python loop around the jitted `act`."""
    del env_params, episodes
    return make_host_episode_runner(env, act, networks.initial_state, *size)


#: `EnvKind.loop` -> the runner builder for that loop.
_LOOPS = {
    "program": _program_episode_runner,
    "agents": _agents_episode_runner,
    "host": _host_episode_runner,
}
