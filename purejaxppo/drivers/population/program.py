"""PBT's compiled generation program: K updates of every member, then the population
step (fitness, exploit, explore), in one `lax.scan`; with a small cache of built programs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from purejaxppo import parallel
from purejaxppo.acting import make_evaluators
from purejaxppo.config import PPOConfig
from purejaxppo.drivers import warm
from purejaxppo.drivers.population.options import (
    PBTOptions,
    initial_hparams,
    member_keys,
    population_key,
)
from purejaxppo.drivers.population.search import (
    SearchSpace,
    copy_members,
    get_values,
    perturb,
    resample,
    set_values,
    tournament_parents,
    truncation_parents,
)
from purejaxppo.guards import all_finite
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.train import make_train_fns
from purejaxppo.types import RunnerState


class PopulationState(NamedTuple):
    """The population's carry between generations (global arrays, `[P]` leading axes)."""

    runner: RunnerState  # every member's RunnerState
    hparams: Hyperparams  # every member's hyperparameters
    key: jax.Array  # typed PRNG key of the population step


def make_generation_program(
    config: PPOConfig,
    space: SearchSpace,
    options: PBTOptions,
    mesh: Any,
    env: Any = None,
    env_params: Any = None,
) -> tuple[Callable, Callable]:
    """Builds `(init, run_generations)`.

    `init(key_data [P, 2], init_params) -> RunnerState [P]` (jitted, split over the
    mesh; `init_params`: the warm start every member starts from, replicated, or None:
    `drivers.warm`).
    `run_generations(state, first_generation, num_generations, length, last_generation)`
    (jitted; `num_generations`, `length` static) runs `num_generations` generations of
    `length` updates each in one `lax.scan` and returns `(state, records, metrics)`:
    records of every generation (`[G, P]` arrays: fitness, episode_return, diverged,
    parents, replaced, update_step, and `values` `[G, P, F]`, the searched values used
    during the generation) and metrics `{name: [G, P, length]}`. After each generation
    but the run's last (index `last_generation`) the population is exploited and
    explored.
    """
    fns = make_train_fns(warm.program_config(config), env, env_params)
    members = NamedSharding(mesh, P(parallel.RUNS_AXIS))
    evaluator = (
        next(iter(make_evaluators(config, fns.networks).values())) if config.eval_freq else None
    )

    # lax.map, not vmap (batched QR deadlock on CPU), but for envpool ids (one pool of all
    # members' envs, on one device): see `parallel.batch_runs`.
    init = warm.init_runs(fns.init, lambda r: r, vmap_init=fns.kind.vmap_init_runs)
    init = parallel.make_runs_program(init, mesh, warm.runs_specs(0), once=True)
    train_members = make_member_trainer(fns, options, mesh)

    def constrain(tree):
        return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, members), tree)

    select, explore = make_operators(space, options)

    def generation(state: PopulationState, index, length: int, last: jax.Array):
        runner, metrics = train_members(length)(state.runner, state.hparams)
        window = length if options.fitness_window is None else options.fitness_window
        returns = metrics["episode_return"][:, -window:]
        mean_return = jnp.nanmean(returns, axis=1)
        key, select_key, explore_key, eval_key = jax.random.split(state.key, 4)
        if evaluator is not None:
            eval_key = jax.random.fold_in(eval_key, index)
            eval_returns, _ = jax.vmap(evaluator, in_axes=(0, None, None))(
                runner.train_state.params, eval_key, jnp.float32(1.0)
            )
            raw = jnp.mean(eval_returns, axis=1)
        else:
            raw = mean_return
        losses = jnp.stack([metrics[n] for n in ("pg_loss", "v_loss", "entropy")], axis=1)
        finite_losses = jnp.all(jnp.isfinite(losses.reshape(losses.shape[0], -1)), axis=1)
        diverged = ~(all_finite(runner.train_state, batched=True) & finite_losses)
        fitness = jnp.where(diverged | jnp.isnan(raw), -jnp.inf, raw)
        parents, replaced = select(fitness, select_key)
        exploit = index != last
        members_ = jnp.arange(fitness.shape[0], dtype=jnp.int32)
        parents = jnp.where(exploit, parents, members_)
        replaced = replaced & exploit
        values = get_values(state.hparams, space)
        hparams = jax.tree.map(lambda x: x[parents], state.hparams)
        copied_values = values[parents]
        new_values = jnp.where(
            replaced[:, None], explore(copied_values, explore_key), copied_values
        )
        hparams = set_values(hparams, new_values, space)
        new_state = PopulationState(
            runner=constrain(copy_members(runner, parents)),
            hparams=constrain(hparams),
            key=key,
        )
        record = {
            "fitness": fitness,
            "episode_return": mean_return,
            "diverged": diverged,
            "parents": parents,
            "replaced": replaced,
            "update_step": runner.update_step,
            "values": values,
        }
        return new_state, (record, metrics)

    programs: dict[tuple[int, int], Callable] = {}

    def run_generations(state, first_generation, num_generations, length, last_generation):
        signature = (num_generations, length)
        if signature not in programs:

            def pbt_generations(state, first, last):
                indices = first + jnp.arange(num_generations, dtype=jnp.int32)
                return jax.lax.scan(lambda s, i: generation(s, i, length, last), state, indices)

            programs[signature] = jax.jit(pbt_generations)
        return programs[signature](state, jnp.int32(first_generation), jnp.int32(last_generation))

    run_generations.programs = programs  # type: ignore[attr-defined]
    return init, run_generations


