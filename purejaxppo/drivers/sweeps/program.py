"""The compiled side of a sweep: whole-run programs, chunk sizing, per-chunk results
(collected where the runs live) and the chunk files of `progress_dir`.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from purejaxppo import memory, parallel
from purejaxppo.drivers import warm
from purejaxppo.guards import LOSS_METRICS
from purejaxppo.train import METRICS


def first_true(bad: np.ndarray) -> np.ndarray:
    """`[R, U]` bool -> `[R]`: first update (1-based) that is True, 0 where none is."""
    return np.where(bad.any(axis=1), np.argmax(bad, axis=1) + 1, 0)


def chunk_path(progress_dir: Path | None, group: int, chunk: int) -> Path | None:
    """The file of one chunk's results in `progress_dir` (None: no file), one per process:
    `group<g>-chunk<c>.<process>-of-<processes>.npz`."""
    if progress_dir is None:
        return None
    count, index = jax.process_count(), jax.process_index()
    return progress_dir / f"group{group:03d}-chunk{chunk:05d}.{index}-of-{count}.npz"


def save_chunk(path, run_ids, local, local_index, returns, bad, runs_digest=""):
    """Writes one chunk's results atomically (a temporary file renamed into place), with
    `runs_digest`: what its runs were (base config, settings, seeds; `groups`)."""
    arrays = {f"metric/{name}": value for name, value in local.items()}
    arrays.update(run_ids=run_ids, local_index=local_index, returns=returns, bad=bad)
    arrays["runs_digest"] = np.array(runs_digest)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as file:
        np.savez(file, **arrays)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)


def load_chunk(path, run_ids, runs_digest=""):
    """One chunk's results, checked to be those of `run_ids` with the settings and seeds
    that `runs_digest` digests.

    Raises:
      ValueError: an unreadable file, or one of other runs, settings or seeds.
    """
    try:
        with np.load(path) as data:
            arrays = {name: data[name] for name in data.files}
    except Exception as err:  # a damaged file: numpy raises several types
        raise ValueError(
            f"sweep chunk file {path} is unreadable ({err}); delete it to recompute the chunk"
        ) from None
    if not np.array_equal(arrays.get("run_ids"), run_ids):
        raise ValueError(
            f"sweep chunk file {path} holds runs {arrays.get('run_ids')}, this sweep expects "
            f"{run_ids}: it is from a different sweep (other settings, seeds or chunking)"
        )
    if str(arrays.get("runs_digest", "")) != runs_digest:
        raise ValueError(
            f"sweep chunk file {path} holds the results of other settings or seeds than "
            "this sweep's runs of the same numbers (the sweep's request or base config "
            "changed since it ran): resume with the original settings, or start a new sweep"
        )
    local = {name: arrays[f"metric/{name}"] for name in METRICS}
    return local, arrays["local_index"], arrays["returns"], arrays["bad"]


def train_runs(fns, num_updates, vmap_init=False):
    """Whole runs, metrics only: `(key_data [R, 2], init_params, hparams [R]) -> metrics
    [R, U]` (`init_params`: the warm start shared by every run, or None; `warm`;
    `vmap_init`: see `parallel.batch_runs`)."""
    return warm.init_runs(
        fns.init, lambda runner, hp: fns.run(runner, hp, num_updates)[1], vmap_init=vmap_init
    )


def collect_chunk(metrics, first, real):
    """(this process's metric rows, their chunk-relative indices, all runs' returns, all
    runs' non-finite loss flags `[real, U]`)."""
    index, _ = parallel.local_rows(metrics["env_steps"])
    keep = index < real
    local = {name: parallel.local_rows(metrics[name])[1][keep] for name in METRICS}
    returns = parallel.to_host(metrics["episode_return"])[:real]
    bad = parallel.to_host(nonfinite_losses({n: metrics[n] for n in LOSS_METRICS}))[:real]
    return local, index[keep] + first, returns, bad


@jax.jit
def nonfinite_losses(losses):
    """`[R, U]` bool: any of `LOSS_METRICS` is NaN / Inf (computed where the runs live)."""
    return functools.reduce(jnp.logical_or, [~jnp.isfinite(v) for v in losses.values()])


def chunk_size(
    num_runs, num_devices, max_chunk, *, mesh, fns, config, key_data, hparams, init, report=None
):
    """Runs per program call of a static group of `num_runs` runs on `num_devices`.

    `max_chunk` when given. Else, where the device reports no memory limit (CPU), all
    runs at once (padded to a multiple of `num_devices`); with at most one run per device
    there is nothing to choose either. Otherwise one run's memory is measured (the
    whole-run program compiled for one run per device: its temporaries, arguments and
    outputs) and `memory.runs_per_chunk` fits as many runs as that times the runs per
    device in 70% of the device's free memory (`bytes_limit - bytes_in_use`; over several
    processes, of `bytes_limit`, so that all of them pick the same chunk).
    `report(line)`, when given, gets a one-line account of the measurement.
    """
    if max_chunk is not None:
        return max_chunk
    padded = parallel.pad_runs(num_runs, num_devices)
    limit = parallel.device_bytes_limit(mesh)
    if limit is None or padded == num_devices:
        return padded
    # Measure one run per device: compile the whole-run program for D runs and read its
    # memory (per device).
    program = parallel.make_runs_program(
        train_runs(fns, config.num_updates, fns.kind.vmap_init_runs),
        mesh,
        warm.runs_specs(1),
    )
    pick = np.zeros(num_devices, dtype=int)
    args = parallel.to_global(
        (key_data[pick], jax.tree.map(lambda x: x[pick], hparams)), mesh, P(parallel.RUNS_AXIS)
    )
    stats = program.lower(args[0], init, args[1]).compile().memory_analysis()
    per_run = stats.temp_size_in_bytes + stats.argument_size_in_bytes + stats.output_size_in_bytes
    # Every process must pick the same chunk: the memory in use (which may differ between
    # hosts) counts only for a sweep in one process.
    local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    in_use = 0
    if local and jax.process_count() == 1:
        in_use = int(memory.memory_stats(local[0]).get("bytes_in_use", 0))
    chunk = memory.runs_per_chunk(per_run, limit, in_use, num_runs, num_devices)
    if report is not None:
        report(
            f"one run needs about {per_run / 2**20:,.1f} MiB (compiled); "
            f"{(limit - in_use) / 2**30:,.2f} GiB of {limit / 2**30:,.2f} GiB free per device "
            f"-> {chunk // num_devices} run(s) per device"
        )
    return chunk
