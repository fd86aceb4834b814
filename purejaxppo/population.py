"""Population-based training (Jaderberg et al. 2017, arXiv:1711.09846) as one program.

`pbt(config, population=P, ready_every=K, search={...})` trains P members of one config
whose searched hyperparameters (traced fields, `TRACED_FIELDS`) start from draws of
`search`'s distributions. Every K updates ("a generation") every member gets a fitness
(mean episode return over the generation's last `fitness_window` updates, or, with
`config.eval_freq` > 0, the mean return of `eval_episodes` evaluation episodes on the first
eval split), then:

* exploit: members chosen by `exploit` copy another member's state -- every field of its
  `RunnerState` except `env`, `key` and `update_step` (so params, optimizer state and any
  statistics the runner carries) -- and its hyperparameters:
  `"truncation"` (the bottom `truncation_fraction` of the ranking copies a uniformly drawn
  member of the top fraction) or `"tournament"` (AgileRL's tournament selection: every
  member but the elite is replaced by the winner of a tournament of `tournament_size`
  members drawn with replacement; with `elitism` the best member is kept unchanged);
* explore: the replaced members' searched values are changed: `"perturb"` (each value
  multiplied by 0.8 or 1.2 with equal probability, clipped to its search range) or
  `"resample"` (each value redrawn from its initial distribution with probability
  `resample_probability`).

A member whose parameters or losses are not finite is `diverged`: its fitness is -inf, it
is never a parent, and it is replaced at the next exploit whenever a finite parent exists.

Training, fitness, selection, copying and mutation run in ONE jitted program: a
`lax.scan` over generations whose body runs K updates of all members (`vmap`, split over
the devices along `parallel.RUNS_AXIS`) and then the population step on the whole
population (XLA gathers across devices). The Python driver calls it in segments of whole
generations only to draw a progress bar and write checkpoints; the numbers do not depend
on the segmentation.

Member m starts from the key `jax.random.split(jax.random.key(seed) ..., P)[m]` (see
`member_keys`); with a population of 1 (which never exploits) the member's run is the
plain run `make_train(config)(member_keys(seed, 1)[0], hparams)` bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from purejaxppo import parallel
from purejaxppo.config import TRACED_FIELDS, Hyperparams, PPOConfig
from purejaxppo.runner import final_return
from purejaxppo.sweeps import check_field, sample_random
from purejaxppo.train import METRICS, make_train_fns
from purejaxppo.types import RunnerState

#: Exploit strategies (`pbt(exploit=...)`).
EXPLOITS = ("truncation", "tournament")
#: Explore strategies (`pbt(explore=...)`).
EXPLORES = ("perturb", "resample")
#: Initial distributions a searched field may have (`search=`).
SEARCH_DISTRIBUTIONS = ("uniform", "log_uniform")
#: RunnerState fields that stay with the member's slot when it copies another member.
NOT_COPIED = ("env", "key", "update_step")
#: Lineage columns besides the searched fields.
LINEAGE_COLUMNS = (
    "generation", "member", "parent", "replaced", "update", "env_steps", "fitness",
    "episode_return", "diverged",
)  # fmt: skip


# ----------------------------------------------------------------------- search space
@dataclasses.dataclass(frozen=True)
class SearchSpace:
    """The searched traced fields, their initial distributions and ranges (static).

    Attributes:
      names: searched fields, in the order of the `[P, F]` value matrices.
      kinds: "uniform" or "log_uniform" per field.
      lows, highs: range of each field (perturbed values are clipped to it).
    """

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]

    @property
    def spec(self) -> dict[str, tuple]:
        """`{name: (kind, low, high)}`, the `sweep(random=...)` form."""
        return {
            n: (k, lo, hi)
            for n, k, lo, hi in zip(self.names, self.kinds, self.lows, self.highs, strict=True)
        }


def parse_search(search: Mapping[str, Sequence[Any]] | None, config: PPOConfig) -> SearchSpace:
    """Checks `search` (field -> `(distribution, low, high)`, the syntax of
    `sweep(random=...)`) and returns its `SearchSpace`.

    Raises:
      ValueError: naming the field and value, for an unknown field, a static field, a
        distribution other than uniform / log_uniform, low >= high, a log_uniform range
        that is not positive, or bounds that are not valid values of the field.
    """
    names, kinds, lows, highs = [], [], [], []
    for name, spec in (search or {}).items():
        check_field(name, "search")
        if name not in TRACED_FIELDS:
            raise ValueError(
                f"search: field {name!r} is static (it fixes the compiled program); pbt "
                f"searches only traced fields: {', '.join(TRACED_FIELDS)}"
            )
        if isinstance(spec, str) or not isinstance(spec, Sequence) or len(spec) != 3:
            raise ValueError(f"search[{name!r}]={spec!r}: must be (distribution, low, high)")
        kind, low, high = spec
        if kind not in SEARCH_DISTRIBUTIONS:
            raise ValueError(
                f"search[{name!r}]: distribution {kind!r} is not one of {SEARCH_DISTRIBUTIONS}"
            )
        try:
            low, high = float(low), float(high)
        except (TypeError, ValueError):
            raise ValueError(f"search[{name!r}]={spec!r}: low and high must be numbers") from None
        if not low < high:
            raise ValueError(f"search[{name!r}]={spec!r}: needs low < high (got {low} >= {high})")
        if kind == "log_uniform" and low <= 0:
            raise ValueError(f"search[{name!r}]={spec!r}: log_uniform needs 0 < low")
        for bound in (low, high):
            try:
                config.replace(**{name: bound})
            except ValueError as err:
                raise ValueError(f"search[{name!r}]={spec!r}: {err}") from None
        names.append(name)
        kinds.append(kind)
        lows.append(low)
        highs.append(high)
    return SearchSpace(tuple(names), tuple(kinds), tuple(lows), tuple(highs))


def get_values(hparams: Hyperparams, space: SearchSpace) -> jax.Array:
    """The searched fields of `[P]`-batched `hparams` as a float32 `[P, F]` matrix."""
    if not space.names:
        return jnp.zeros((hparams.learning_rate.shape[0], 0), jnp.float32)
    return jnp.stack([getattr(hparams, name) for name in space.names], axis=1)


def set_values(hparams: Hyperparams, values: jax.Array, space: SearchSpace) -> Hyperparams:
    """`hparams` with its searched fields replaced by the columns of `values` `[P, F]`."""
    return hparams.replace(**{name: values[:, i] for i, name in enumerate(space.names)})


# ----------------------------------------------------------------------- selection
def truncation_parents(
    fitness: jax.Array, key: jax.Array, fraction: float = 0.25
) -> tuple[jax.Array, jax.Array]:
    """Truncation selection (Jaderberg et al. 2017, Sec. 4): the bottom `fraction` of the
    ranking, and every member with non-finite fitness, copy a member drawn uniformly from
    the finite members of the top `fraction`.

    Ranking: descending fitness, ties broken by the lower member index. The top pool holds
    `max(1, floor(P * fraction))` members, the bottom `floor(P * fraction)`; pool members
    are never replaced. Parent of replaced member i: the pool's `floor(u_i * V)`-th finite
    member in rank order, `u = jax.random.uniform(key, [P])`, V the number of finite
    pool members (nobody is replaced when V = 0). A member is replaced only by a strictly
    fitter parent: on ties (e.g. every member at the maximal return, or at the time limit
    early in training) nobody copies, so the index tie-break decides nothing.

    Args:
      fitness: float32 `[P]`; -inf (or NaN) for members that must not be parents.
      key: PRNG key of this selection.
      fraction: top / bottom fraction, in (0, 0.5].

    Returns:
      `parents` int32 `[P]` (i for members that keep their own state) and `replaced`
      bool `[P]`.
    """
    num = fitness.shape[0]
    fitness = jnp.where(jnp.isnan(fitness), -jnp.inf, fitness)
    cut = int(num * fraction)
    order = jnp.argsort(-fitness, stable=True)  # best first
    rank = jnp.zeros(num, jnp.int32).at[order].set(jnp.arange(num, dtype=jnp.int32))
    pool = order[: max(cut, 1)]
    num_valid = jnp.sum(jnp.isfinite(fitness[pool]))
    in_pool = rank < max(cut, 1)
    candidate = ((rank >= num - cut) | ~jnp.isfinite(fitness)) & ~in_pool & (num_valid > 0)
    u = jax.random.uniform(key, (num,))
    choice = jnp.minimum(jnp.floor(u * num_valid).astype(jnp.int32), jnp.maximum(num_valid - 1, 0))
    drawn = pool[choice]
    replaced = candidate & (fitness < fitness[drawn])  # only a strictly fitter parent
    parents = jnp.where(replaced, drawn, jnp.arange(num, dtype=jnp.int32))
    return parents.astype(jnp.int32), replaced


def tournament_parents(
    fitness: jax.Array, key: jax.Array, size: int = 3, elitism: bool = True
) -> tuple[jax.Array, jax.Array]:
    """Tournament selection with elitism (AgileRL's `TournamentSelection`).

    Every member i (but the elite, the first member of highest fitness, when `elitism`)
    is replaced by the winner of a tournament among `size` members drawn with
    replacement, `contenders = jax.random.randint(key, [P, size], 0, P)`: the contender of
    highest fitness, the first one on ties. A winner with non-finite fitness is replaced
    by the elite; if no member is finite nobody is replaced.

    Args:
      fitness: float32 `[P]`; -inf (or NaN) for members that must not be parents.
      key: PRNG key of this selection.
      size: tournament size k >= 1.
      elitism: keep the best member (its slot copies nothing and is not explored).

    Returns:
      `parents` int32 `[P]` and `replaced` bool `[P]` (every member but the elite).
    """
    num = fitness.shape[0]
    fitness = jnp.where(jnp.isnan(fitness), -jnp.inf, fitness)
    members = jnp.arange(num, dtype=jnp.int32)
    contenders = jax.random.randint(key, (num, size), 0, num, dtype=jnp.int32)
    winners = contenders[members, jnp.argmax(fitness[contenders], axis=1)]
    elite = jnp.argmax(fitness).astype(jnp.int32)
    winners = jnp.where(jnp.isfinite(fitness[winners]), winners, elite)
    replaced = jnp.ones(num, bool)
    if elitism:
        replaced = replaced & (members != elite)
    replaced = replaced & jnp.isfinite(fitness[elite])
    return jnp.where(replaced, winners, members), replaced


# ----------------------------------------------------------------------- mutation
def perturb(
    values: jax.Array,
    key: jax.Array,
    low: jax.typing.ArrayLike,
    high: jax.typing.ArrayLike,
    factors: tuple[float, float] = (0.8, 1.2),
) -> jax.Array:
    """PBT's perturb explore: each value times `factors[0]` or `factors[1]` (equal odds,
    `up = jax.random.bernoulli(key, 0.5, values.shape)` picks `factors[1]`), clipped to
    `[low, high]`.

    Args:
      values: float32 `[P, F]` searched values.
      key: PRNG key.
      low, high: float32 `[F]` range of each field.
    """
    up = jax.random.bernoulli(key, 0.5, values.shape)
    scaled = values * jnp.where(up, jnp.float32(factors[1]), jnp.float32(factors[0]))
    return jnp.clip(scaled, jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32))


def sample_values(key: jax.Array, space: SearchSpace, shape: tuple[int, ...]) -> jax.Array:
    """Draws from the initial distributions: float32 `[*shape, F]`, `u ~ U[0, 1)` per value
    (`jax.random.uniform(key, (*shape, F))`), `low + u (high - low)` (uniform) or
    `exp(log low + u (log high - log low))` (log_uniform)."""
    low = jnp.asarray(space.lows, jnp.float32)
    high = jnp.asarray(space.highs, jnp.float32)
    log_scale = jnp.asarray([k == "log_uniform" for k in space.kinds], bool)
    u = jax.random.uniform(key, (*shape, len(space.names)))
    linear = low + u * (high - low)
    safe_low = jnp.where(log_scale, low, 1.0)
    safe_high = jnp.where(log_scale, high, 1.0)
    logs = jnp.exp(jnp.log(safe_low) + u * (jnp.log(safe_high) - jnp.log(safe_low)))
    return jnp.where(log_scale, logs, linear)


def resample(
    values: jax.Array, key: jax.Array, space: SearchSpace, probability: float = 0.25
) -> jax.Array:
    """PBT's resample explore: each value is redrawn from its initial distribution with
    probability `probability` (`jax.random.uniform(mask_key, [P, F]) < probability`, with
    `mask_key, draw_key = jax.random.split(key)`; draws from `sample_values(draw_key)`),
    else kept.

    Args:
      values: float32 `[P, F]` searched values.
    """
    mask_key, draw_key = jax.random.split(key)
    redraw = jax.random.uniform(mask_key, values.shape) < probability
    return jnp.where(redraw, sample_values(draw_key, space, values.shape[:1]), values)


def copy_members(runner: RunnerState, parents: jax.Array) -> RunnerState:
    """Population `runner` (`[P]` leaves) where member i holds member `parents[i]`'s value
    of every field except `env`, `key` and `update_step` (train state: params and
    optimizer state, and any statistics a RunnerState carries). Exact copies (a gather)."""
    copied = {
        field.name: jax.tree.map(lambda x: x[parents], getattr(runner, field.name))
        for field in dataclasses.fields(runner)
        if field.name not in NOT_COPIED
    }
    return runner.replace(**copied)


def all_finite(tree: Any) -> jax.Array:
    """bool `[P]`: every floating leaf of member i (leading axis `[P]`) is finite."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.floating)]
    ok = jnp.ones(leaves[0].shape[0], bool) if leaves else jnp.ones((), bool)
    for x in leaves:
        ok = ok & jnp.all(jnp.isfinite(x.reshape(x.shape[0], -1)), axis=1)
    return ok