def make_member_trainer(fns: Any, options: PBTOptions, mesh: Any) -> Callable:
    """`train_members(length) -> program (runner [P], hparams [P]) -> (runner, metrics)`,
    one compiled program per generation length, split over the mesh."""

    @functools.cache  # one program per generation length
    def train_members(length: int) -> Callable:
        if options.population == mesh.devices.size:
            # One member per device: no vmap, so that the member's numbers are those of
            # the plain run bit for bit (a vmapped batch may change XLA's last bits).
            def batched(runner, hp):
                first = jax.tree.map(lambda x: x[0], (runner, hp))
                out = fns.run(*first, length)
                return jax.tree.map(lambda x: x[None], out)
        else:
            batched = jax.vmap(lambda runner, hp: fns.run(runner, hp, length))
        return parallel.make_runs_program(batched, mesh)

    return train_members


def make_operators(space: SearchSpace, options: PBTOptions) -> tuple[Callable, Callable]:
    """(select(fitness, key) -> (parents, replaced), explore(values, key) -> values) of
    the options' exploit and explore strategies."""
    low = jnp.asarray(space.lows, jnp.float32)
    high = jnp.asarray(space.highs, jnp.float32)

    def select(fitness, key):
        if options.exploit == "truncation":
            return truncation_parents(fitness, key, options.truncation_fraction)
        return tournament_parents(fitness, key, options.tournament_size, options.elitism)

    def explore(values, key):
        if options.explore == "perturb":
            return perturb(values, key, low, high, options.perturb_factors)
        return resample(values, key, space, options.resample_probability)

    return select, explore


#: Recently built programs, so that repeated `pbt` calls with the same static settings
#: (another seed or search range, a resume) reuse the compiled program.
PROGRAM_CACHE: dict[tuple, tuple[Callable, Callable]] = {}


def cached_programs(config, space, options, mesh, env, env_params):
    if env is not None:  # an arbitrary env object: no cache
        return make_generation_program(config, space, options, mesh, env, env_params)
    static = dataclasses.replace(options, seed=0)
    # The search ranges are traced into the program (perturb clips, resample draws).
    # config.seed is the CLI's seed: the program does not depend on it.
    # The warm start is an argument of `init`: the program does not depend on its source.
    key = (
        repr(warm.program_config(config).replace(seed=0)),
        space,
        static,
        tuple(d.id for d in mesh.devices.flat),
    )
    if key not in PROGRAM_CACHE:
        if len(PROGRAM_CACHE) >= 4:
            PROGRAM_CACHE.pop(next(iter(PROGRAM_CACHE)))
        PROGRAM_CACHE[key] = make_generation_program(config, space, options, mesh)
    return PROGRAM_CACHE[key]


class CompileCounter:
    """Counts XLA backend compilations while `active` (a `jax.monitoring` listener), so
    that `PBTResult.num_compiles` reports real compilations of the generation programs."""

    EVENT = "/jax/core/compile/backend_compile_duration"

    def __init__(self) -> None:
        self.count = 0
        self.active = False
        jax.monitoring.register_event_duration_secs_listener(self)

    def __call__(self, event: str, duration: float, **kwargs: Any) -> None:
        if self.active and event == self.EVENT and "pbt_generations" in kwargs.get("fun_name", ""):
            self.count += 1


COMPILES = CompileCounter()


def initial_state(
    init: Callable, config: PPOConfig, space: SearchSpace, options: PBTOptions, mesh: Any
) -> PopulationState:
    """The population before its first update: members initialised from `member_keys`,
    hyperparameters from `initial_hparams`, split over `mesh` (init from
    `make_generation_program`)."""
    members = P(parallel.RUNS_AXIS)
    key_data = np.asarray(jax.random.key_data(member_keys(options.seed, options.population)))
    hparams = initial_hparams(config, space, options.population, options.seed)
    init_params = warm.load_warm_start(config)
    return PopulationState(
        runner=init(parallel.to_global(key_data, mesh, members), warm.replicate(init_params, mesh)),
        hparams=parallel.to_global(hparams, mesh, members),
        key=replicated_key(np.asarray(jax.random.key_data(population_key(options.seed))), mesh),
    )


def place_state(state: PopulationState, mesh: Any) -> PopulationState:
    """`state` laid out the same way every time: members split along `RUNS_AXIS`, the
    population key replicated. A jitted program's outputs may carry another but
    equivalent layout (e.g. `P()` for `P("runs")` on one device), which would make the
    next call compile again."""
    members = NamedSharding(mesh, P(parallel.RUNS_AXIS))
    return PopulationState(
        runner=jax.device_put(state.runner, members),
        hparams=jax.device_put(state.hparams, members),
        key=jax.device_put(state.key, NamedSharding(mesh, P())),
    )


def replicated_key(key_data: np.ndarray, mesh: Any) -> jax.Array:
    """The population key, replicated on every device of the mesh (typed)."""
    return jax.random.wrap_key_data(parallel.to_global(key_data, mesh, P()))
