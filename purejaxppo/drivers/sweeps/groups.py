"""One static group of a sweep: its runs trained in chunks, each chunk in segments.

`run_group(plan, group)` compiles the group's programs once (`program.train_runs`, or an
init and a segment program for the progress bar), sizes its chunks (`program.chunk_size`),
and trains or loads (`plan.progress_dir`) every chunk; `driver.sweep` calls it per group.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
import pandas as pd
from jax.sharding import PartitionSpec as P

from purejaxppo import fingerprint, parallel, stored_programs
from purejaxppo.config import PPOConfig
from purejaxppo.drivers import warm
from purejaxppo.drivers.segments import (
    SegmentHooks,
    SegmentOptions,
    largest_divisor_at_most,
    run_segments,
    speed_postfix,
)
from purejaxppo.drivers.sweeps.program import (
    chunk_path,
    chunk_size,
    collect_chunk,
    first_true,
    load_chunk,
    save_chunk,
    train_runs,
)
from purejaxppo.drivers.sweeps.results import curve_rows, table_rows
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.train import METRICS, make_train_fns

__all__ = ["ChunkPiece", "Group", "Plan", "run_group"]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What every static group of one sweep shares (`sweep`'s arguments, resolved)."""

    seed_list: list[int]
    settings: list[dict[str, Any]]
    swept: list[str]  # the fields the settings set
    mesh: Any
    networks: Any
    max_runs_per_chunk: int | None
    progress: bool
    log_every: int
    verbose: bool
    progress_dir: Path | None
    #: what decides the results (base config, settings, seeds, chunking): recorded in
    #: `progress_dir` and digested into each chunk file (`fingerprint`)
    fingerprint: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Group:
    """One static group's call of `_run_group`: its config, its runs `(run id, setting
    index, seed)` with their hyperparameters, and where the sweep stands."""

    index: int
    config: PPOConfig
    runs: list[tuple[int, int, int]]
    hparams_list: list[Hyperparams]
    bar: Any
    start: float  # time.perf_counter() at the sweep's start
    stop: Any  # the sweep's `_Stop`


class ChunkPiece(NamedTuple):
    """One segment's results of a chunk (`program.collect_chunk`)."""

    local: dict[str, np.ndarray]  # this process's metric rows
    index: np.ndarray  # their run rows in the group
    returns: np.ndarray  # episode returns of all runs of the chunk `[real, U]`
    bad: np.ndarray  # non-finite loss flags `[real, U]`


def run_group(plan: Plan, group: Group) -> tuple[pd.DataFrame, pd.DataFrame, dict[int, int]]:
    """Trains one static group's runs in chunks (or loads the chunks that
    `plan.progress_dir` holds for it); returns (table rows, curves, {run id: diverged
    update}). Stops (`stop.check`) before compiling and before each chunk it computes."""
    config, runs, bar, stop = group.config, group.runs, group.bar, group.stop
    mesh, settings, swept, log_every = plan.mesh, plan.settings, plan.swept, plan.log_every
    stop.check()
    # A warm start is read once and passed to the programs as an argument (`warm`).
    program, init_params = warm.program_and_start(config)
    fns = make_train_fns(program, networks=plan.networks)
    warm.check_warm_start(fns, init_params)
    num_updates = config.num_updates

    programs = (
        *_group_programs(fns, num_updates, mesh, plan.progress, _stored(plan, program, fns)),
        warm.replicate(init_params, mesh),
    )
    key_data = np.stack(
        [np.asarray(jax.random.key_data(jax.random.key(seed))) for *_, seed in runs]
    )
    hparams = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *group.hparams_list)
    measured = []
    chunk = chunk_size(
        len(runs),
        mesh.devices.size,
        plan.max_runs_per_chunk,
        mesh=mesh,
        fns=fns,
        config=config,
        key_data=key_data,
        hparams=hparams,
        init=programs[-1],
        report=measured.append,
    )
    if plan.verbose and jax.process_index() == 0 and chunk < len(runs):
        sizes = "".join(f" ({line})" for line in measured)
        print(f"sweep: group of {len(runs)} runs in chunks of {chunk}{sizes}", file=sys.stderr)
    tables, curves, diverged = [], [], {}
    for chunk_index, first in enumerate(range(0, len(runs), chunk)):
        real = min(chunk, len(runs) - first)
        run_ids = np.array([runs[first + row][0] for row in range(real)])
        path = chunk_path(plan.progress_dir, group.index, chunk_index)
        runs_digest = _chunk_digest(plan, runs[first : first + real])
        if path is not None and path.exists():
            results = load_chunk(path, run_ids, runs_digest)
            bar.update(num_updates * real)
        else:
            stop.check()
            inputs = _chunk_inputs(key_data, hparams, first, real, chunk, mesh)
            results = _joined(_run_chunk(programs, inputs, first, real, group))
            if path is not None:
                save_chunk(path, run_ids, *results, runs_digest)
        local, local_index, all_returns, bad = results
        tables.append(table_rows(local, local_index, runs, settings, swept, log_every))
        curves.append(curve_rows(all_returns, first, runs, config))
        diverged.update(zip(run_ids.tolist(), first_true(bad).tolist(), strict=True))
        stop.chunk_finished(real, num_updates)
    tables = pd.concat(tables, ignore_index=True)
    return tables, pd.concat(curves, ignore_index=True), diverged