# ----------------------------------------------------------------------- options
@dataclasses.dataclass(frozen=True)
class PBTOptions:
    """Static settings of a PBT run (see `pbt` for their meaning)."""

    population: int
    ready_every: int
    exploit: str = "truncation"
    explore: str = "perturb"
    truncation_fraction: float = 0.25
    tournament_size: int = 3
    elitism: bool = True
    perturb_factors: tuple[float, float] = (0.8, 1.2)
    resample_probability: float = 0.25
    fitness_window: int | None = None
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["perturb_factors"] = list(self.perturb_factors)
        return out


def _check_options(options: PBTOptions, config: PPOConfig, num_devices: int) -> None:
    o = options
    if isinstance(o.population, bool) or not isinstance(o.population, (int, np.integer)):
        raise ValueError(f"population={o.population!r}: must be an integer >= 1")
    if o.population < 1:
        raise ValueError(f"population={o.population}: must be >= 1")
    if o.population % num_devices:
        raise ValueError(
            f"population={o.population} must be divisible by the number of devices "
            f"{num_devices} (every device trains the same number of members)"
        )
    if not isinstance(o.ready_every, (int, np.integer)) or o.ready_every < 1:
        raise ValueError(f"ready_every={o.ready_every!r}: must be an integer >= 1")
    if o.ready_every > config.num_updates:
        raise ValueError(
            f"ready_every={o.ready_every} is larger than the run: num_updates = "
            f"total_timesteps // (num_envs*num_steps) = {config.total_timesteps} // "
            f"{config.batch_size} = {config.num_updates}"
        )
    if o.exploit not in EXPLOITS:
        raise ValueError(f"exploit={o.exploit!r}: must be one of {EXPLOITS}")
    if o.explore not in EXPLORES:
        raise ValueError(f"explore={o.explore!r}: must be one of {EXPLORES}")
    if not 0 < o.truncation_fraction <= 0.5:
        raise ValueError(f"truncation_fraction={o.truncation_fraction}: must be in (0, 0.5]")
    if o.tournament_size < 1:
        raise ValueError(f"tournament_size={o.tournament_size}: must be >= 1")
    if len(o.perturb_factors) != 2 or not all(f > 0 for f in o.perturb_factors):
        raise ValueError(f"perturb_factors={o.perturb_factors}: must be two positive factors")
    if not 0 <= o.resample_probability <= 1:
        raise ValueError(f"resample_probability={o.resample_probability}: must be in [0, 1]")
    if o.fitness_window is not None and not 1 <= o.fitness_window <= o.ready_every:
        raise ValueError(
            f"fitness_window={o.fitness_window}: must be in [1, ready_every={o.ready_every}]"
        )


