"""Running a controller on fixed `metabbo:` problem instances (the benchmark's and the
tests' evaluation): every (function, instance, repeat) for one budget, best-so-far cost
curves out, one jitted program."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from purejaxppo.envs.suites.metabbo.problems import evaluate

#: `controller(obs [8], key) -> action` of one env (vmapped by `run_instances`).
Controller = Callable[[jax.Array, jax.Array], Any]


def make_run_instances(
    env: Any,
    params: Any,
    controller: Controller,
    functions: Sequence[int],
    num_instances: int,
    num_repeats: int,
) -> Callable[[jax.Array], jax.Array]:
    """`run(key) -> costs`, float32 `[F, I, R, T + 1]`: the best-so-far cost `f - f_opt`
    after t = 0..T generations (T = `params.max_steps_in_episode`) of the optimiser driven
    by `controller`, on BBOB ids `functions` (F), the fixed instances 0..I-1 of
    `params.split` (I at most `env.num_instances(params.split)`) and R repeats (optimiser
    randomness from `fold_in(key, r)`). The repeat keys are shared by every controller given the same key,
    so controllers are compared on the same instances, initial populations and seeds.
    """
    if num_instances > env.num_instances(params.split):
        raise ValueError(
            f"num_instances={num_instances} > the {env.num_instances(params.split)} fixed "
            f"instances of split {params.split!r}"
        )
    steps = int(params.max_steps_in_episode)
    fns = jnp.asarray(functions, jnp.int32)

    def episode(key, function, instance):
        problem = env.instance(function, instance, params.split)
        pop_key, eval_key, init_key, loop_key = jax.random.split(key, 4)
        x = env.initial_population(pop_key)
        fitness = evaluate(env.problem, eval_key, x, problem)
        obs, state = env.start(init_key, x, fitness, problem, function, params)

        def body(carry, step_key):
            obs, state = carry
            act_key, env_key = jax.random.split(step_key)
            action = controller(obs, act_key)
            obs, state, _, _, _, _ = env.step_env(env_key, state, action, params)
            return (obs, state), state.best_cost

        _, costs = jax.lax.scan(body, (obs, state), jax.random.split(loop_key, steps))
        return jnp.concatenate([state.best_cost[None], costs])

    def run(key: jax.Array) -> jax.Array:
        def per_function(function):
            def per_instance(instance):
                inst_key = jax.random.fold_in(key, instance)
                keys = jax.vmap(lambda r: jax.random.fold_in(inst_key, r))(jnp.arange(num_repeats))
                return jax.vmap(episode, in_axes=(0, None, None))(keys, function, instance)

            return jax.vmap(per_instance)(jnp.arange(num_instances))

        return jax.vmap(per_function)(fns)

    return run


def constant_controller(action: Any) -> Controller:
    """The controller that always plays `action` (e.g. `env.default_action()`)."""
    return lambda obs, key: action


def random_controller(env: Any, params: Any) -> Controller:
    """Uniformly random actions from `env.action_space(params)`."""
    space = env.action_space(params)
    return lambda obs, key: space.sample(key)
