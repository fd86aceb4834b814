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

The generations run as the segments of `drivers.segments.run_segments` (one generation
each): a progress bar with the best fitness so far, checkpoints of the whole population
every `checkpoint_every` generations (`storage.save_arrays`: every member's runner by
slot, hyperparameters, static choices, the selection key and the records so far), and
the stop protocol of `purejaxppo.signals` (a first SIGINT / SIGTERM finishes and saves the
running generation, then `TrainingInterrupted`; a second stops at once). A resumed
population continues bitwise (JAX envs, on CPU).

Envs whose state lives on the host (gymnasium's vector env, EnvPool's pool: kinds with
`episodes_restart_on_resume`) keep one vector env per group and batch size, whose rows
are the group's padded members in order. Whenever those rows change (a member joins or
leaves the group, another group stepped the same vector env, a resume), the group's
members start fresh episodes there (a vmapped init: one reset of the vector env, keys
`fold_in(fold_in(member key, RESUME_KEY_STREAM), generation)`); otherwise their episodes
go on across generations.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import sys
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo import compiled
from purejaxppo.config import PPOConfig
from purejaxppo.drivers.population import storage
from purejaxppo.drivers.population.options import (
    PBTOptions,
    initial_hparams,
    member_keys,
    population_key,
)
from purejaxppo.drivers.population.program import COMPILES, make_operators
from purejaxppo.drivers.population.results import PBTResult, build_result, json_ready
from purejaxppo.drivers.population.search import NOT_COPIED, SearchSpace, get_values, set_values
from purejaxppo.drivers.population.static import StaticSpace, group_config
from purejaxppo.drivers.segments import (
    RESUME_KEY_STREAM,
    SegmentHooks,
    SegmentOptions,
    progress_bar,
    run_segments,
)
from purejaxppo.networks.evolve import transfer_train_state
from purejaxppo.train import METRICS, make_train_fns


class _Group:
    """The programs of one static combination: `init(key)`, `init_batch(keys [B])` and
    `run(runner [B], hparams [B], length)` (B a padded group size; one compile per (B,
    length)). `restarts`: its envs live on the host (fresh episodes when its rows change)."""

    def __init__(self, config: PPOConfig, env: Any, env_params: Any) -> None:
        self.config = config
        self.fns = make_train_fns(config, env, env_params)
        self.init = jax.jit(self.fns.init)
        self.init_batch = jax.jit(jax.vmap(self.fns.init))  # one reset of B x N host envs
        self.restarts = self.fns.kind.episodes_restart_on_resume
        # One program per generation length (jit retraces for each group size).
        self.program = functools.cache(self._program)

    def _program(self, length: int) -> Any:
        run = self.fns.run

        def pbt_generations_group(runner, hparams):
            return jax.vmap(lambda r, h: run(r, h, length))(runner, hparams)

        return jax.jit(pbt_generations_group)

    def run(self, runner: Any, hparams: Any, length: int) -> tuple[Any, Any]:
        return self.program(length)(runner, hparams)

    def abstract_runner(self, key: jax.Array) -> Any:
        """A member's runner as host zeros of its shapes and dtypes (the key as key data):
        the structure a checkpoint restores into."""
        shapes = jax.eval_shape(self.init, key)
        shapes = shapes.replace(key=jax.eval_shape(jax.random.key_data, shapes.key))
        return jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), shapes)


def _padded(count: int, population: int) -> int:
    return min(1 << (count - 1).bit_length(), population)