def member_keys(seed: int, population: int) -> jax.Array:
    """Typed keys `[P]` of the members: `jax.random.split(jax.random.split(
    jax.random.key(seed))[0], P)`; the second half of the first split drives selection,
    mutation and evaluation."""
    return jax.random.split(jax.random.split(jax.random.key(seed))[0], population)


def population_key(seed: int) -> jax.Array:
    """Typed key of the population step (selection, mutation, evaluation)."""
    return jax.random.split(jax.random.key(seed))[1]


def initial_hparams(
    config: PPOConfig, space: SearchSpace, population: int, seed: int
) -> Hyperparams:
    """`[P]` Hyperparams: the config's values, searched fields drawn (numpy, seeded with
    `seed`) by `sweeps.sample_random` from `search`'s distributions."""
    base = Hyperparams.from_config(config)
    draws = sample_random(space.spec, population, seed) if space.names else [{}] * population
    members = [
        base.replace(**{k: jnp.asarray(v, jnp.float32) for k, v in draw.items()}) for draw in draws
    ]
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *members)


# ----------------------------------------------------------------------- the program
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

    `init(key_data [P, 2]) -> RunnerState [P]` (jitted, split over the mesh).
    `run_generations(state, first_generation, num_generations, length, last_generation)`
    (jitted; `num_generations`, `length` static) runs `num_generations` generations of
    `length` updates each in one `lax.scan` and returns `(state, records, metrics)`:
    records of every generation (`[G, P]` arrays: fitness, episode_return, diverged,
    parents, replaced, update_step, and `values` `[G, P, F]`, the searched values used
    during the generation) and metrics `{name: [G, P, length]}`. After each generation
    but the run's last (index `last_generation`) the population is exploited and
    explored.
    """
    fns = make_train_fns(config, env, env_params)
    members = NamedSharding(mesh, P(parallel.RUNS_AXIS))
    low = jnp.asarray(space.lows, jnp.float32)
    high = jnp.asarray(space.highs, jnp.float32)
    evaluator = None
    if config.eval_freq:
        from purejaxppo.runner import make_evaluators

        evaluator = next(iter(make_evaluators(config).values()))

    def init_members(key_data: jax.Array) -> RunnerState:
        # lax.map, not vmap: see `parallel.batch_runs` (batched QR deadlock on CPU).
        return jax.lax.map(lambda kd: fns.init(jax.random.wrap_key_data(kd)), key_data)

    init = parallel.make_runs_program(init_members, mesh)
    train_programs: dict[int, Callable] = {}

    def train_members(length: int) -> Callable:
        if length in train_programs:
            return train_programs[length]
        if options.population == mesh.devices.size:
            # One member per device: no vmap, so that the member's numbers are those of
            # the plain run bit for bit (a vmapped batch may change XLA's last bits).
            def batched(runner, hp):
                first = jax.tree.map(lambda x: x[0], (runner, hp))
                out = fns.run(*first, length)
                return jax.tree.map(lambda x: x[None], out)
        else:
            batched = jax.vmap(lambda runner, hp: fns.run(runner, hp, length))
        train_programs[length] = parallel.make_runs_program(batched, mesh)
        return train_programs[length]

    def constrain(tree):
        return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, members), tree)

    def select(fitness, key):
        if options.exploit == "truncation":
            return truncation_parents(fitness, key, options.truncation_fraction)
        return tournament_parents(fitness, key, options.tournament_size, options.elitism)

    def explore(values, key):
        if options.explore == "perturb":
            return perturb(values, key, low, high, options.perturb_factors)
        return resample(values, key, space, options.resample_probability)

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
        diverged = ~(all_finite(runner.train_state) & finite_losses)
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


# ----------------------------------------------------------------------- results
@dataclasses.dataclass(frozen=True)
class PBTResult:
    """What `pbt` returns.

    Attributes:
      lineage: one row per (generation, member): `generation`, `member` (slot), `parent`
        (the slot whose state and hyperparameters it copied at the start of the
        generation; itself if it kept its own), `replaced` (it was exploited and explored
        at the start of the generation), `update` and `env_steps` at the generation's end,
        the searched values used during the generation (columns named by field),
        `fitness` (-inf when diverged), `episode_return` (mean over the fitness window)
        and `diverged`.
      summary: one row per member of the final population, best first: `member`,
        `fitness`, `final_return` (mean episode return of its last 10 updates),
        `diverged`, `times_replaced`, `root` (the generation-0 member its state descends
        from) and its final searched values.
      curves: per member and update: `member`, `update`, `env_steps`, `episode_return`.
      best_member: slot of the best final member (highest final fitness).
      best_lineage: the best member's ancestry, one row per generation: `generation`,
        `member` (the slot its ancestor trained in), the searched values, `fitness`.
      best_hparams: the best member's final hyperparameters (field -> float).
      best_runner_state: the best member's final `RunnerState` (host arrays).
      best_metrics: per-update metrics along the best member's ancestry (`[U]` each).
      config: the base config; search: the searched fields' specs.
      num_compiles: compiled training programs; num_devices: devices used.
    """

    lineage: pd.DataFrame
    summary: pd.DataFrame
    curves: pd.DataFrame
    best_member: int
    best_lineage: pd.DataFrame
    best_hparams: dict[str, float]
    best_runner_state: RunnerState
    best_metrics: dict[str, np.ndarray]
    config: PPOConfig
    search: dict[str, tuple]
    options: PBTOptions
    num_compiles: int
    num_devices: int

    def best_hparams_text(self) -> str:
        """'learning_rate=0.00123 ent_coef=0.004' for the searched fields."""
        return " ".join(f"{k}={self.best_hparams[k]:.4g}" for k in self.search) or "(none)"

    @property
    def best_config(self) -> PPOConfig:
        """The base config with the best member's final searched values."""
        return self.config.replace(**{k: self.best_hparams[k] for k in self.search})


