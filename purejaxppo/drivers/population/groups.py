"""PBT over static fields (AgileRL-style evolutionary HPO): one compiled program per
group of members that share their static values, generations run on the host.

Member m starts with the static combination `combos[m % C]` (the C combinations of the
choices in row-major order, so every combination trains when P >= C) and traced values
drawn as in `pbt`. Every generation each group trains its members K updates (`vmap` over
the group, padded to the next power of two (at most P) by repeating its first member, so
a group compiles at most once per padded size: 1, 2, 4, ..., P; the padded copies'
results are dropped). Then fitness is gathered and selection spans all members (the
strategies of `pbt`); a member that copies a winner adopts its static values, its
parameters and its optimizer state (keeping its own env, key and update step), and, when
explored, each static value is redrawn uniformly from its choices with probability
`resample_probability`. A member whose `hidden_sizes` change gets the weights of the
old architecture transferred into a fresh initialisation of the new one
(`networks.evolve.transfer_train_state`).
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.config import PPOConfig
from purejaxppo.drivers.population.options import (
    PBTOptions,
    initial_hparams,
    member_keys,
    population_key,
)
from purejaxppo.drivers.population.program import COMPILES, make_operators
from purejaxppo.drivers.population.results import PBTResult, build_result
from purejaxppo.drivers.population.search import NOT_COPIED, SearchSpace, get_values, set_values
from purejaxppo.drivers.population.static import StaticSpace, group_config
from purejaxppo.guards import all_finite
from purejaxppo.networks.evolve import transfer_train_state
from purejaxppo.train import METRICS, make_train_fns


class _Group:
    """The programs of one static combination: `init(key)` and `run(runner [B], hparams
    [B], length)` (B a padded group size; one compile per (B, length))."""

    def __init__(self, config: PPOConfig, env: Any, env_params: Any) -> None:
        self.config = config
        self.fns = make_train_fns(config, env, env_params)
        self.init = jax.jit(self.fns.init)
        self.programs: dict[tuple[int, int], Any] = {}

    def run(self, runner: Any, hparams: Any, length: int) -> tuple[Any, Any]:
        size = jax.tree.leaves(hparams)[0].shape[0]
        if (size, length) not in self.programs:
            run = self.fns.run

            def pbt_generations_group(runner, hparams):
                return jax.vmap(lambda r, h: run(r, h, length))(runner, hparams)

            self.programs[size, length] = jax.jit(pbt_generations_group)
        return self.programs[size, length](runner, hparams)


def _padded(count: int, population: int) -> int:
    return min(1 << (count - 1).bit_length(), population)


def _stack(trees: list[Any]) -> Any:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


class StaticPBT:
    """One `pbt` call with static searched fields (see the module docstring)."""

    def __init__(self, config, space: SearchSpace, static: StaticSpace, options: PBTOptions):
        self.config, self.space, self.static, self.options = config, space, static, options
        self.combos = list(itertools.product(*(range(len(c)) for c in static.choices)))
        self.groups: dict[tuple[int, ...], _Group] = {}
        self.full, self.tail = divmod(config.num_updates, options.ready_every)
        self.num_gens = self.full + (self.tail > 0)
        self.env: Any = None
        self.env_params: Any = None

    def group(self, combo: tuple[int, ...]) -> _Group:
        if combo not in self.groups:
            values = [c[i] for c, i in zip(self.static.choices, combo, strict=True)]
            config = group_config(self.config, self.static, values)
            self.groups[combo] = _Group(config, self.env, self.env_params)
        return self.groups[combo]

    def train(self, env: Any = None, env_params: Any = None, verbose: bool = True) -> PBTResult:
        """Trains the population; returns the `PBTResult` (with `static` columns)."""
        self.env, self.env_params = env, env_params
        options, population = self.options, self.options.population
        if verbose and jax.process_index() == 0:
            print(
                f"pbt: {population} members x {self.num_gens} generations of "
                f"{options.ready_every} updates, exploit={options.exploit}, "
                f"explore={options.explore}, searching {list(self.space.names)} (traced) and "
                f"{list(self.static.names)} (static: {len(self.combos)} combinations, one "
                "program per group of members)",
                file=sys.stderr,
            )
        compiled_before = COMPILES.count
        self.keys = member_keys(options.seed, population)
        index = np.asarray([self.combos[m % len(self.combos)] for m in range(population)])
        index = index.reshape(population, len(self.static.names))
        runners = [self.group(tuple(index[m])).init(self.keys[m]) for m in range(population)]
        hparams = initial_hparams(self.config, self.space, population, options.seed)
        key = population_key(options.seed)
        records: dict[str, list] = {}
        metrics: dict[str, list] = {}
        for generation in range(self.num_gens):
            length = options.ready_every if generation < self.full else self.tail
            COMPILES.active = True
            try:
                runners, trained = self._train_generation(runners, hparams, index, length)
            finally:
                COMPILES.active = False
            key, step_key = jax.random.split(key)
            last = generation == self.num_gens - 1
            runners, hparams, new_index, record = self._population_step(
                runners, hparams, index, trained, step_key, last, generation
            )
            record["static"] = index
            record["batch_size"] = np.asarray(
                [self.group(tuple(i)).config.batch_size for i in index]
            )
            for name, value in record.items():
                records.setdefault(name, []).append(np.asarray(value))
            for name, value in trained.items():
                metrics.setdefault(name, []).append(value)
            index = new_index
        stacked = {k: np.stack(v) for k, v in records.items()}
        joined = {k: np.concatenate(v, axis=1) for k, v in metrics.items()}
        return self._result(stacked, joined, runners, hparams, COMPILES.count - compiled_before)

    def _train_generation(self, runners, hparams, index, length):
        """Trains every group `length` updates; per-member runners and `[P, length]`
        metrics (and `diverged`, `[P]` bool)."""
        population = self.options.population
        members_of: dict[tuple[int, ...], list[int]] = {}
        for m in range(population):
            members_of.setdefault(tuple(index[m]), []).append(m)
        out = list(runners)
        trained = {name: np.zeros((population, length), np.float32) for name in METRICS}
        trained["diverged"] = np.zeros(population, bool)
        for combo, members in members_of.items():
            padded = members + [members[0]] * (_padded(len(members), population) - len(members))
            batch = _stack([runners[m] for m in padded])
            rows = np.asarray(padded)
            hp = jax.tree.map(lambda x, rows=rows: jnp.asarray(np.asarray(x)[rows]), hparams)
            new, group_metrics = self.group(combo).run(batch, hp, length)
            finite = np.asarray(all_finite(new.train_state, batched=True))
            for j, m in enumerate(members):
                out[m] = jax.tree.map(lambda x, j=j: x[j], new)
                for name in METRICS:
                    trained[name][m] = np.asarray(group_metrics[name][j])
                losses = [trained[n][m] for n in ("pg_loss", "v_loss", "entropy")]
                trained["diverged"][m] = not (finite[j] and np.all(np.isfinite(losses)))
        return out, trained

    def _population_step(self, runners, hparams, index, trained, key, last, generation):
        """Fitness, selection over all members, copies, explore (static values and
        traced values) and weight transfer; returns the next generation's members."""
        options, population = self.options, self.options.population
        window = trained["episode_return"].shape[1]
        window = window if options.fitness_window is None else options.fitness_window
        with warnings.catch_warnings():  # no finished episode in the window: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            mean_return = np.nanmean(trained["episode_return"][:, -window:], axis=1)
        diverged = trained.pop("diverged")
        fitness = np.where(diverged | np.isnan(mean_return), -np.inf, mean_return)
        select, explore = make_operators(self.space, options)
        select_key, explore_key, static_key = jax.random.split(key, 3)
        parents, replaced = (np.asarray(x) for x in select(jnp.asarray(fitness), select_key))
        if last:
            parents, replaced = np.arange(population), np.zeros(population, bool)
        values = np.asarray(get_values(hparams, self.space))
        record = {
            "fitness": fitness.astype(np.float32),
            "episode_return": mean_return.astype(np.float32),
            "diverged": diverged,
            "parents": parents.astype(np.int32),
            "replaced": replaced,
            "update_step": np.asarray([int(r.update_step) for r in runners]),
            "values": values,
        }
        if last:
            return runners, hparams, index, record
        new_values = values[parents]
        explored = np.asarray(explore(jnp.asarray(new_values), explore_key))
        new_values = np.where(replaced[:, None], explored, new_values)
        new_hparams = jax.tree.map(lambda x: np.asarray(x)[parents], hparams)
        new_hparams = jax.tree.map(np.asarray, set_values(new_hparams, new_values, self.space))
        new_index = self._explore_static(index[parents], replaced, static_key)
        new_runners = []
        for m in range(population):
            runner = runners[m]
            if replaced[m]:
                copied = {
                    f.name: getattr(runners[parents[m]], f.name)
                    for f in dataclasses.fields(runner)
                    if f.name not in NOT_COPIED
                }
                runner = runner.replace(**copied)
                runner = self._adapt(runner, index[parents[m]], new_index[m], m, generation)
            new_runners.append(runner)
        return new_runners, new_hparams, new_index, record

    def _explore_static(self, index: np.ndarray, replaced: np.ndarray, key: jax.Array):
        """Each static value of a replaced member redrawn uniformly from its choices with
        probability `resample_probability` (`jax.random.uniform(mask_key, [P, S])`,
        `jax.random.randint(draw_key, [P, S], 0, C_s)`)."""
        if not self.static.names:
            return index
        mask_key, draw_key = jax.random.split(key)
        shape = index.shape
        redraw = np.asarray(jax.random.uniform(mask_key, shape)) < self.options.resample_probability
        sizes = jnp.asarray([len(c) for c in self.static.choices])
        draws = np.asarray(jax.random.randint(draw_key, shape, 0, sizes))
        return np.where(redraw & replaced[:, None], draws, index)

    def _adapt(self, runner, old_combo, new_combo, member, generation):
        """`runner` (its train state from a member of `old_combo`) for the group of
        `new_combo`: its weights transferred when the architecture differs."""
        old_sizes = self.group(tuple(old_combo)).config.hidden_sizes
        new_group = self.group(tuple(new_combo))
        if tuple(old_sizes) == tuple(new_group.config.hidden_sizes):
            return runner
        key = jax.random.fold_in(self.keys[member], generation + 1)
        fresh = jax.device_get(new_group.init(key).train_state)
        moved = transfer_train_state(jax.device_get(runner.train_state), fresh)
        return runner.replace(train_state=jax.tree.map(jnp.asarray, moved))

    def _result(self, records, metrics, runners, hparams, num_compiles):
        final_state = dataclasses.make_dataclass("FinalState", ["runner", "hparams"])(
            runner=[jax.device_get(r) for r in runners], hparams=hparams
        )
        return build_result(
            self.config,
            self.space,
            self.options,
            records=records,
            metrics=metrics,
            final_state=final_state,
            num_compiles=num_compiles,
            num_devices=1,
            static=self.static,
        )
