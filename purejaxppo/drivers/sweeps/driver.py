"""Sweeps: every (seed x setting) combination of a grid / random search as one program.

`sweep(config, seeds=64, grid={"learning_rate": [1e-4, 3e-4], "ent_coef": [0.0, 0.01]})`
expands the grid (and random samples) into settings, pairs every setting with every seed,
and trains all those runs at once: `vmap` over the flattened batch of runs, split over the
devices (and hosts) by `parallel.make_runs_program`. Settings that differ only in traced
fields (`TRACED_FIELDS`: learning rate, coefficients, discounting) share one compiled
program; a static field in the grid (num_envs, hidden_sizes, ...) makes one group, and one
compile, per static setting. Batches larger than `max_runs_per_chunk` (or than device
memory) run in chunks; a run's numbers do not depend on the chunking or the device count.

Run `r` of setting `s` with seed `k` uses the key `jax.random.key(k)` and the
hyperparameters of `config.replace(**setting)`: exactly what
`jax.jit(make_train(config.replace(**setting)))(jax.random.key(k), Hyperparams...)` does
for one run (tests/test_sweep.py checks it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pandas as pd
from jax.sharding import PartitionSpec as P

from purejaxppo import parallel
from purejaxppo.config import TRACED_FIELDS, PPOConfig
from purejaxppo.drivers import warm
from purejaxppo.drivers.report import summarize
from purejaxppo.drivers.segments import (
    SegmentHooks,
    TrainingInterrupted,
    progress_bar,
    run_segments,
    stop_requests,
)
from purejaxppo.drivers.settings import (
    make_settings,
)
from purejaxppo.drivers.sweeps.program import (
    chunk_size,
    collect_chunk,
    first_true,
    load_chunk,
    save_chunk,
    train_runs,
)
from purejaxppo.drivers.sweeps.results import SweepResult, curve_rows, runs_frame, table_rows
from purejaxppo.envs import kinds
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.train import METRICS, make_train_fns


def _seed_list(seeds: int | Sequence[int]) -> list[int]:
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds={seeds}: must be >= 1 (or a list of seeds)")
        return list(range(int(seeds)))
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={seeds}: must be a non-empty list of distinct integers")
    if not all(0 <= s < 2**32 for s in seeds):
        raise ValueError(f"seeds={seeds}: every seed must be in [0, 2**32)")
    return seeds


def _largest_divisor_at_most(n: int, bound: int) -> int:
    return max(d for d in range(1, max(1, min(n, bound)) + 1) if n % d == 0)


def sweep(
    config: PPOConfig,
    seeds: int | Sequence[int] = 8,
    grid: Mapping[str, Sequence[Any]] | None = None,
    random: Mapping[str, Sequence[Any]] | None = None,
    num_samples: int = 0,
    *,
    random_seed: int = 0,
    devices: Sequence[jax.Device] | int | None = None,
    max_runs_per_chunk: int | None = None,
    progress: bool = False,
    log_every: int = 1,
    verbose: bool = True,
    progress_dir: str | Path | None = None,
    networks: Any = None,
) -> SweepResult:
    """Trains every (seed x setting) combination, vmapped and split over devices.

    Settings are the grid's Cartesian product, times `num_samples` random draws when
    `random` is given (each grid point is combined with every draw). Runs are grouped by
    their static fields; each group is one compiled program (`jit(shard_map(vmap(train)))`)
    over its `[R]` runs, split over all devices of all processes (see `parallel`).

    Args:
      config: base configuration; a setting's values replace its fields.
      seeds: number of seeds (0 .. n-1) or a list of seeds; run key `jax.random.key(seed)`.
      grid: field -> list of values, e.g. `{"learning_rate": [1e-4, 3e-4]}`.
      random: field -> distribution, e.g. `{"ent_coef": ("uniform", 0.0, 0.02)}`, see
        `sample_random`; needs `num_samples` >= 1.
      num_samples: random draws.
      random_seed: numpy seed of the random draws.
      devices: None (all devices of all processes), an int (first n local devices) or a
        list of devices. On CPU, JAX starts with one device: several runs on it share
        about one core, and `sweep` warns once (`RuntimeWarning`) on a multi-core machine.
        `jax.config.update("jax_num_cpu_devices", n)` before the first JAX computation
        gives n CPU devices (the CLI sets one per usable core).
      max_runs_per_chunk: most runs in one program call; a multiple of the device count.
        None: all of a group's runs at once, or, on devices that report their memory
        (GPUs), as many as fit in 70% of their free memory (one run's memory measured by
        compiling for one run per device, times the runs per device;
        `memory.runs_per_chunk`).
        The last chunk is padded with copies of a run whose results are dropped.
      progress: show a tqdm bar (the runs then advance in jitted segments of updates: one
        more small program per group, same numbers).
      log_every: keep every n-th update (and the last) in `table`.
      verbose: print (to stderr) how many runs, groups, compiles, chunks and devices.
      progress_dir: a directory where the results of every chunk are saved as soon as it
        finishes (`group<g>-chunk<c>.<process>.npz`, written atomically); chunks found
        there are loaded instead of computed, so a killed sweep called again with the
        same arguments and `progress_dir` continues and returns the same tables.
      networks: a custom `Networks` for every run (`networks_from_modules`); default the
        config's built-in network.

    Returns:
      `SweepResult` (tables as pandas DataFrames).

    Raises:
      ValueError: before anything is compiled, for a host env ("gymnasium:<id>", which
        cannot run under vmap), an unknown / unsweepable field, a bad
        value (naming the field), bad seeds, or a `max_runs_per_chunk` that is not a
        positive multiple of the device count (or several devices for an "envpool:" id);
        or for a chunk file in `progress_dir` from another sweep.
      drivers.segments.TrainingInterrupted: after SIGINT / SIGTERM (one process only;
        one request for the whole sweep): the running chunk finishes and is saved (with
        `progress`, the running segment finishes and that chunk's runs are dropped), the
        finished runs are printed, and the exception carries the call that continues
        (`purejaxppo sweep --resume OUT` for the CLI's sweeps; exit code 130 / 143).

    A run whose losses turn NaN / Inf is marked in `runs` (`diverged`: the first such
    update, 0 for none) and counted in `summary` (`num_diverged`); the other runs are
    unaffected.
    """
    kinds.check("batched_runs", config.env_name, multi_agent=config.multi_agent)
    settings, run_configs = make_settings(config, grid, random, num_samples, random_seed)
    seed_list = _seed_list(seeds)
    if log_every < 1:
        raise ValueError(f"log_every={log_every}: must be >= 1")
    mesh = _runs_mesh(devices, max_runs_per_chunk, config.env_name)
    swept = list(dict.fromkeys(name for s in settings for name in s))
    groups = _static_groups(run_configs)
    num_runs = len(settings) * len(seed_list)
    one_device = not kinds.kind_of_id(config.env_name).supports("runs_on_devices")
    _warn_one_cpu_device(mesh, num_runs, one_device)
    if verbose and jax.process_index() == 0:
        print(
            f"sweep: {num_runs} runs = {len(settings)} setting(s) x {len(seed_list)} seed(s) "
            f"in {len(groups)} static group(s) -> {len(groups)} compile(s) of the training "
            f"program, on {mesh.devices.size} device(s)",
            file=sys.stderr,
        )
    tables, curves, diverged = _run_groups(
        groups, run_configs, seed_list, settings, swept, mesh, networks, max_runs_per_chunk,
        progress, log_every, verbose, progress_dir,
    )  # fmt: skip
    table = pd.concat(tables, ignore_index=True).sort_values(["run", "update"], kind="stable")
    curves = pd.concat(curves, ignore_index=True).sort_values(["run", "update"], kind="stable")
    runs = runs_frame(curves, settings, seed_list, swept, diverged)
    return SweepResult(
        table=table.reset_index(drop=True),
        runs=runs,
        summary=summarize(runs, swept),
        curves=curves.reset_index(drop=True),
        settings=settings,
        num_compiles=len(groups),
        num_devices=mesh.devices.size,
    )


def _run_groups(
    groups, run_configs, seed_list, settings, swept, mesh, networks, max_runs_per_chunk,
    progress, log_every, verbose, progress_dir,
):  # fmt: skip
    """Trains every static group (`_run_group`) under one progress bar; returns the
    per-group tables, curves and {run id: diverged update}."""
    total = sum(run_configs[g[0]].num_updates * len(g) * len(seed_list) for g in groups.values())
    bar = progress_bar(
        total, unit="update", desc="sweep", enabled=progress and jax.process_index() == 0
    )
    tables, curves, diverged = [], [], {}
    start = time.perf_counter()
    if progress_dir is not None:
        Path(progress_dir).mkdir(parents=True, exist_ok=True)
    num_runs = sum(len(g) * len(seed_list) for g in groups.values())
    # ONE stop request for the whole sweep, open around all its chunks (a program over
    # several processes takes none: its hosts could stop after different chunks).
    signals = stop_requests() if jax.process_count() == 1 else contextlib.nullcontext([])
    with bar, signals as requested:
        stop = _Stop(requested, progress_dir, num_runs)
        for group_index, setting_indices in enumerate(groups.values()):
            group_cfg = run_configs[setting_indices[0]]
            runs = [
                (s * len(seed_list) + k, s, seed)
                for s in setting_indices
                for k, seed in enumerate(seed_list)
            ]
            table, curve, group_diverged = _run_group(
                networks,
                group_cfg,
                runs,
                [Hyperparams.from_config(run_configs[s]) for _, s, _ in runs],
                settings,
                swept,
                mesh,
                max_runs_per_chunk,
                progress,
                log_every,
                bar,
                verbose,
                start,
                None if progress_dir is None else (Path(progress_dir), group_index),
                stop,
            )
            tables.append(table)
            curves.append(curve)
            diverged.update(group_diverged)

    return tables, curves, diverged


_OPERATION = "sweep (runs vmapped over seeds and settings)"


class _Stop:
    """A sweep's stop request: SIGINT / SIGTERM while the sweep runs (`stop_requests`,
    opened once around all chunks) stops it at the next `check`, between chunks (the
    running chunk finishes and is saved first) or, with a progress bar, between segments
    of a chunk (that chunk's runs are then recomputed when the sweep continues)."""

    def __init__(self, requested: list[str], progress_dir: Any, num_runs: int):
        self.requested = requested
        self.progress_dir = None if progress_dir is None else Path(progress_dir)
        self.num_runs = num_runs
        self.finished = 0  # runs whose results are saved (or were loaded) so far
        self.done = 0  # updates done by the runs of the last chunk finished

    def chunk_finished(self, runs: int, updates: int) -> None:
        self.finished += runs
        self.done = updates

    def resume_hint(self) -> str | None:
        """How to continue: the CLI's `sweep --resume OUT` (the chunks live in OUT/chunks
        next to its request.yaml), else the same call with the same `progress_dir`."""
        if self.progress_dir is None:
            return None
        out = self.progress_dir.parent
        if (out / "request.yaml").is_file():
            return f"purejaxppo sweep --resume {out}"
        return (
            f"sweep(...) again with the same arguments and progress_dir={str(self.progress_dir)!r}"
        )

    def check(self, done: int | None = None, running: str = "") -> None:
        """Raises `TrainingInterrupted` (exit code 130 / 143) once a stop was requested,
        after printing what is saved; `done`: updates of the interrupted runs (default:
        the last finished chunk's), `running`: what is lost of the chunk that was running."""
        if not self.requested:
            return
        if jax.process_index() == 0:
            where = (
                f"saved in {self.progress_dir}"
                if self.progress_dir is not None
                else "not saved (no progress_dir)"
            )
            print(
                f"sweep: stopped by {self.requested[0]}: {self.finished} of {self.num_runs} "
                f"runs finished, their results {where}{running}; the other "
                f"{self.num_runs - self.finished} runs run when the sweep continues",
                file=sys.stderr,
                flush=True,
            )
        done = self.done if done is None else done
        raise TrainingInterrupted(done, self.requested[0], self.resume_hint())


def _runs_mesh(devices: Any, max_runs_per_chunk: int | None, env_name: str) -> Any:
    """The runs' mesh (one device for an "envpool:" id by default, and refused on more:
    its runs share one pool); checks that `max_runs_per_chunk` splits evenly over it."""
    mesh = parallel.make_mesh(kinds.runs_devices(env_name, devices), parallel.RUNS_AXIS)
    num_devices = mesh.devices.size
    kinds.check_runs_devices(env_name, num_devices)
    if max_runs_per_chunk is not None and (
        max_runs_per_chunk < 1 or max_runs_per_chunk % num_devices
    ):
        raise ValueError(
            f"max_runs_per_chunk={max_runs_per_chunk}: must be a positive multiple of the "
            f"number of devices ({num_devices}) so that every device gets the same runs"
        )
    return mesh


def _static_groups(run_configs: Sequence[PPOConfig]) -> dict[tuple, list[int]]:
    """Setting indices grouped by the static part of their configuration: one compile
    per group (the traced fields, `TRACED_FIELDS`, vary inside a group)."""
    groups: dict[tuple, list[int]] = {}
    for index, cfg in enumerate(run_configs):
        static = tuple(
            (f.name, repr(getattr(cfg, f.name)))
            for f in dataclasses.fields(PPOConfig)
            if f.name not in TRACED_FIELDS
        )
        groups.setdefault(static, []).append(index)
    return groups


_WARNED_ONE_CPU_DEVICE = False


def _warn_one_cpu_device(mesh, num_runs: int, one_device: bool = False) -> None:
    """Warns once per process when several runs go to one CPU device of a multi-core
    machine (XLA:CPU then runs them on about one core), unless they must (`one_device`:
    EnvPool runs share one pool on one device)."""
    global _WARNED_ONE_CPU_DEVICE
    from purejaxppo.platform import usable_cores

    cores = usable_cores()
    devices = list(mesh.devices.flat)
    if (
        _WARNED_ONE_CPU_DEVICE
        or one_device
        or num_runs < 2
        or len(devices) != 1
        or devices[0].platform != "cpu"
        or cores < 2
    ):
        return
    _WARNED_ONE_CPU_DEVICE = True
    warnings.warn(
        f"sweep: {num_runs} runs on one CPU device of a machine with {cores} usable cores "
        f"run on about one core; to split them over all cores, call "
        f'jax.config.update("jax_num_cpu_devices", {cores}) before the first JAX '
        f"computation (the purejaxppo CLI does this by default)",
        RuntimeWarning,
        stacklevel=3,
    )


def _run_group(
    networks, config, runs, hparams_list, settings, swept, mesh, max_chunk, progress, log_every, bar,
    verbose, start, saving, stop,
):  # fmt: skip
    """Trains one static group's runs in chunks (or loads the chunks `saving = (dir,
    group index)` holds); returns (table rows, curves, {run id: diverged update}).
    Stops (`stop.check`) before compiling and before each chunk it computes."""
    stop.check()
    # A warm start is read once and passed to the programs as an argument (`warm`).
    init_params = warm.load_warm_start(config)
    fns = make_train_fns(warm.program_config(config), networks=networks)
    warm.check_warm_start(fns, init_params)
    num_devices = mesh.devices.size
    num_updates = config.num_updates

    programs = (
        *_group_programs(fns, num_updates, mesh, progress, fns.kind.vmap_init_runs),
        warm.replicate(init_params, mesh),
    )
    key_data = np.stack(
        [np.asarray(jax.random.key_data(jax.random.key(seed))) for *_, seed in runs]
    )
    hparams = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *hparams_list)
    measured = []
    chunk = chunk_size(
        len(runs), num_devices, max_chunk, mesh, fns, config, key_data, hparams, programs[-1],
        report=measured.append,
    )  # fmt: skip
    if verbose and jax.process_index() == 0 and chunk < len(runs):
        print(
            f"sweep: group of {len(runs)} runs in chunks of {chunk}"
            + "".join(f" ({line})" for line in measured),
            file=sys.stderr,
        )
    tables, curves, diverged = [], [], {}
    for chunk_index, first in enumerate(range(0, len(runs), chunk)):
        real = min(chunk, len(runs) - first)
        run_ids = np.array([runs[first + row][0] for row in range(real)])
        path = None
        if saving is not None:
            count, index = jax.process_count(), jax.process_index()
            name = f"group{saving[1]:03d}-chunk{chunk_index:05d}.{index}-of-{count}.npz"
            path = saving[0] / name
        if path is not None and path.exists():
            local, local_index, all_returns, bad = load_chunk(path, run_ids)
            bar.update(num_updates * real)
            tables.append(table_rows(local, local_index, runs, settings, swept, log_every))
            curves.append(curve_rows(all_returns, first, runs, config))
            diverged.update(zip(run_ids.tolist(), first_true(bad).tolist(), strict=True))
            stop.chunk_finished(real, num_updates)
            continue
        stop.check()
        size = chunk if len(runs) > chunk else parallel.pad_runs(real, num_devices)
        pick = np.minimum(np.arange(first, first + size), first + real - 1)  # pad: repeat
        inputs = parallel.to_global(
            (key_data[pick], jax.tree.map(lambda x: x[pick], hparams)),  # noqa: B023
            mesh,
            P(parallel.RUNS_AXIS),
        )
        pieces = _run_chunk(programs, inputs, first, real, bar, config, start, stop)
        local = {name: np.concatenate([p[0][name] for p in pieces], axis=1) for name in METRICS}
        local_index = pieces[0][1]
        all_returns = np.concatenate([p[2] for p in pieces], axis=1)
        bad = np.concatenate([p[3] for p in pieces], axis=1)
        if path is not None:
            save_chunk(path, run_ids, local, local_index, all_returns, bad)
        tables.append(table_rows(local, local_index, runs, settings, swept, log_every))
        curves.append(curve_rows(all_returns, first, runs, config))
        diverged.update(zip(run_ids.tolist(), first_true(bad).tolist(), strict=True))
        stop.chunk_finished(real, num_updates)
    tables = pd.concat(tables, ignore_index=True)
    return tables, pd.concat(curves, ignore_index=True), diverged


def _group_programs(
    fns: Any, num_updates: int, mesh: Any, progress: bool, vmap_init: bool = False
) -> tuple:
    """(segment length, init program or None, segment program) of one static group: with
    `progress`, about 20 segments of updates (a divisor of `num_updates`) after an init
    program `(key_data, init_params) -> runner`; without, one whole-run program
    `(key_data, init_params, hparams) -> metrics` (`init_params`: the warm start, `warm`;
    `vmap_init`: see `parallel.batch_runs`)."""
    if not progress:
        program = parallel.make_runs_program(
            train_runs(fns, num_updates, vmap_init), mesh, warm.runs_specs(1)
        )
        return num_updates, None, program
    segment = _largest_divisor_at_most(num_updates, max(1, math.ceil(num_updates / 20)))
    init_program = parallel.make_runs_program(
        warm.init_runs(fns.init, lambda runner: runner, vmap_init=vmap_init),
        mesh,
        warm.runs_specs(0),
    )
    run_program = parallel.make_runs_program(
        jax.vmap(lambda runner, hp: fns.run(runner, hp, segment)), mesh
    )
    return segment, init_program, run_program


def _run_chunk(programs, inputs, first, real, bar, config, start, stop) -> list:
    """Runs one chunk's `real` runs (rows `first`..) through `run_segments`; returns the
    per-segment `collect_chunk` pieces. A stop request (`stop`, the sweep's own: the
    segments take none) ends the chunk after its running segment."""
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
        pieces.append(collect_chunk(metrics, first, real))
        if done + length < config.num_updates:
            stop.check(
                done + length,
                f"; the running chunk's {real} runs stopped after update {done + length} of "
                f"{config.num_updates}, not saved",
            )
        if init_program is None:
            return None
        steps = (bar.n + length * real) * config.batch_size
        return {"sps": f"{steps / (time.perf_counter() - start):,.0f}"}

    hooks = SegmentHooks(length=lambda done: segment, run=run, process=process)
    run_segments(
        config.num_updates, 0, hooks, bar=bar, scale=real, fetch=lambda x: x,
        stop_on_signals=False,
    )  # fmt: skip
    return pieces