def _build_result(config, space, options, records, metrics, final_state, num_compiles, devices):
    num_gens, population = records["fitness"].shape
    lineage_rows = []
    prev_parents = np.arange(population)
    prev_replaced = np.zeros(population, bool)
    for g in range(num_gens):
        for m in range(population):
            row = {
                "generation": g,
                "member": m,
                "parent": int(prev_parents[m]),
                "replaced": bool(prev_replaced[m]),
                "update": int(records["update_step"][g, m]),
                "env_steps": int(records["update_step"][g, m]) * config.batch_size,
            }
            row.update({n: float(records["values"][g, m, i]) for i, n in enumerate(space.names)})
            row.update(
                fitness=float(records["fitness"][g, m]),
                episode_return=float(records["episode_return"][g, m]),
                diverged=bool(records["diverged"][g, m]),
            )
            lineage_rows.append(row)
        prev_parents, prev_replaced = records["parents"][g], records["replaced"][g]
    lineage = pd.DataFrame(lineage_rows)

    returns = metrics["episode_return"]  # [P, U]
    num_updates = returns.shape[1]
    updates = np.arange(1, num_updates + 1)
    curves = pd.DataFrame(
        {
            "member": np.repeat(np.arange(population), num_updates),
            "update": np.tile(updates, population),
            "env_steps": np.tile(updates * config.batch_size, population),
            "episode_return": returns.reshape(-1),
        }
    )

    # Ancestry: slot of each member's ancestor in every generation, and its root.
    ancestors = np.zeros((num_gens, population), int)
    ancestors[-1] = np.arange(population)
    for g in range(num_gens - 1, 0, -1):
        ancestors[g - 1] = records["parents"][g - 1][ancestors[g]]
    final_fitness = records["fitness"][-1]
    best = int(np.argmax(np.where(np.isfinite(final_fitness), final_fitness, -np.inf)))
    final_values = np.asarray(get_values(final_state.hparams, space))
    times_replaced = records["replaced"][:-1].sum(axis=0) if num_gens > 1 else np.zeros(population)
    # times a member's *slot* was replaced (the final population's per-slot count).
    summary_rows = []
    for m in range(population):
        row = {
            "member": m,
            "fitness": float(final_fitness[m]),
            "final_return": final_return(returns[m]),
            "diverged": bool(records["diverged"][-1, m]),
            "times_replaced": int(times_replaced[m]),
            "root": int(ancestors[0, m]),
        }
        row.update({n: float(final_values[m, i]) for i, n in enumerate(space.names)})
        summary_rows.append(row)
    summary = pd.DataFrame(summary_rows).sort_values(
        ["fitness", "member"], ascending=[False, True], kind="stable"
    )

    chain = ancestors[:, best]
    best_lineage = pd.DataFrame(
        {
            "generation": np.arange(num_gens),
            "member": chain,
            "update": records["update_step"][np.arange(num_gens), chain],
            **{
                n: records["values"][np.arange(num_gens), chain, i]
                for i, n in enumerate(space.names)
            },
            "fitness": records["fitness"][np.arange(num_gens), chain],
        }
    )
    # Per-update metrics along the best member's ancestry.
    ends = records["update_step"][:, 0]
    starts = np.concatenate([[0], ends[:-1]])
    best_metrics = {
        name: np.concatenate(
            [metrics[name][chain[g], starts[g] : ends[g]] for g in range(num_gens)]
        )
        for name in METRICS
    }
    hparams = jax.tree.map(lambda x: np.asarray(x)[best], final_state.hparams)
    best_hparams = {name: float(getattr(hparams, name)) for name in TRACED_FIELDS}
    best_runner = jax.tree.map(lambda x: x[best], final_state.runner)
    return PBTResult(
        lineage=lineage,
        summary=summary.reset_index(drop=True),
        curves=curves,
        best_member=best,
        best_lineage=best_lineage,
        best_hparams=best_hparams,
        best_runner_state=best_runner,
        best_metrics=best_metrics,
        config=config,
        search=space.spec,
        options=options,
        num_compiles=num_compiles,
        num_devices=devices,
    )