def _chunk_inputs(
    key_data: np.ndarray, hparams: Any, first: int, real: int, chunk: int, mesh: Any
) -> Any:
    """The (keys, hparams) of the `real` runs from `first` as global arrays over the runs
    axis of `mesh`, padded (the last run repeated) to `chunk`, or (a group of one chunk)
    to a multiple of the devices (`parallel.pad_runs`)."""
    num_runs = len(key_data)
    size = chunk if num_runs > chunk else parallel.pad_runs(real, mesh.devices.size)
    pick = np.minimum(np.arange(first, first + size), first + real - 1)  # pad: repeat
    picked = (key_data[pick], jax.tree.map(lambda x: x[pick], hparams))
    return parallel.to_global(picked, mesh, P(parallel.RUNS_AXIS))


def _joined(pieces: list) -> tuple[dict, Any, np.ndarray, np.ndarray]:
    """A chunk's `(local, local_index, all_returns, bad)` from its segments' pieces."""
    local = {name: np.concatenate([p.local[name] for p in pieces], axis=1) for name in METRICS}
    all_returns = np.concatenate([p.returns for p in pieces], axis=1)
    bad = np.concatenate([p.bad for p in pieces], axis=1)
    return local, pieces[0].index, all_returns, bad


def _chunk_digest(plan: Plan, runs: list[tuple[int, int, int]]) -> str:
    """What a chunk file's results belong to: the base config and each run's (seed,
    setting), digested (`fingerprint.digest`)."""
    return fingerprint.digest(
        [plan.fingerprint.get("config"), [[seed, plan.settings[s]] for _, s, seed in runs]]
    )


def _stored(plan: Plan, program: PPOConfig, fns: Any) -> Callable[[str], tuple]:
    """`name -> (name, config, directory)`, the `stored` argument of a group's programs
    (`parallel.make_runs_program`): kept in the store (`stored_programs`) unless networks
    came as objects, which no config names; a warm start is an argument here, not a
    constant."""
    store = stored_programs.directory_for(host_calls=fns.kind.host_calls, warm_start=False)
    return lambda name: (f"sweep/{name}", program, None if plan.networks else store)


def _group_programs(
    fns: Any, num_updates: int, mesh: Any, progress: bool, stored: Callable[[str], tuple]
) -> tuple:
    """(segment length, init program or None, segment program) of one static group: with
    `progress`, about 20 segments of updates (a divisor of `num_updates`) after an init
    program `(key_data, init_params) -> runner`; without, one whole-run program
    `(key_data, init_params, hparams) -> metrics` (`init_params`: the warm start, `warm`;
    the kind's `vmap_init_runs`: see `parallel.batch_runs`). `stored(name)`: the
    program's `stored` argument of `parallel.make_runs_program`."""
    vmap_init = fns.kind.vmap_init_runs
    if not progress:
        program = parallel.make_runs_program(
            train_runs(fns, num_updates, vmap_init), mesh, warm.runs_specs(1), stored=stored("run")
        )
        return num_updates, None, program
    segment = largest_divisor_at_most(num_updates, max(1, math.ceil(num_updates / 20)))
    init_program = parallel.make_runs_program(
        warm.init_runs(fns.init, lambda runner: runner, vmap_init=vmap_init),
        mesh,
        warm.runs_specs(0),
        once=True,
        stored=stored("init"),
    )
    run_program = parallel.make_runs_program(
        jax.vmap(lambda runner, hp: fns.run(runner, hp, segment)),
        mesh,
        stored=stored(f"segment/{segment}"),
    )
    return segment, init_program, run_program


def _run_chunk(programs, inputs, first: int, real: int, group: Group) -> list[ChunkPiece]:
    """Runs one chunk's `real` runs (rows `first`..) through `run_segments`; returns the
    per-segment `collect_chunk` pieces. A stop request (`group.stop`, the sweep's own: the
    segments take none) ends the chunk after its running segment."""
    config, bar, start, stop = group.config, group.bar, group.start, group.stop
    segment, init_program, run_program, init_params = programs
    key_data, hparams = inputs
    carry = {"runner": None if init_program is None else init_program(key_data, init_params)}
    pieces = []

    def run(done: int, length: int) -> Any:
        if init_program is None:  # one whole-run program
            return run_program(key_data, init_params, hparams)
        carry["runner"], metrics = run_program(carry["runner"], hparams)
        return metrics

    def process(done: int, length: int, metrics: Any) -> dict[str, str] | None:
        pieces.append(ChunkPiece(*collect_chunk(metrics, first, real)))
        if done + length < config.num_updates:
            stop.check(done + length, real, f"update {done + length} of {config.num_updates}")
        if init_program is None:
            return None
        steps = (bar.n + length * real) * config.batch_size
        return speed_postfix(steps, time.perf_counter() - start)

    hooks = SegmentHooks(length=lambda done: segment, run=run, process=process, fetch=lambda x: x)
    options = SegmentOptions(stop_on_signals=False)
    run_segments(config.num_updates, 0, hooks, bar=bar, options=options, scale=real)
    return pieces
