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

import dataclasses
import functools
import math
import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jax.sharding import PartitionSpec as P

from purejaxppo import parallel
from purejaxppo.config import TRACED_FIELDS, Hyperparams, PPOConfig
from purejaxppo.guards import LOSS_METRICS
from purejaxppo.runner import final_return
from purejaxppo.sweep_settings import (  # noqa: F401 - public names
    DISTRIBUTIONS,
    UNSWEEPABLE,
    check_field,
    expand_grid,
    make_settings,
    sample_random,
)
from purejaxppo.train import METRICS, make_train_fns


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """What `sweep` returns.

    Attributes:
      table: one row per run x logged update (this process's runs in a multi-host sweep):
        columns `run`, `setting`, `seed`, one column `config/<field>` per swept field,
        `update`,
        `env_steps` and every metric of `METRICS`.
      runs: one row per run (all processes): `run`, `setting`, `seed`, `config/<field>`,
        `final_return` (mean episode return over the run's last 10 updates), `diverged`
        (first update with a NaN / Inf loss, 0 if none).
      summary: one row per setting: `config/<field>`, `num_seeds`, `num_diverged`, and the
        mean, std, IQM
        (mean of the middle 50%, Agarwal et al. 2021), min and max of `final_return`
        over seeds.
      curves: episode return per run and update for all runs (all processes): columns
        `run`, `setting`, `update`, `env_steps`, `episode_return` (for `plot_sweep`).
      settings: the swept settings, in setting order (dicts of field -> value).
      num_compiles: compiled training programs (one per static group).
      num_devices: devices the runs were split over (all processes).
    """

    table: pd.DataFrame
    runs: pd.DataFrame
    summary: pd.DataFrame
    curves: pd.DataFrame
    settings: list[dict[str, Any]]
    num_compiles: int
    num_devices: int


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