# ----------------------------------------------------------------------- checkpoints
def _manager(directory: Path):
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(
        max_to_keep=1, enable_async_checkpointing=False, cleanup_tmp_directories=True
    )
    return ocp.CheckpointManager(directory.resolve(), options=options)


def _saveable(state: PopulationState) -> dict[str, Any]:
    host = parallel.to_host(
        (state.runner.replace(key=jax.random.key_data(state.runner.key)), state.hparams)
    )
    return {
        "runner": host[0],
        "hparams": host[1],
        "key": np.asarray(jax.random.key_data(state.key)),
    }


def save_population(
    directory: str | Path,
    state: PopulationState,
    generation: int,
    history: dict[str, np.ndarray],
    meta: dict[str, Any],
) -> None:
    """Saves the whole population after `generation` generations (orbax, atomic: a crash
    during the write leaves the previous checkpoint the newest complete one)."""
    import orbax.checkpoint as ocp

    saveable = _saveable(state)
    if jax.process_index() != 0:
        return
    with _manager(Path(directory)) as manager:
        manager.save(
            generation,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(saveable),
                history=ocp.args.StandardSave(history),
                meta=ocp.args.JsonSave({**meta, "generation": generation}),
            ),
            force=True,
        )
        manager.wait_until_finished()


def load_population(directory: str | Path, abstract: dict[str, Any]) -> tuple:
    """(generation, state dict of host arrays, history, meta) of the newest checkpoint.

    Raises:
      ValueError: no complete checkpoint under `directory`.
    """
    import orbax.checkpoint as ocp

    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"resume: no population checkpoint under {directory}")
    with _manager(directory) as manager:
        step = manager.latest_step()
        if step is None:
            raise ValueError(f"resume: no complete population checkpoint under {directory}")
        restored = manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract),
                history=ocp.args.StandardRestore(),
                meta=ocp.args.JsonRestore(),
            ),
        )
    return step, restored["state"], restored["history"], restored["meta"]


