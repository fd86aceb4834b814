"""Greedy evaluation of every lane at a report, for `tune`'s `eval_return` objective.

Each lane plays `episodes` episodes with argmax / mean actions in an env of its own
(`make_env` of the config's id, as the training loop's `eval_freq` does), with the key
`fold_in(fold_in(key(seed), EVAL_KEY_STREAM), updates)`: what `pjp.evaluate(policy,
key=..., greedy=True)` plays for the lane's parameters. JAX envs evaluate the lanes in one
vmapped program; host envs (`acting.host`) one lane after another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.acting import EVAL_KEY_STREAM
from purejaxppo.config import PPOConfig
from purejaxppo.networks import Networks


def eval_key(seed: int, updates: int) -> jax.Array:
    """The evaluation key of a lane of seed `seed` after `updates` updates."""
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), EVAL_KEY_STREAM), updates)


def make_lanes_evaluator(
    config: PPOConfig, networks: Networks, episodes: int, host: bool
) -> Callable[[object, Sequence[int], Sequence[int]], np.ndarray]:
    """`evaluate(params [W, ...], seeds [W], updates [W]) -> returns float32 [W, episodes]`:
    the greedy episodes of each lane's parameters (see the module docstring).

    Raises:
      ValueError: an env that cannot be evaluated (`kinds`' table), more episodes than fit
        in memory (`acting.evaluation.make_episode_runner`).
    """
    from purejaxppo.acting.evaluation import make_episode_runner
    from purejaxppo.envs import make_env
    from purejaxppo.envs.spaces import episode_limit

    env, env_params = make_env(config.env_name, config.env_kwargs)
    run = make_episode_runner(networks, env, env_params, episodes, episode_limit(env, env_params))
    greedy = jnp.float32(0.0)
    batched = None if host else jax.jit(jax.vmap(lambda p, k: run(p, k, greedy)[0]))

    def evaluate(params: object, seeds: Sequence[int], updates: Sequence[int]) -> np.ndarray:
        keys = [eval_key(s, u) for s, u in zip(seeds, updates, strict=True)]
        if batched is not None:
            return np.asarray(batched(params, jnp.stack(keys)))
        lane = lambda i: jax.tree.map(lambda x: x[i], params)  # noqa: E731
        return np.stack([np.asarray(run(lane(i), k, greedy)[0]) for i, k in enumerate(keys)])

    return evaluate
