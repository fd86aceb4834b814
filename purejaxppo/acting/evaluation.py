"""Evaluation: episodes of a policy, one per env, their returns and lengths.

`evaluate` plays `num_episodes` episodes of a `Policy` (or a trained state) and returns
them as an `EvalResult`; `make_episode_runner` is the compiled runner that the periodic
evaluation during training (`acting.make_evaluators`) and `eval --all-steps`
(`drivers.series`) reuse. The envs the program steps play in the one episode loop
(`acting.episodes`, a `lax.while_loop` that ends with the last episode); host envs in a
Python loop around the same jitted policy step (`acting.host`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.acting.episodes import make_rows_episode_runner
from purejaxppo.acting.host import make_host_episode_runner
from purejaxppo.acting_checks import check_count, check_flag, check_key
from purejaxppo.config import PPOConfig
from purejaxppo.envs import make_env
from purejaxppo.envs.spaces import episode_limit
from purejaxppo.kinds import resolve_acting
from purejaxppo.memory import check_episodes
from purejaxppo.networks import Networks
from purejaxppo.policy import Policy, observation_shapes
from purejaxppo.types import Env, EnvParams, TrainOutput, TrainState

__all__ = ["EvalResult", "evaluate", "make_episode_runner", "swapped_channels"]


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
    env_params: EnvParams | None = None,
    config: PPOConfig | None = None,
    max_steps: int | None = None,
    *,
    callback: Callable[[int, float, int], Any] | None = None,
    swap_channels: bool = False,
) -> EvalResult:
    """Runs `num_episodes` episodes in parallel (`vmap` over envs, a `lax.while_loop`
    over time that stops once every episode has ended, at most `max_steps` steps).

    Each env plays exactly one episode (steps after its end are masked out). An EnvPool
    Atari episode is the whole game (every life), its return the raw score, whatever
    `episodic_life` / `reward_clip` do to the learning signal (as the training metric
    `episode_return`); a stateful policy's state starts afresh after each lost life (where
    its learner's episodes started).

    Args:
      policy_or_state: a `Policy`, or a single-agent `TrainOutput` / `TrainState` (then
        `config` is required).
      env_id: env to evaluate on; default the policy's own `config.env_name`.
      num_episodes: episodes (= parallel envs), an int >= 1.
      key: PRNG key; default `jax.random.key(0)`.
      greedy: a bool: argmax / mean actions instead of sampling.
      env_params: the env's params (`make_env`'s second result), e.g. other physics for a
        validation split; default the env's own (with the config's `env_kwargs` when
        `env_id` is the training env).
      max_steps: scan length, an int >= 1; default `env_params.max_steps_in_episode`.
      callback: optional `callback(episode_index, episode_return, episode_length)`,
        called on the host once per episode (index order, Python float and int) after
        the compiled loop has played them all (they play in parallel), as duo_ai's and
        MetaBox's per-episode evaluation hooks; its return value is ignored.
      swap_channels: a bool: the env's image observations are `[C, H, W]` and the
        policy's `[H, W, C]` (or the other way round): each observation is transposed
        before the policy sees it (`jnp.moveaxis`; the direction is the one whose
        shape matches the policy's).

    A policy built from spaces alone (`Policy.from_spaces`) plays `config.env_name` (with
    the config's `env_kwargs`) unless given another `env_id`.

    Returns:
      `EvalResult` with `returns` float32 `[num_episodes]` and `lengths` int32.

    Raises:
      ValueError: `num_episodes` or `max_steps` not an int >= 1 (numpy integers are
        ints; 2.5 is not), a missing config, or an env whose spaces do not match the
        policy (with `swap_channels`: neither transpose of the env's observation shape
        is the policy's, or the observations are not one image array).
      TypeError: `greedy` or `swap_channels` not a bool (`'no'` would act greedily),
        `key` not one PRNG key, `callback` not callable.
    """
    num_episodes = check_count("num_episodes", num_episodes)
    if max_steps is not None:
        max_steps = check_count("max_steps", max_steps)
    greedy = check_flag("greedy", greedy)
    swap_channels = check_flag("swap_channels", swap_channels)
    if callback is not None and not callable(callback):
        raise TypeError(f"evaluate: callback={callback!r} is not callable")
    if key is not None:
        check_key("evaluate: key", key)
    if not isinstance(policy_or_state, Policy):
        if config is None:
            raise ValueError("evaluate: pass config= with a TrainOutput / TrainState")
        policy_or_state = Policy.from_train_output(policy_or_state, config)
    policy = policy_or_state
    cfg = policy.config
    spaces_only = getattr(policy.env, "spaces_only", False)  # `Policy.from_spaces`
    if (env_id is None or env_id == cfg.env_name) and not spaces_only:  # the policy's own
        env, default_params = policy.env, policy.env_params
    elif env_id is None or env_id == cfg.env_name:
        env, default_params = make_env(cfg.env_name, cfg.env_kwargs)
    else:
        env, default_params = make_env(env_id)
    env_params = default_params if env_params is None else env_params
    env_shapes = observation_shapes(env.observation_space(env_params))
    networks = policy.networks
    if swap_channels:
        networks, env_shapes = swapped_channels(networks, env_shapes, policy.obs_shape)
    if env_shapes != policy.obs_shape:
        raise ValueError(
            f"evaluate: {env_id} observations {env_shapes} do not match the policy's "
            f"{policy.obs_shape}"
        )
    if max_steps is None:
        max_steps = episode_limit(env, env_params)
    key = jax.random.key(0) if key is None else key
    run = make_episode_runner(networks, env, env_params, num_episodes, max_steps)
    returns, lengths = run(policy.get_params(), key, jnp.float32(0.0 if greedy else 1.0))
    result = EvalResult(np.asarray(returns), np.asarray(lengths))
    if callback is not None:
        for index, (ret, length) in enumerate(zip(result.returns, result.lengths, strict=True)):
            callback(index, float(ret), int(length))
    return result


def swapped_channels(networks: Networks, env_shape: Any, policy_shape: Any) -> tuple[Any, Any]:
    """`(networks, shape)`: `networks` whose `step` transposes each observation `[..., C,
    H, W]` -> `[..., H, W, C]` (or `[..., H, W, C]` -> `[..., C, H, W]`, whichever turns
    `env_shape` into `policy_shape`) before the policy, and the transposed shape.

    Raises:
      ValueError: observations that are not one array of rank >= 3, or neither
        transpose of `env_shape` is `policy_shape` (naming both shapes).
    """
    if not (isinstance(env_shape, tuple) and len(env_shape) >= 3):
        raise ValueError(
            f"evaluate: swap_channels=True needs image observations (one array [C, H, W] "
            f"or [H, W, C]); the env's are {env_shape}"
        )
    *lead, a, b, c = env_shape
    moves = {(*lead, b, c, a): (-3, -1), (*lead, c, a, b): (-1, -3)}  # CHW->HWC, HWC->CHW
    if policy_shape not in moves:
        raise ValueError(
            f"evaluate: swap_channels=True: the env's observations {env_shape} transposed "
            f"(CHW<->HWC) are not the policy's {policy_shape}"
        )
    source, target = moves[policy_shape]

    def step(params, state, obs, reset):
        return networks.step(params, state, jnp.moveaxis(obs, source, target), reset)

    return networks._replace(step=step), policy_shape


def make_episode_runner(
    policy: Policy | Networks, env: Env, env_params: EnvParams, num_episodes: int, max_steps: int
) -> Callable[[Any, jax.Array, Any], tuple[Any, Any]]:
    """Jitted `run(params, key, temperature) -> (returns [E], lengths [E])`.

    `policy`: a `Policy` or its `Networks`. Build it once and call it with new params (the
    training loop's periodic evaluation does) to compile once. The env plays in the one
    episode loop (`acting.episodes.make_rows_episode_runner`: E envs vmapped in one
    `lax.while_loop` of at most `max_steps` steps, ending with the last episode; EnvPool
    Atari: an episode is the game, scored raw; JaxMARL: the team return, every agent
    acting on its row); a host env in a Python loop around the jitted policy step
    (`acting.host.make_host_episode_runner`; numpy results).

    Raises:
      ValueError: a kind of env that cannot be evaluated (`kinds`' table); more
        episodes than fit in the device's free memory (`memory.check_episodes`).
    """
    check_episodes(num_episodes, env, env_params)  # before any of them is allocated
    networks = policy.networks if isinstance(policy, Policy) else policy
    setup = resolve_acting("eval", env, env_params, networks)  # no kind refuses "eval"
    if setup.rows is None:  # the host loop
        return make_host_episode_runner(setup.env, networks, num_episodes, max_steps)
    return make_rows_episode_runner(setup.rows, networks, setup.episodes, num_episodes, max_steps)