# ----------------------------------------------------------------------- the driver
def pbt(
    config: PPOConfig,
    population: int = 8,
    ready_every: int = 10,
    search: Mapping[str, Sequence[Any]] | None = None,
    exploit: str = "truncation",
    explore: str = "perturb",
    seed: int = 0,
    devices: Sequence[jax.Device] | int | None = None,
    *,
    truncation_fraction: float = 0.25,
    tournament_size: int = 3,
    elitism: bool = True,
    perturb_factors: tuple[float, float] = (0.8, 1.2),
    resample_probability: float = 0.25,
    fitness_window: int | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 1,
    resume: bool = False,
    progress: bool = False,
    verbose: bool = True,
    env: Any = None,
    env_params: Any = None,
) -> PBTResult:
    """Population-based training of `population` members in one compiled program.

    Args:
      config: the members' configuration; searched fields start from `search`, the other
        traced fields keep the config's values.
      population: P, members (a multiple of the device count).
      ready_every: K, updates per generation; after every generation but the last the
        population is exploited and explored. If K does not divide `num_updates`, the
        last generation is shorter (one more compiled program).
      search: traced field -> `("uniform" | "log_uniform", low, high)`: initial
        distribution (numpy draws seeded with `seed`, `sweeps.sample_random`) and range.
      exploit: "truncation" or "tournament" (see the module docstring).
      explore: "perturb" or "resample".
      seed: member m starts from `member_keys(seed, P)[m]`; selection and mutation use
        `population_key(seed)`.
      devices: None (all devices), an int (first n local devices) or a device list; the
        members are split over them (`parallel.RUNS_AXIS`).
      truncation_fraction: top / bottom fraction of truncation selection (0, 0.5].
      tournament_size: k of tournament selection; elitism: keep the best member there.
      perturb_factors: the factors of "perturb".
      resample_probability: per-value redraw probability of "resample".
      fitness_window: updates at the end of a generation whose mean episode return is the
        fitness (default: the whole generation). Ignored when `config.eval_freq` > 0:
        then the fitness is the mean return of `config.eval_episodes` evaluation episodes
        (sampled actions) of the first eval split, run at every generation's end.
      checkpoint_dir: where to save the whole population every `checkpoint_every`
        generations and at the end (orbax, atomic).
      resume: continue from the newest checkpoint in `checkpoint_dir` (same arguments);
        the result is bitwise the uninterrupted run's on CPU.
      progress: tqdm bar over generations. verbose: print the plan and compile count.
      env, env_params: optional gymnax-API environment, as for `make_train`.

    Returns:
      `PBTResult`.

    Raises:
      ValueError: before compiling, for a host env ("gymnasium:<id>", which cannot run
        under vmap), a static / unknown searched field, a bad range
        (low >= high), a population not divisible by the device count, `ready_every`
        larger than the run, an unknown exploit / explore name or another bad option,
        naming the field and value; on resume, for a missing checkpoint or one written
        with other arguments.
    """
    from purejaxppo.envs.host import check_jittable_env

    check_jittable_env(config.env_name, "pbt (a vmapped population)", env)
    options = PBTOptions(
        population=population,
        ready_every=ready_every,
        exploit=exploit,
        explore=explore,
        truncation_fraction=truncation_fraction,
        tournament_size=tournament_size,
        elitism=elitism,
        perturb_factors=tuple(perturb_factors),
        resample_probability=resample_probability,
        fitness_window=fitness_window,
        seed=seed,
    )
    space = parse_search(search, config)
    mesh = parallel.make_mesh(devices, parallel.RUNS_AXIS)
    num_devices = mesh.devices.size
    _check_options(options, config, num_devices)
    if resume and checkpoint_dir is None:
        raise ValueError("resume=True needs checkpoint_dir")
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every={checkpoint_every}: must be >= 1")

    num_updates = config.num_updates
    full, tail = divmod(num_updates, ready_every)
    num_gens = full + (tail > 0)
    last = num_gens - 1
    segment = full
    if checkpoint_dir is not None:
        segment = math.gcd(segment, checkpoint_every)
    if progress:  # about 20 steps of the bar; segments divide the full generations
        target = max(1, math.ceil(full / 20))
        segment = max(d for d in range(1, min(segment, target) + 1) if segment % d == 0)
    init, run_generations = _programs(config, space, options, mesh, env, env_params)
    needed = {(segment, ready_every)} | ({(1, tail)} if tail else set())
    num_compiles = len(needed - set(run_generations.programs))
    if verbose and jax.process_index() == 0:
        shorter = f" (the last of {tail})" if tail else ""
        print(
            f"pbt: {population} members x {num_gens} generations of {ready_every} updates"
            f"{shorter}, exploit={exploit}, explore={explore}, searching "
            f"{list(space.names) or 'nothing'}, on {num_devices} device(s) -> "
            f"{num_compiles} compile(s) of the training program",
            file=sys.stderr,
        )
    compiled_before = _COMPILES.count
    members = P(parallel.RUNS_AXIS)
    key_data = np.asarray(jax.random.key_data(member_keys(seed, population)))
    meta = {"config": config.to_dict(), "options": options.to_dict(), "search": space.spec}
    meta = _json_ready(meta)
    history: dict[str, list[np.ndarray]] = {}
    done = 0
    if resume and (Path(checkpoint_dir) / "population").is_dir():
        abstract = jax.eval_shape(init, key_data)
        abstract_runner = abstract.replace(key=jax.eval_shape(jax.random.key_data, abstract.key))
        hp0 = initial_hparams(config, space, population, seed)
        abstract_state = {
            "runner": jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), abstract_runner),
            "hparams": hp0,
            "key": np.asarray(jax.random.key_data(population_key(seed))),
        }
        done, saved, saved_history, saved_meta = load_population(
            Path(checkpoint_dir) / "population", abstract_state
        )
        saved_meta.pop("generation", None)
        if saved_meta != meta:
            diff = [
                f"{group}.{name}: saved {saved_meta.get(group, {}).get(name)!r} vs given {value!r}"
                for group in meta
                for name, value in meta[group].items()
                if saved_meta.get(group, {}).get(name) != value
            ]
            raise ValueError(
                f"resume: the checkpoint in {checkpoint_dir} was written with other "
                f"arguments ({'; '.join(diff) or 'search fields differ'})"
            )
        runner = parallel.to_global(saved["runner"], mesh, members)
        state = PopulationState(
            runner=runner.replace(key=jax.random.wrap_key_data(runner.key)),
            hparams=parallel.to_global(saved["hparams"], mesh, members),
            key=_replicated_key(np.asarray(saved["key"]), mesh),
        )
        history = {k: [np.asarray(v)] for k, v in saved_history.items()}
    elif resume:
        raise ValueError(f"resume: no population checkpoint under {checkpoint_dir}")
    else:
        state = initial_state(init, config, space, options, mesh)

    from tqdm.auto import tqdm

    bar = tqdm(
        total=num_gens,
        initial=done,
        unit="generation",
        desc="pbt",
        disable=not progress or jax.process_index() != 0,
        dynamic_ncols=True,
    )
    start = time.perf_counter()
    with bar:
        while done < num_gens:
            if done < full:
                count, length = min(segment, full - done), ready_every
            else:
                count, length = 1, tail
            state = place_state(state, mesh)  # the same input layout every call: one compile
            _COMPILES.active = True
            try:
                state, (records, metrics) = run_generations(state, done, count, length, last)
            finally:
                _COMPILES.active = False
            records, metrics = parallel.to_host((records, metrics))
            chunk = {f"record/{k}": np.asarray(v) for k, v in records.items()}
            # metrics [G, P, K] -> [P, G*K]
            for name in METRICS:
                m = np.asarray(metrics[name])
                chunk[f"metric/{name}"] = np.transpose(m, (1, 0, 2)).reshape(m.shape[1], -1)
            for k, v in chunk.items():
                history.setdefault(k, []).append(v)
            done += count
            if checkpoint_dir is not None and (done % checkpoint_every == 0 or done == num_gens):
                save_population(
                    Path(checkpoint_dir) / "population",
                    state,
                    done,
                    _joined(history),
                    meta,
                )
            steps = int(np.max(records["update_step"][-1])) * config.batch_size * population
            bar.set_postfix(
                best=f"{np.max(records['fitness'][-1]):.1f}",
                sps=f"{steps / (time.perf_counter() - start):,.0f}",
                refresh=False,
            )
            bar.update(count)
    joined = _joined(history)
    records = {k.split("/", 1)[1]: v for k, v in joined.items() if k.startswith("record/")}
    metrics = {k.split("/", 1)[1]: v for k, v in joined.items() if k.startswith("metric/")}
    final_state = PopulationState(
        runner=parallel.to_host(state.runner.replace(key=jax.random.key_data(state.runner.key))),
        hparams=parallel.to_host(state.hparams),
        key=np.asarray(jax.random.key_data(state.key)),
    )
    final_state = final_state._replace(
        runner=final_state.runner.replace(
            key=jax.random.wrap_key_data(np.asarray(final_state.runner.key))
        )
    )
    compiled = _COMPILES.count - compiled_before
    return _build_result(
        config, space, options, records, metrics, final_state, compiled, num_devices
    )


