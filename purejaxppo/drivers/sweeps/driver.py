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

Envs that step on the host (EnvPool: one pool; gymnasium: one vector env) run a program's
R runs x N envs in one pool / vector env of R x N copies, called from inside the program
(`envs.host_calls`), on one device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import pandas as pd

from purejaxppo import fingerprint, kinds, parallel
from purejaxppo.config import TRACED_FIELDS, PPOConfig
from purejaxppo.drivers.report import summarize
from purejaxppo.drivers.segments import progress_bar
from purejaxppo.drivers.settings import (
    check_chunk,
    check_sweep_options,
    make_settings,
)
from purejaxppo.drivers.sweeps.groups import Group, Plan, run_group
from purejaxppo.drivers.sweeps.results import SweepResult, runs_frame
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.signals import TrainingInterrupted, hinted, stop_requests


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
      ValueError: before anything is compiled, for an unknown / unsweepable field, a bad
        value (naming the field), bad seeds, or a `max_runs_per_chunk` that is not a
        positive multiple of the device count (or several devices for an "envpool:" or
        "gymnasium:" id, or several processes for a "gymnasium:" id); for a chunk file
        in `progress_dir` from another sweep; `fingerprint.FingerprintMismatch` for a
        `progress_dir` of other settings, seeds or chunking, naming the field.
      signals.TrainingInterrupted: after SIGINT / SIGTERM (one process only; one
        request for the whole sweep): the running chunk finishes and is saved (with
        `progress`, the running segment finishes and that chunk's runs are dropped), the
        finished runs are printed, and the exception carries the call that continues
        (`purejaxppo sweep --resume OUT` for the CLI's sweeps; exit code 130 / 143).

    A run whose losses turn NaN / Inf is marked in `runs` (`diverged`: its first such
    update, 0 for none) and counted in `summary` (`num_diverged`); no other run is hit.
    """
    kind = kinds.check("sweep", config.env_name, multi_agent=config.multi_agent)
    settings, run_configs = make_settings(config, grid, random, num_samples, random_seed)
    seed_list = check_sweep_options(seeds, log_every, max_runs_per_chunk)
    check_processes(kind, config.env_name, jax.process_count())
    mesh = parallel.runs_mesh(config.env_name, devices, max_runs_per_chunk)
    check_chunk(max_runs_per_chunk, mesh.devices.size)
    groups = _static_groups(run_configs)
    plan = Plan(
        seed_list=seed_list,
        settings=settings,
        swept=list(dict.fromkeys(name for s in settings for name in s)),
        mesh=mesh,
        networks=networks,
        max_runs_per_chunk=max_runs_per_chunk,
        progress=progress,
        log_every=log_every,
        verbose=verbose,
        progress_dir=None if progress_dir is None else Path(progress_dir),
        fingerprint={
            "config": config.to_dict(),
            "settings": settings,
            "seeds": seed_list,
            "max_runs_per_chunk": max_runs_per_chunk,
        },
    )
    _check_progress_dir(plan)
    _announce(plan, config, groups)
    return _result(plan, len(groups), *_run_groups(plan, groups, run_configs))


def _check_progress_dir(plan: Plan) -> None:
    """Refuses a `progress_dir` of another sweep (`fingerprint.check`, naming the changed
    field) before anything runs, or records this sweep's fingerprint there (process 0)."""
    if plan.progress_dir is None or jax.process_index() != 0:
        return
    if not fingerprint.check(plan.progress_dir, plan.fingerprint, what="sweep"):
        plan.progress_dir.mkdir(parents=True, exist_ok=True)
        fingerprint.record(plan.progress_dir, plan.fingerprint)


def check_processes(kind: kinds.EnvKind, env_name: str, num_processes: int) -> None:
    """Raises a `ValueError` for a sweep over several processes of a kind whose runs
    share one env on one host and device (`runs_on_devices` refused: EnvPool, gymnasium)."""
    if num_processes > 1 and not kind.supports("runs_on_devices"):
        raise ValueError(
            f"env_name={env_name!r} ({kind.title}): its sweep's runs share one env on one "
            f"host: sweep it in one process (asked for {num_processes} processes)"
        )


def _result(
    plan: Plan,
    num_compiles: int,
    tables: list[pd.DataFrame],
    curves: list[pd.DataFrame],
    diverged: dict[int, int],
) -> SweepResult:
    """The `SweepResult` of the groups' tables, curves and diverged updates."""
    order = {"by": ["run", "update"], "kind": "stable"}
    table = pd.concat(tables, ignore_index=True).sort_values(**order)
    curves = pd.concat(curves, ignore_index=True).sort_values(**order)
    runs = runs_frame(curves, plan.settings, plan.seed_list, plan.swept, diverged)
    return SweepResult(
        table=table.reset_index(drop=True),
        runs=runs,
        summary=summarize(runs, plan.swept),
        curves=curves.reset_index(drop=True),
        settings=plan.settings,
        num_compiles=num_compiles,
        num_devices=plan.mesh.devices.size,
    )


def _announce(plan: Plan, config: PPOConfig, groups: Mapping[Any, list[int]]) -> None:
    """Warns about one CPU device for many runs; prints the sweep's size (`verbose`)."""
    num_runs = len(plan.settings) * len(plan.seed_list)
    one_device = parallel.runs_mesh(config.env_name, "auto") is None  # EnvPool, gymnasium
    _warn_one_cpu_device(plan.mesh, num_runs, one_device)
    if plan.verbose and jax.process_index() == 0:
        print(
            f"sweep: {num_runs} runs = {len(plan.settings)} setting(s) x "
            f"{len(plan.seed_list)} seed(s) in {len(groups)} static group(s) -> "
            f"{len(groups)} compile(s) of the training program, on "
            f"{plan.mesh.devices.size} device(s)",
            file=sys.stderr,
        )


def _run_groups(
    plan: Plan, groups: Mapping[Any, list[int]], run_configs: list[PPOConfig]
) -> tuple[list[pd.DataFrame], list[pd.DataFrame], dict[int, int]]:
    """Trains every static group (`groups.run_group`) under one progress bar; returns the
    per-group tables, curves and {run id: diverged update}."""
    seed_list = plan.seed_list
    total = sum(run_configs[g[0]].num_updates * len(g) * len(seed_list) for g in groups.values())
    bar = progress_bar(
        total, unit="update", desc="sweep", enabled=plan.progress and jax.process_index() == 0
    )
    tables, curves, diverged = [], [], {}
    start = time.perf_counter()
    if plan.progress_dir is not None:
        plan.progress_dir.mkdir(parents=True, exist_ok=True)
    num_runs = sum(len(g) * len(seed_list) for g in groups.values())
    # ONE stop request for the whole sweep, open around all its chunks (a program over
    # several processes takes none: its hosts could stop after different chunks).
    stopping = (
        "stopping after the running segment (finished chunks are saved; a chunk stopped "
        "part of the way runs again)"
        if plan.progress_dir is not None
        else "stopping after the running segment (nothing is saved: no progress_dir)"
    )
    signals = stop_requests(stopping) if jax.process_count() == 1 else contextlib.nullcontext([])
    with contextlib.ExitStack() as stack:
        stack.enter_context(bar)
        requested = stack.enter_context(signals)
        stop = _Stop(requested, plan.progress_dir, num_runs)
        # a stop at once names the saved chunks, or says that nothing was saved
        stack.enter_context(hinted(lambda: stop.resume_hint() if stop.finished else None))
        for group_index, setting_indices in enumerate(groups.values()):
            runs = [
                (s * len(seed_list) + k, s, seed)
                for s in setting_indices
                for k, seed in enumerate(seed_list)
            ]
            group = Group(
                index=group_index,
                config=run_configs[setting_indices[0]],
                runs=runs,
                hparams_list=[Hyperparams.from_config(run_configs[s]) for _, s, _ in runs],
                bar=bar,
                start=start,
                stop=stop,
            )
            table, curve, group_diverged = run_group(plan, group)
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

    def check(self, done: int | None = None, running: int = 0, at: str = "") -> None:
        """Raises `TrainingInterrupted` (exit code 130 / 143) once a stop was requested,
        after printing what is saved (`stopped_line`); `done`: updates of the interrupted
        runs (default: the last finished chunk's); `running` runs of a chunk stopped part
        of the way, `at` where ("update 5 of 20")."""
        if not self.requested:
            return
        if jax.process_index() == 0:
            print(self.stopped_line(running, at), file=sys.stderr, flush=True)
        done = self.done if done is None else done
        raise TrainingInterrupted(done, self.requested[0], self.resume_hint())

    def stopped_line(self, running: int = 0, at: str = "") -> str:
        """What a stop keeps and what is left, e.g. "sweep: stopped by SIGINT: 4 of 12 runs
        finished, their results saved in OUT/chunks; the other 8 run when the sweep
        continues (the running chunk's 4 from the start: they had reached update 5 of 20)"."""
        head = f"sweep: stopped by {self.requested[0]}: {self.finished} of {self.num_runs} runs"
        left = self.num_runs - self.finished
        if self.progress_dir is None:
            return f"{head} finished, not saved (no progress_dir): a new sweep runs all again"
        if self.finished:
            kept = f"finished, their results saved in {self.progress_dir}; the other {left} run"
        else:
            kept = f"finished, nothing saved yet; all {left} run"
        line = f"{head} {kept} when the sweep continues"
        if running:
            line += f" (the running chunk's {running} from the start: they had reached {at})"
        return line


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
