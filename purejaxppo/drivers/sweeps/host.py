"""A sweep of a host env ("gymnasium:<id>"): every (setting x seed) run one after another.

A host env steps in Python (`host_train`), so its runs cannot be vmapped into one
compiled program (`groups.run_group`). `run_host_group` trains one setting's runs one at a
time instead, each a `drivers.host_runs.HostRuns` of one seed with its own vector env:
run k of setting s trains exactly what `purejaxppo train --seed k` trains with
`config.replace(**setting)` (the same key, the same host-env seeds; tests/test_sweep_host.py
checks the metrics bitwise). Each run is one chunk of the JAX sweep's files
(`program.chunk_path`, `save_chunk`): saved to `plan.progress_dir` as soon as it
finishes, loaded instead of trained when found there (`purejaxppo sweep --resume`). A
stop request (the sweep's `_Stop`) ends the sweep between runs, or between segments of
the running run, whose updates so far are then dropped.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pandas as pd

from purejaxppo.drivers import warm
from purejaxppo.drivers.host_runs import HostRuns
from purejaxppo.drivers.segments import SegmentHooks, run_segments
from purejaxppo.drivers.sweeps.groups import Group, Plan, largest_divisor_at_most
from purejaxppo.drivers.sweeps.program import chunk_path, first_true, load_chunk, save_chunk
from purejaxppo.drivers.sweeps.results import curve_rows, table_rows
from purejaxppo.guards import LOSS_METRICS
from purejaxppo.train import METRICS, make_train_fns

__all__ = ["run_host_group"]


def run_host_group(plan: Plan, group: Group) -> tuple[pd.DataFrame, pd.DataFrame, dict[int, int]]:
    """Trains one setting's runs (`group.runs`, all of `group.config`) one after another,
    each its own chunk (or loads the chunks `plan.progress_dir` holds); returns (table
    rows, curves, {run id: diverged update}), as `groups.run_group`. Stops
    (`group.stop.check`) before each run it trains and between the segments of a run."""
    config, runs, stop = group.config, group.runs, group.stop
    stop.check()
    init_params = warm.load_warm_start(config)
    program_config = warm.program_config(config)

    def make_fns() -> Any:
        return make_train_fns(program_config, networks=plan.networks)

    tables, curves, diverged = [], [], {}
    for row, (run_id, _, seed) in enumerate(runs):
        run_ids = np.array([run_id])
        path = chunk_path(plan.progress_dir, group.index, row)
        if path is not None and path.exists():
            local, local_index, returns, bad = load_chunk(path, run_ids)
            group.bar.update(config.num_updates)
        else:
            stop.check()
            host_runs = HostRuns(make_fns, config, [seed], init_params)
            warm.check_warm_start(host_runs.fns[0], init_params)
            local = _train_run(host_runs, group, plan.progress)
            local_index = np.array([row])
            returns = local["episode_return"]
            bad = np.logical_or.reduce([~np.isfinite(local[name]) for name in LOSS_METRICS])
            if path is not None:
                save_chunk(path, run_ids, local, local_index, returns, bad)
        tables.append(
            table_rows(local, local_index, runs, plan.settings, plan.swept, plan.log_every)
        )
        curves.append(curve_rows(returns, row, runs, config))
        diverged[run_id] = int(first_true(bad)[0])
        stop.chunk_finished(1, config.num_updates)
    return pd.concat(tables, ignore_index=True), pd.concat(curves, ignore_index=True), diverged


def _train_run(host_runs: HostRuns, group: Group, progress: bool) -> dict[str, np.ndarray]:
    """One run, in about 20 segments of updates (the same numbers as one call: a host run
    goes on where its last call left it) so that a stop request ends it soon; returns its
    metrics `name -> [1, num_updates]` for every name of `METRICS`."""
    config, stop, bar = group.config, group.stop, group.bar
    num_updates = config.num_updates
    segment = largest_divisor_at_most(num_updates, max(1, math.ceil(num_updates / 20)))
    host_runs.init()
    pieces = []

    def run(done: int, length: int) -> dict[str, np.ndarray]:
        return host_runs.run(length)[1]

    def process(done: int, length: int, metrics: dict[str, np.ndarray]) -> dict[str, str] | None:
        pieces.append(metrics)
        if done + length < num_updates:
            stop.check(
                done + length,
                f"; the running run stopped after update {done + length} of {num_updates}, "
                "not saved",
            )
        if not progress:
            return None
        steps = (bar.n + length) * config.batch_size
        return {"sps": f"{steps / (time.perf_counter() - group.start):,.0f}"}

    hooks = SegmentHooks(length=lambda done: segment, run=run, process=process)
    run_segments(num_updates, 0, hooks, bar=bar, fetch=lambda x: x, stop_on_signals=False)
    return {name: np.concatenate([p[name] for p in pieces], axis=1) for name in METRICS}