#: Recently built programs, so that repeated `pbt` calls with the same static settings
#: (another seed or search range, a resume) reuse the compiled program.
_PROGRAM_CACHE: dict[tuple, tuple[Callable, Callable]] = {}


def _programs(config, space, options, mesh, env, env_params):
    if env is not None:  # an arbitrary env object: no cache
        return make_generation_program(config, space, options, mesh, env, env_params)
    static = dataclasses.replace(options, seed=0)
    # The search ranges are traced into the program (perturb clips, resample draws).
    # config.seed is the CLI's seed: the program does not depend on it.
    key = (repr(config.replace(seed=0)), space, static, tuple(d.id for d in mesh.devices.flat))
    if key not in _PROGRAM_CACHE:
        if len(_PROGRAM_CACHE) >= 4:
            _PROGRAM_CACHE.pop(next(iter(_PROGRAM_CACHE)))
        _PROGRAM_CACHE[key] = make_generation_program(config, space, options, mesh)
    return _PROGRAM_CACHE[key]


class _CompileCounter:
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


_COMPILES = _CompileCounter()


def initial_state(
    init: Callable, config: PPOConfig, space: SearchSpace, options: PBTOptions, mesh: Any
) -> PopulationState:
    """The population before its first update: members initialised from `member_keys`,
    hyperparameters from `initial_hparams`, split over `mesh` (init from
    `make_generation_program`)."""
    members = P(parallel.RUNS_AXIS)
    key_data = np.asarray(jax.random.key_data(member_keys(options.seed, options.population)))
    hparams = initial_hparams(config, space, options.population, options.seed)
    return PopulationState(
        runner=init(parallel.to_global(key_data, mesh, members)),
        hparams=parallel.to_global(hparams, mesh, members),
        key=_replicated_key(np.asarray(jax.random.key_data(population_key(options.seed))), mesh),
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


def _replicated_key(key_data: np.ndarray, mesh: Any) -> jax.Array:
    """The population key, replicated on every device of the mesh (typed)."""
    return jax.random.wrap_key_data(parallel.to_global(key_data, mesh, P()))


def _joined(history: dict[str, list[np.ndarray]]) -> dict[str, np.ndarray]:
    """Concatenates the per-segment pieces: records along generations, metrics along
    updates."""
    out = {}
    for key, pieces in history.items():
        axis = 0 if key.startswith("record/") else 1
        out[key] = np.concatenate(pieces, axis=axis)
    return out


def _json_ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, float) and math.isinf(value):
        return str(value)
    return value