# ----------------------------------------------------------------------- the sweep
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
        (GPUs), as many as fit in 70% of it (measured by compiling for one run per device).
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
        positive multiple of the device count; or for a chunk file in `progress_dir`
        from another sweep.

    A run whose losses turn NaN / Inf is marked in `runs` (`diverged`: the first such
    update, 0 for none) and counted in `summary` (`num_diverged`); the other runs are
    unaffected.
    """
    from purejaxppo.envs.host import check_jittable_env

    check_jittable_env(config.env_name, "sweep (runs vmapped over seeds and settings)")
    settings, run_configs = make_settings(config, grid, random, num_samples, random_seed)
    seed_list = _seed_list(seeds)
    if log_every < 1:
        raise ValueError(f"log_every={log_every}: must be >= 1")
    mesh = parallel.make_mesh(devices, parallel.RUNS_AXIS)
    num_devices = mesh.devices.size
    if max_runs_per_chunk is not None and (
        max_runs_per_chunk < 1 or max_runs_per_chunk % num_devices
    ):
        raise ValueError(
            f"max_runs_per_chunk={max_runs_per_chunk}: must be a positive multiple of the "
            f"number of devices ({num_devices}) so that every device gets the same runs"
        )
    swept = list(dict.fromkeys(name for s in settings for name in s))

    # Group runs by the static part of their configuration: one compile per group.
    groups: dict[tuple, list[int]] = {}
    for index, cfg in enumerate(run_configs):
        static = tuple(
            (f.name, repr(getattr(cfg, f.name)))
            for f in dataclasses.fields(PPOConfig)
            if f.name not in TRACED_FIELDS
        )
        groups.setdefault(static, []).append(index)
    num_runs = len(settings) * len(seed_list)
    _warn_one_cpu_device(mesh, num_runs)
    if verbose and jax.process_index() == 0:
        print(
            f"sweep: {num_runs} runs = {len(settings)} setting(s) x {len(seed_list)} seed(s) "
            f"in {len(groups)} static group(s) -> {len(groups)} compile(s) of the training "
            f"program, on {num_devices} device(s)",
            file=sys.stderr,
        )

    from tqdm.auto import tqdm

    total = sum(run_configs[g[0]].num_updates * len(g) * len(seed_list) for g in groups.values())
    bar = tqdm(
        total=total,
        unit="update",
        desc="sweep",
        disable=not progress or jax.process_index() != 0,
        dynamic_ncols=True,
    )
    tables, curves, diverged = [], [], {}
    start = time.perf_counter()
    if progress_dir is not None:
        Path(progress_dir).mkdir(parents=True, exist_ok=True)
    with bar:
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
            )
            tables.append(table)
            curves.append(curve)
            diverged.update(group_diverged)

    table = pd.concat(tables, ignore_index=True).sort_values(["run", "update"], kind="stable")
    curves = pd.concat(curves, ignore_index=True).sort_values(["run", "update"], kind="stable")
    runs_frame = _runs_frame(curves, settings, seed_list, swept, diverged)
    return SweepResult(
        table=table.reset_index(drop=True),
        runs=runs_frame,
        summary=summarize(runs_frame, swept),
        curves=curves.reset_index(drop=True),
        settings=settings,
        num_compiles=len(groups),
        num_devices=num_devices,
    )


_WARNED_ONE_CPU_DEVICE = False


def _warn_one_cpu_device(mesh, num_runs: int) -> None:
    """Warns once per process when several runs go to one CPU device of a multi-core
    machine (XLA:CPU then runs them on about one core)."""
    global _WARNED_ONE_CPU_DEVICE
    from purejaxppo.platform import usable_cores

    cores = usable_cores()
    devices = list(mesh.devices.flat)
    if (
        _WARNED_ONE_CPU_DEVICE
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
    verbose, start, saving,
):  # fmt: skip
    """Trains one static group's runs in chunks (or loads the chunks `saving = (dir,
    group index)` holds); returns (table rows, curves, {run id: diverged update})."""
    fns = make_train_fns(config, networks=networks)
    num_devices = mesh.devices.size
    num_updates = config.num_updates

    if progress:
        segment = _largest_divisor_at_most(num_updates, max(1, math.ceil(num_updates / 20)))
        init_program = parallel.make_runs_program(
            parallel.batch_runs(fns.init, lambda runner: runner), mesh
        )
        run_program = parallel.make_runs_program(
            jax.vmap(lambda runner, hp: fns.run(runner, hp, segment)), mesh
        )
    else:
        segment = num_updates
        train_program = parallel.make_runs_program(_train_runs(fns, num_updates), mesh)

    key_data = np.stack(
        [np.asarray(jax.random.key_data(jax.random.key(seed))) for *_, seed in runs]
    )
    hparams = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *hparams_list)
    chunk = _chunk_size(len(runs), num_devices, max_chunk, mesh, fns, config, key_data, hparams)
    if verbose and jax.process_index() == 0 and chunk < len(runs):
        print(
            f"sweep: group of {len(runs)} runs in chunks of {chunk}",
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
            local, local_index, all_returns, bad = _load_chunk(path, run_ids)
            bar.update(num_updates * real)
            tables.append(_table_rows(local, local_index, runs, settings, swept, log_every))
            curves.append(_curve_rows(all_returns, first, runs, config))
            diverged.update(zip(run_ids.tolist(), _first_true(bad).tolist(), strict=True))
            continue
        size = chunk if len(runs) > chunk else parallel.pad_runs(real, num_devices)
        pick = np.minimum(np.arange(first, first + size), first + real - 1)  # pad: repeat
        inputs = parallel.to_global(
            (key_data[pick], jax.tree.map(lambda x: x[pick], hparams)),  # noqa: B023
            mesh,
            P(parallel.RUNS_AXIS),
        )
        pieces = []
        if progress:
            runner = init_program(inputs[0])
            for _ in range(num_updates // segment):
                runner, metrics = run_program(runner, inputs[1])
                pieces.append(_collect(metrics, first, real))
                bar.update(segment * real)
                bar.set_postfix(
                    sps=f"{bar.n * config.batch_size / (time.perf_counter() - start):,.0f}",
                    refresh=False,
                )
        else:
            pieces.append(_collect(train_program(*inputs), first, real))
            bar.update(num_updates * real)
        local = {name: np.concatenate([p[0][name] for p in pieces], axis=1) for name in METRICS}
        local_index = pieces[0][1]
        all_returns = np.concatenate([p[2] for p in pieces], axis=1)
        bad = np.concatenate([p[3] for p in pieces], axis=1)
        if path is not None:
            _save_chunk(path, run_ids, local, local_index, all_returns, bad)
        tables.append(_table_rows(local, local_index, runs, settings, swept, log_every))
        curves.append(_curve_rows(all_returns, first, runs, config))
        diverged.update(zip(run_ids.tolist(), _first_true(bad).tolist(), strict=True))
    tables = pd.concat(tables, ignore_index=True)
    return tables, pd.concat(curves, ignore_index=True), diverged


def _first_true(bad: np.ndarray) -> np.ndarray:
    """`[R, U]` bool -> `[R]`: first update (1-based) that is True, 0 where none is."""
    return np.where(bad.any(axis=1), np.argmax(bad, axis=1) + 1, 0)


def _save_chunk(path, run_ids, local, local_index, returns, bad):
    """Writes one chunk's results atomically (a temporary file renamed into place)."""
    arrays = {f"metric/{name}": value for name, value in local.items()}
    arrays.update(run_ids=run_ids, local_index=local_index, returns=returns, bad=bad)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as file:
        np.savez(file, **arrays)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)


def _load_chunk(path, run_ids):
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
    local = {name: arrays[f"metric/{name}"] for name in METRICS}
    return local, arrays["local_index"], arrays["returns"], arrays["bad"]


def _train_runs(fns, num_updates):
    """Whole runs, metrics only: `(key_data [R, 2], hparams [R]) -> metrics [R, U]`."""
    return parallel.batch_runs(fns.init, lambda runner, hp: fns.run(runner, hp, num_updates)[1])


def _collect(metrics, first, real):
    """(this process's metric rows, their chunk-relative indices, all runs' returns, all
    runs' non-finite loss flags `[real, U]`)."""
    index, _ = parallel.local_rows(metrics["env_steps"])
    keep = index < real
    local = {name: parallel.local_rows(metrics[name])[1][keep] for name in METRICS}
    returns = parallel.to_host(metrics["episode_return"])[:real]
    bad = parallel.to_host(_nonfinite_losses({n: metrics[n] for n in LOSS_METRICS}))[:real]
    return local, index[keep] + first, returns, bad


@jax.jit
def _nonfinite_losses(losses):
    """`[R, U]` bool: any of `LOSS_METRICS` is NaN / Inf (computed where the runs live)."""
    return functools.reduce(jnp.logical_or, [~jnp.isfinite(v) for v in losses.values()])


def _chunk_size(num_runs, num_devices, max_chunk, mesh, fns, config, key_data, hparams):
    if max_chunk is not None:
        return max_chunk
    limit = parallel.device_bytes_limit(mesh)
    if limit is None:
        return parallel.pad_runs(num_runs, num_devices)
    # Measure one run per device: compile the whole-run program for D runs, read its
    # memory, and fill `fraction` of the device with as many runs as fit.
    program = parallel.make_runs_program(_train_runs(fns, config.num_updates), mesh)
    pick = np.zeros(num_devices, dtype=int)
    args = parallel.to_global(
        (key_data[pick], jax.tree.map(lambda x: x[pick], hparams)), mesh, P(parallel.RUNS_AXIS)
    )
    stats = program.lower(*args).compile().memory_analysis()
    per_run = stats.temp_size_in_bytes + stats.argument_size_in_bytes + stats.output_size_in_bytes
    chunk = parallel.runs_per_chunk_for_memory(per_run, limit, num_devices)
    return min(chunk, parallel.pad_runs(num_runs, num_devices))


def _table_rows(local, local_index, runs, settings, swept, log_every):
    num_updates = local["env_steps"].shape[1]
    updates = np.arange(1, num_updates + 1)
    keep = (updates % log_every == 0) | (updates == num_updates)
    frames = []
    for row, index in enumerate(local_index):
        run_id, setting, seed = runs[index]
        frame = pd.DataFrame({name: local[name][row][keep] for name in METRICS})
        frame.insert(0, "update", updates[keep])
        for position, (name, value) in enumerate(
            [("run", run_id), ("setting", setting), ("seed", seed)]
            + [(column(n), _cell(settings[setting].get(n))) for n in swept]
        ):
            frame.insert(position, name, value)
        frames.append(frame)
    if not frames:
        columns = ["run", "setting", "seed", *map(column, swept), "update", *METRICS]
        return pd.DataFrame(columns=columns)
    frame = pd.concat(frames, ignore_index=True)
    frame["env_steps"] = frame["env_steps"].astype(np.int64)
    return frame


def _curve_rows(returns, first, runs, config):
    num_updates = returns.shape[1]
    updates = np.arange(1, num_updates + 1)
    frames = [
        pd.DataFrame(
            {
                "run": runs[first + row][0],
                "setting": runs[first + row][1],
                "update": updates,
                "env_steps": updates * config.batch_size,
                "episode_return": returns[row],
            }
        )
        for row in range(returns.shape[0])
    ]
    return pd.concat(frames, ignore_index=True)


def column(field: str) -> str:
    """Column name of a swept config field in the sweep's tables: "config/<field>"."""
    return f"config/{field}"


def _cell(value):
    """Table cell for a setting value (tuples/lists as '64x64'-free strings)."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return value


def _runs_frame(curves, settings, seed_list, swept, diverged):
    rows = []
    for run_id, frame in curves.groupby("run", sort=True):
        setting = run_id // len(seed_list)
        row = {"run": run_id, "setting": setting, "seed": seed_list[run_id % len(seed_list)]}
        row.update({column(name): _cell(settings[setting].get(name)) for name in swept})
        row["final_return"] = final_return(frame["episode_return"].to_numpy())
        row["diverged"] = int(diverged.get(run_id, 0))
        rows.append(row)
    return pd.DataFrame(rows)


def iqm(values: np.ndarray) -> float:
    """Interquartile mean: mean of the middle 50% of the sorted values (Agarwal et al.
    2021, "Deep RL at the Edge of the Statistical Precipice"); NaNs are dropped."""
    values = np.sort(np.asarray(values, np.float64))
    values = values[~np.isnan(values)]
    if not values.size:
        return math.nan
    n = len(values)
    middle = values[n // 4 : n - n // 4] if n >= 4 else values
    return float(middle.mean())


def summarize(runs: pd.DataFrame, swept: Sequence[str]) -> pd.DataFrame:
    """Per-setting statistics of `final_return` over seeds (mean, std, IQM, min, max)."""
    rows = []
    for setting, frame in runs.groupby("setting", sort=True):
        values = frame["final_return"].to_numpy(np.float64)
        finite = values[~np.isnan(values)]
        row = {"setting": setting, **{column(n): frame[column(n)].iloc[0] for n in swept}}
        row.update(
            num_seeds=len(values),
            num_diverged=int((frame["diverged"] > 0).sum()) if "diverged" in frame else 0,
            final_return_mean=float(finite.mean()) if finite.size else math.nan,
            final_return_std=float(finite.std()) if finite.size else math.nan,
            final_return_iqm=iqm(values),
            final_return_min=float(finite.min()) if finite.size else math.nan,
            final_return_max=float(finite.max()) if finite.size else math.nan,
        )
        rows.append(row)
    return pd.DataFrame(rows)


def setting_label(row: Mapping[str, Any], swept: Sequence[str]) -> str:
    """'learning_rate=0.0003 ent_coef=0.01' (or 'base config' for no swept fields)."""
    parts = []
    for name in swept:
        value = row[column(name)]
        parts.append(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}")
    return " ".join(parts) or "base config"


def plot_sweep(result: SweepResult, path: str | Path, title: str = "") -> None:
    """Writes a PNG of learning curves: per setting, the mean episode return over seeds
    against env steps, with a band of one standard deviation (NaN-aware)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    swept = list(dict.fromkeys(name for setting in result.settings for name in setting))
    fig, ax = plt.subplots(figsize=(9, 5.5))
    curves = result.curves
    for _, row in result.summary.iterrows():
        frame = curves[curves["setting"] == row["setting"]]
        wide = frame.pivot(index="update", columns="run", values="episode_return")
        steps = frame.groupby("update")["env_steps"].first().loc[wide.index].to_numpy()
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(wide.to_numpy(), axis=1)
                std = np.nanstd(wide.to_numpy(), axis=1)
        keep = ~np.isnan(mean)
        label = f"{setting_label(row, swept)} (IQM {row['final_return_iqm']:.1f})"
        (line,) = ax.plot(steps[keep], mean[keep], lw=1.4, label=label)
        ax.fill_between(
            steps[keep], (mean - std)[keep], (mean + std)[keep], color=line.get_color(), alpha=0.2
        )
    seeds = int(result.summary["num_seeds"].max()) if len(result.summary) else 0
    ax.set_xlabel("env steps")
    ax.set_ylabel(f"episode return (mean ± std over {seeds} seeds)")
    ax.set_title(title or "PPO sweep")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_sweep(
    result: SweepResult, out: str | Path, config: PPOConfig, fmt: str = "csv"
) -> list[Path]:
    """Writes a sweep's files into `out` and returns the paths this process wrote.

    Every process writes its own rows of the table: `table.csv` (one process) or
    `table.part-<i>-of-<n>.csv` (process i of n); `fmt="parquet"` writes `.parquet`
    instead. Process 0 also writes `runs.csv`, `summary.csv`, `learning_curves.png`
    (`plot_sweep`) and `sweep.yaml` (base config, settings, seeds, compiles, devices).

    Raises:
      ValueError: for an unknown `fmt`.
    """
    import yaml

    if fmt not in ("csv", "parquet"):
        raise ValueError(f"fmt={fmt!r}: must be 'csv' or 'parquet'")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    count, index = jax.process_count(), jax.process_index()
    name = "table" if count == 1 else f"table.part-{index}-of-{count}"
    table_path = out / f"{name}.{fmt}"
    if fmt == "csv":
        result.table.to_csv(table_path, index=False)
    else:
        result.table.to_parquet(table_path, index=False)
    written = [table_path]
    if index == 0:
        result.runs.to_csv(out / "runs.csv", index=False)
        result.summary.to_csv(out / "summary.csv", index=False)
        plot_sweep(result, out / "learning_curves.png", title=f"PPO on {config.env_name}")
        spec = {
            "config": config.to_dict(),
            "settings": [{k: _cell(v) for k, v in s.items()} for s in result.settings],
            "seeds": sorted({int(s) for s in result.runs["seed"]}),
            "num_compiles": result.num_compiles,
            "num_devices": result.num_devices,
            "num_processes": count,
        }
        (out / "sweep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        written += [out / n for n in ("runs.csv", "summary.csv", "learning_curves.png")]
        written.append(out / "sweep.yaml")
    return written


def log_sweep(
    result: SweepResult, out: str | Path, config: PPOConfig, loggers: Sequence[str]
) -> list[Path]:
    """Sends a finished sweep to logging sinks: one run per (setting, seed).

    What W&B and TensorBoard users expect of a sweep: each run is its own run in the
    tool, grouped by the sweep. Run k of this process's table goes to
    `out/runs/run_<k>/` (TensorBoard: point it at `out/runs` to see them side by side);
    W&B runs share the group `out`'s name and MLflow runs the tags; every run gets its
    resolved config (the base config with its setting and seed) as hyperparameters, the
    setting and seed as tags, and every per-update metric keyed by env steps.

    Args:
      result, config: the sweep (`sweep(config, ...)`) and its base config.
      out: the sweep's output directory.
      loggers: sink names (`purejaxppo.sinks.LOGGERS`); "csv" is skipped (the tables are
        CSV already).

    Returns:
      The run directories written.

    Raises:
      ValueError / ImportError: as `sinks.make_sinks`, before anything is written.
    """
    from purejaxppo.sinks import check_sinks, make_sinks

    names = [name for name in loggers if name != "csv"]
    if not names:
        return []
    check_sinks(names)
    out = Path(out)
    metric_names = [name for name in METRICS if name in result.table.columns]
    swept = [c for c in result.table.columns if c.startswith("config/")]
    written = []
    for run_id, rows in result.table.groupby("run", sort=True):
        first = rows.iloc[0]
        setting = {column.removeprefix("config/"): first[column] for column in swept}
        setting = {k: v.item() if hasattr(v, "item") else v for k, v in setting.items()}
        seed = int(first["seed"])
        run_config = {**config.to_dict(), **setting, "seed": seed}
        run_dir = out / "runs" / f"run_{int(run_id):04d}"
        tags = {**setting, "seed": seed, "setting": int(first["setting"])}
        with make_sinks(names, run_dir, name=f"{out.name}-run{int(run_id)}", group=out.name,
                        tags=tags) as sinks:  # fmt: skip
            sinks.log_config(run_config)
            for _, row in rows.iterrows():
                metrics = {name: float(row[name]) for name in metric_names}
                sinks.log_metrics(int(row["env_steps"]), metrics)
        written.append(run_dir)
    return written