# The host-side moves of a generation, each one jitted program per group shape: eager
# `jnp` calls on the members' trees compiled one small program per leaf shape (233
# programs in `benchmarks.compile_time`'s `pbt_static` call, 38 now; docs/benchmarks.md).
@compiled.jit_once
def _stack(trees: list[Any]) -> Any:
    """The members' trees stacked along a new leading axis `[M, ...]`."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


@compiled.jit_once
def _unstack(tree: Any, rows: jax.Array) -> tuple[Any, ...]:
    """The members `[M, ...]` of a stacked tree, one tree each (`rows` `[M]`: only its
    length is read)."""
    return tuple(jax.tree.map(lambda x, j=j: x[j], tree) for j in range(rows.shape[0]))


def _members_finite(tree: Any) -> np.ndarray:
    """bool `[M]`: whether every floating-point leaf of member m is finite, read with
    numpy on the host (as `guards.all_finite(tree, batched=True)`, without compiling a
    reduction per leaf)."""
    leaves = [np.asarray(x) for x in jax.tree.leaves(tree)]
    ok = np.ones(leaves[0].shape[0], bool)
    for x in leaves:
        if jnp.issubdtype(x.dtype, jnp.inexact):  # bfloat16 too
            ok &= np.isfinite(x.reshape(x.shape[0], -1)).all(axis=1)
    return ok


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
        population = options.population
        self.keys = member_keys(options.seed, population)
        index = [self.combos[m % len(self.combos)] for m in range(population)]
        # the state after `done` generations (the runners are made by the first one)
        self.done = 0
        self.runners: list[Any] | None = None
        self.index = np.asarray(index, np.int64).reshape(population, len(static.names))
        self.hparams = initial_hparams(config, space, population, options.seed)
        self.key = population_key(options.seed)
        self.records: dict[str, list[np.ndarray]] = {}  # per generation, [P, ...]
        self.metrics: dict[str, list[np.ndarray]] = {}  # per generation, [P, length]
        # (vector env, rows) -> (combo, members) last stepped there (host envs)
        self.env_rows: dict[tuple[int, int], tuple] = {}
        self.checkpoint_dir: Path | None = None
        self.saved = False
        # selection and explore, each compiled once for the whole population (eager, their
        # `jnp` calls would compile one small program each)
        self.select, self.explore = map(jax.jit, make_operators(space, options))

    def group(self, combo: tuple[int, ...]) -> _Group:
        if combo not in self.groups:
            values = [c[i] for c, i in zip(self.static.choices, combo, strict=True)]
            config = group_config(self.config, self.static, values)
            self.groups[combo] = _Group(config, self.env, self.env_params)
        return self.groups[combo]

    def train(
        self,
        env: Any = None,
        env_params: Any = None,
        verbose: bool = True,
        *,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: int = 1,
        resume: bool = False,
        progress: bool = False,
    ) -> PBTResult:
        """Trains the population (from `checkpoint_dir`'s newest checkpoint with
        `resume`), saving it there every `checkpoint_every` generations and at the end;
        returns the `PBTResult` (with `static` columns).

        Raises:
          TrainingInterrupted: after SIGINT / SIGTERM, once the running generation is
            saved (`StopNow` for a second signal).
          ValueError: on resume, no readable checkpoint, or one of other arguments.
          OSError: ENOSPC, the disk is full (the newest complete checkpoint is kept).
        """
        self.env, self.env_params = env, env_params
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        if verbose and jax.process_index() == 0:
            self._announce()
        compiled_before = COMPILES.count
        if resume:
            if self.checkpoint_dir is None:
                raise ValueError("resume=True needs checkpoint_dir")
            self._restore(self.checkpoint_dir / "population")
        bar = progress_bar(
            self.num_gens,
            initial=self.done,
            unit="generation",
            desc="pbt",
            enabled=progress and jax.process_index() == 0,
        )
        hooks = SegmentHooks(
            lambda done: 1,
            self._run,
            self._process,
            self._save,
            fetch=lambda out: out,  # the next state and records, as `_run` gives them
            resume_hint=None if self.checkpoint_dir is None else self._resume_hint,
        )
        options = SegmentOptions(
            save_freq=checkpoint_every if self.checkpoint_dir is not None else 0,
            stop_on_signals=jax.process_count() == 1,
        )
        self.saved = self.done > 0  # a stop at once before the first save promises none
        with bar:
            run_segments(
                self.num_gens, self.done, hooks, bar=bar, options=options, unit="generation"
            )
        stacked = {k: np.stack(v) for k, v in self.records.items()}
        joined = {k: np.concatenate(v, axis=1) for k, v in self.metrics.items()}
        count = COMPILES.count - compiled_before
        return self._result(stacked, joined, self.runners, self.hparams, count)

    def _announce(self) -> None:
        """Says on stderr what the population trains and searches (`train(verbose=True)`)."""
        options = self.options
        print(
            f"pbt: {options.population} members x {self.num_gens} generations of "
            f"{options.ready_every} updates, exploit={options.exploit}, "
            f"explore={options.explore}, searching {list(self.space.names)} (traced) and "
            f"{list(self.static.names)} (static: {len(self.combos)} combinations, one "
            "program per group of members)",
            file=sys.stderr,
        )

    def _resume_hint(self) -> str | None:
        return storage.resume_hint(self.checkpoint_dir) if self.saved else None

    def _run(self, done: int, count: int) -> tuple:
        """Generation `done` (in `run_segments`' worker thread): trains every group, then
        the population step; returns the next state and the generation's records, left
        to `_process` to keep (a stop at once keeps the last finished generation)."""
        runners, index = self.runners, self.index
        if runners is None:
            runners = [self.group(tuple(index[m])).init(self.keys[m]) for m in range(len(index))]
        length = self.options.ready_every if done < self.full else self.tail
        COMPILES.active = True
        try:
            runners, trained = self._train_generation(runners, self.hparams, index, length, done)
        finally:
            COMPILES.active = False
        key, step_key = jax.random.split(self.key)
        last = done == self.num_gens - 1
        runners, hparams, new_index, record = self._population_step(
            runners, self.hparams, index, trained, step_key, last, done
        )
        record["static"] = index
        record["batch_size"] = np.asarray([self.group(tuple(i)).config.batch_size for i in index])
        return runners, hparams, new_index, key, record, trained

    def _process(self, done: int, count: int, fetched: tuple) -> dict[str, str]:
        self.runners, self.hparams, self.index, self.key, record, trained = fetched
        for name, value in record.items():
            self.records.setdefault(name, []).append(np.asarray(value))
        for name, value in trained.items():
            self.metrics.setdefault(name, []).append(value)
        fitness = np.stack(self.records["fitness"])
        finite = fitness[np.isfinite(fitness)]
        return {"best": f"{finite.max():.1f}" if finite.size else "n/a"}

    def _meta(self) -> dict[str, Any]:
        return json_ready(
            {
                "config": self.config.to_dict(),
                "options": self.options.to_dict(),
                "search": self.space.spec,
                "static_search": self.static.spec,
            }
        )

    def _save(self, done: int, due: bool) -> None:
        if self.checkpoint_dir is None or not due:
            return
        arrays = {
            "runners": {
                str(m): jax.device_get(r.replace(key=jax.random.key_data(r.key)))
                for m, r in enumerate(self.runners)
            },
            "hparams": jax.tree.map(np.asarray, self.hparams),
            "key": np.asarray(jax.random.key_data(self.key)),
        }
        history = {f"record/{k}": np.stack(v) for k, v in self.records.items()}
        history |= {f"metric/{k}": np.concatenate(v, axis=1) for k, v in self.metrics.items()}
        meta = {**self._meta(), "index": self.index.tolist()}
        storage.save_arrays(self.checkpoint_dir / "population", arrays, done, history, meta)
        self.saved = True

    def _restore(self, directory: Path) -> None:
        """The state of the newest checkpoint under `directory` (same arguments only)."""
        population = self.options.population

        def abstract(meta: dict[str, Any]) -> dict[str, Any]:
            index = np.asarray(meta["index"], np.int64).reshape(self.index.shape)
            runners = {
                str(m): self.group(tuple(index[m])).abstract_runner(self.keys[m])
                for m in range(population)
            }
            key = np.asarray(jax.random.key_data(self.key))
            return {"runners": runners, "hparams": self.hparams, "key": key}

        done, saved, history, meta = storage.load_population(directory, abstract)
        index = meta.pop("index")
        meta.pop("generation", None)
        if meta != self._meta():
            changed = sorted(k for k in self._meta() if meta.get(k) != self._meta()[k])
            raise ValueError(
                f"resume: the checkpoint in {directory} was written with other arguments "
                f"({', '.join(changed) or 'its fields differ'})"
            )
        self.done, self.index = done, np.asarray(index, np.int64).reshape(self.index.shape)
        self.runners = [
            r.replace(key=jax.random.wrap_key_data(np.asarray(r.key)))
            for _, r in sorted(saved["runners"].items(), key=lambda item: int(item[0]))
        ]
        self.hparams = jax.tree.map(np.asarray, saved["hparams"])
        self.key = jax.random.wrap_key_data(np.asarray(saved["key"]))
        self.records = {k[7:]: list(v) for k, v in history.items() if k.startswith("record/")}
        self.metrics = {k[7:]: [v] for k, v in history.items() if k.startswith("metric/")}
        if any(self.group(tuple(i)).restarts for i in self.index):
            print(
                f"resume: {self.config.env_name}'s episodes live on the host outside the "
                "checkpoint: the members start fresh episodes (params, optimizer state, "
                "statistics, hyperparameters and static values continue from the checkpoint)",
                file=sys.stderr,
            )

    def _vector_env(self, group: _Group, size: int) -> tuple[int, int]:
        """Which host vector env a group's `size` members step: one per env object and
        batch size (a given env object is shared by every group)."""
        return (id(self.env) if self.env is not None else id(group), size)

    def _fresh_episodes(self, group, combo, padded, batch, generation):
        """`batch` with fresh episodes where its group's host vector env last stepped other
        rows (see the module docstring); unchanged for envs that live in the program."""
        if not group.restarts:
            return batch
        where = self._vector_env(group, len(padded))
        if self.env_rows.get(where) == (combo, tuple(padded)):
            return batch
        keys = jnp.stack(
            [
                jax.random.fold_in(jax.random.fold_in(self.keys[m], RESUME_KEY_STREAM), generation)
                for m in padded
            ]
        )
        self.env_rows[where] = (combo, tuple(padded))
        return batch.replace(env=group.init_batch(keys).env)

    def _train_generation(self, runners, hparams, index, length, generation=0):
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
            group = self.group(combo)
            batch = self._fresh_episodes(group, combo, padded, batch, generation)
            rows = np.asarray(padded)
            hp = jax.tree.map(lambda x, rows=rows: jnp.asarray(np.asarray(x)[rows]), hparams)
            new, group_metrics = group.run(batch, hp, length)
            finite = _members_finite(new.train_state)
            group_metrics = {name: np.asarray(group_metrics[name]) for name in METRICS}
            for j, (m, runner) in enumerate(
                zip(members, _unstack(new, np.zeros(len(members), bool)), strict=True)
            ):
                out[m] = runner
                for name in METRICS:
                    trained[name][m] = group_metrics[name][j]
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
        select_key, explore_key, static_key = jax.random.split(key, 3)
        parents, replaced = (np.asarray(x) for x in self.select(jnp.asarray(fitness), select_key))
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
        explored = np.asarray(self.explore(jnp.asarray(new_values), explore_key))
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
        if new_group.restarts:  # that init reset the group's vector env of one member
            self.env_rows.pop(self._vector_env(new_group, 1), None)
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