# ----------------------------------------------------------------------- outputs
def plot_pbt(result: PBTResult, path: str | Path, title: str = "") -> None:
    """Writes a PNG: fitness over env steps per member (the final best member's ancestry
    drawn thick, diverged generations as crosses), and one panel per searched field with
    its schedule along the best member's ancestry."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result.search)
    fig, axes = plt.subplots(1, 1 + len(names), figsize=(6 + 4 * len(names), 4.5), squeeze=False)
    ax = axes[0, 0]
    lineage = result.lineage
    for _, frame in lineage.groupby("member"):
        fitness = frame["fitness"].to_numpy(float)
        ok = np.isfinite(fitness)
        ax.plot(frame["env_steps"][ok], fitness[ok], lw=0.8, alpha=0.6)
        if (~ok).any():
            ax.plot(frame["env_steps"][~ok], np.zeros((~ok).sum()), "x", color="red")
    best = result.best_lineage
    steps = best["update"].to_numpy() * result.config.batch_size
    ax.plot(steps, best["fitness"], color="black", lw=2.2, label="best member's ancestry")
    ax.set_xlabel("env steps (per member)")
    ax.set_ylabel("fitness")
    ax.set_title(title or f"PBT, {len(lineage['member'].unique())} members")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    for ax, name in zip(axes[0, 1:], names, strict=True):
        values = best[name].to_numpy(float)
        starts = np.concatenate([[0], steps[:-1]])
        ax.step(starts, values, where="post", color="black", lw=1.8)
        ax.plot([starts[-1], steps[-1]], [values[-1], values[-1]], color="black", lw=1.8)
        kind, low, high = result.search[name]
        if kind == "log_uniform":
            ax.set_yscale("log")
        if kind == "log_uniform":
            ax.set_ylim(low / 1.1, high * 1.1)
        else:
            ax.set_ylim(low - 0.02 * (high - low), high + 0.02 * (high - low))
        ax.set_xlabel("env steps")
        ax.set_ylabel(name)
        ax.set_title(f"{name} of the best member's ancestry")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_best_run(result: PBTResult, run_dir: str | Path) -> Path:
    """Writes the best member as a run directory (`config.yaml` with its final searched
    values, `metrics.csv` along its ancestry, `learning_curve.png`, and an orbax checkpoint
    under `checkpoints/last`) that `Policy.load`, `evaluate`, `purejaxppo eval` and
    `purejaxppo export` accept."""
    import yaml

    from purejaxppo.checkpoint import save_checkpoint
    from purejaxppo.runner import plot_learning_curve

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config = result.best_config
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    frame = pd.DataFrame(result.best_metrics)[list(METRICS)]
    frame.insert(0, "update", np.arange(1, len(frame) + 1))
    frame.to_csv(run_dir / "metrics.csv", index=False)
    save_checkpoint(run_dir, result.best_runner_state, result.best_metrics, config)
    plot_learning_curve(frame, run_dir / "learning_curve.png", title=config.env_name)
    return run_dir


def write_pbt(result: PBTResult, out: str | Path) -> list[Path]:
    """Writes `lineage.csv`, `summary.csv`, `pbt.png` (`plot_pbt`), `pbt.yaml` (config,
    options, search, best member and its hyperparameters, compiles, devices) and the best
    member's run directory `best/` (`write_best_run`) into `out`; returns the paths."""
    import yaml

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if jax.process_index() != 0:
        return []
    result.lineage.to_csv(out / "lineage.csv", index=False)
    result.summary.to_csv(out / "summary.csv", index=False)
    plot_pbt(result, out / "pbt.png", title=f"PBT on {result.config.env_name}")
    best = result.summary.iloc[0]
    spec = _json_ready(
        {
            "config": result.config.to_dict(),
            "options": result.options.to_dict(),
            "search": result.search,
            "best_member": result.best_member,
            "best_fitness": float(best["fitness"]),
            "best_final_return": float(best["final_return"]),
            "best_hparams": result.best_hparams,
            "num_compiles": result.num_compiles,
            "num_devices": result.num_devices,
        }
    )
    (out / "pbt.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    best_dir = write_best_run(result, out / "best")
    return [out / n for n in ("lineage.csv", "summary.csv", "pbt.png", "pbt.yaml")] + [best_dir]
