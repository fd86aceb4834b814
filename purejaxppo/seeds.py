"""Several seeds of one config in one program: `purejaxppo train --num-seeds N`.

`train_seeds(config, run_dir, num_seeds=8)` trains the seeds `config.seed + k`, k in
[0, N), as ONE compiled program: `vmap` over the `[S]` runs, split over the devices along
`parallel.RUNS_AXIS` (`parallel.make_runs_program`, as `pjp.sweep` does), in jitted
segments of `log_freq` updates so that a progress bar advances. Seed s starts from
`jax.random.key(s)` and computes what `purejaxppo train --seed s` computes (to float
tolerance: batching may change the order of float sums; tests/test_train_seeds.py).

The run directory:

    <run_dir>/
      config.yaml          the config (its `seed` is the first seed)
      seeds.yaml           the seeds, their number, the devices they were split over
      metrics.csv          every seed's rows (long format): seed, update, every metric
      summary.csv          final return per seed (and its first non-finite update,
                           0 for none); then rows mean, std, iqm, min, max over seeds
      learning_curve.png   mean episode return over the seeds, a ±1 std band and a
                           lighter min-max band, against env steps (and the same for
                           value loss, entropy, approx KL: `plot_seeds`)
      seed_<s>/            a single-run directory per seed, as `purejaxppo train --seed s`
                           writes it: config.yaml (seed s), metrics.csv,
                           checkpoints/last/<update>/ (for `purejaxppo eval`,
                           `pjp.Policy.load`, `export`, and `purejaxppo train --resume
                           <run_dir>/seed_<s>`); its learning_curve.png only with
                           `seed_plots=True` (one plot costs ~0.5 s)

The driver features of one run that work per update outside the program (evaluation,
videos, datasets, logging sinks other than csv, resuming) and host envs (which cannot
run under `vmap`) are refused for N > 1 before anything is computed (`check_seeds`).

This module imports JAX's heavy parts (envs, networks) only inside `train_seeds`, so
that the command line can validate a request before it sets the CPU device count.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import yaml

from purejaxppo import rundir
from purejaxppo.config import Hyperparams, PPOConfig

__all__ = ["SeedsResult", "check_seeds", "plot_seeds", "summarize_seeds", "train_seeds"]

#: Rows of `summary.csv` after the per-seed rows, in order.
AGGREGATES = ("mean", "std", "iqm", "min", "max")


class SeedsResult(NamedTuple):
    """What `train_seeds` returns.

    Attributes:
      run_dir: the run directory written.
      seeds: the seeds, `[S]`, in run order.
      metrics: one row per seed x update: columns `seed`, `update`, every metric.
      summary: one row per seed (`seed`, `final_return`, `diverged`), then the rows
        `AGGREGATES` (the `seed` column holds their names), as in `summary.csv`.
      final_returns: float64 `[S]`, mean episode return of each seed's last 10 updates
        (NaN-aware, as `purejaxppo train` prints).
      diverged: seed -> first update (1-based) with a NaN / Inf loss or parameter, for
        the seeds that diverged only.
      runner_state: the final `RunnerState` of every seed, numpy leaves with a leading
        `[S]` axis (and a typed key `[S]`); a diverged seed's holds its non-finite values.
      num_devices: devices the seeds were split over.
    """

    run_dir: Path
    seeds: tuple[int, ...]
    metrics: pd.DataFrame
    summary: pd.DataFrame
    final_returns: np.ndarray
    diverged: dict[int, int]
    runner_state: Any
    num_devices: int


def check_seeds(
    config: PPOConfig,
    num_seeds: int,
    *,
    devices: int | None = None,
    resume: bool = False,
) -> list[int]:
    """Returns the seeds `config.seed + k`, k in [0, num_seeds), after checking that
    the request can run as one program; imports nothing heavy and starts no JAX backend.

    Raises:
      ValueError: naming the command-line flag and its value, for `num_seeds` < 1, seeds
        outside [0, 2**32), `devices` < 1, more devices than seeds, `devices` with a
        single seed, and for N > 1 together with `resume`, `eval_freq`, `video_freq`,
        `collect_freq` or a logger other than csv. (Host envs are refused by
        `train_seeds`, which knows the env suites.)
    """
    if isinstance(num_seeds, bool) or not isinstance(num_seeds, (int, np.integer)):
        raise ValueError(f"--num-seeds {num_seeds!r}: must be an integer >= 1")
    if num_seeds < 1:
        raise ValueError(f"--num-seeds {num_seeds}: must be >= 1")
    if devices is not None:
        if devices < 1:
            raise ValueError(f"--devices {devices}: must be >= 1")
        if num_seeds == 1:
            raise ValueError(
                f"--devices {devices}: splits the seeds of --num-seeds N > 1 over devices; "
                "a single run uses one device"
            )
        if devices > num_seeds:
            raise ValueError(
                f"--devices {devices} is more than --num-seeds {num_seeds}: every device "
                "needs at least one seed"
            )
    seeds = [config.seed + k for k in range(num_seeds)]
    if seeds[-1] >= 2**32:
        raise ValueError(
            f"--num-seeds {num_seeds} with --seed {config.seed}: the seeds "
            f"{seeds[0]}..{seeds[-1]} must lie in [0, 2**32)"
        )
    if num_seeds == 1:
        return seeds
    flag = f"--num-seeds {num_seeds}"
    if resume:
        raise ValueError(
            f"--resume cannot be combined with {flag}: every seed directory is a single "
            "run, resume them one at a time (purejaxppo train --resume RUN_DIR/seed_<s>)"
        )
    afterwards = {
        "eval_freq": ("evaluation during training", "purejaxppo eval RUN_DIR/seed_<s>"),
        "video_freq": ("videos during training", "purejaxppo eval RUN_DIR/seed_<s> --video F"),
        "collect_freq": ("datasets during training", "purejaxppo collect RUN_DIR/seed_<s>"),
    }
    for field, (what, instead) in afterwards.items():
        value = getattr(config, field)
        if value:
            raise ValueError(
                f"--{field.replace('_', '-')} {value} ({what}) is not available with {flag}; "
                f"set it to 0 and run `{instead}` afterwards"
            )
    others = [name for name in config.loggers if name != "csv"]
    if others:
        raise ValueError(
            f"--logger {','.join(others)} (loggers={list(config.loggers)}) is not available "
            f"with {flag}: only csv (metrics.csv); `purejaxppo sweep` sends one run per seed "
            "to tensorboard / wandb / mlflow / jsonl"
        )
    return seeds


def _write_atomic(path: Path, write: Callable[[Path], Any]) -> None:
    """`write(temporary path)`, then renames it to `path` (readers never see half a file).
    The temporary name keeps the suffix, for writers that infer the format from it."""
    partial = path.with_name(f".{path.name}.partial{path.suffix}")
    write(partial)
    os.replace(partial, path)


def _write_yaml(path: Path, data: Any) -> None:
    _write_atomic(path, lambda p: p.write_text(yaml.safe_dump(data, sort_keys=False)))


def _write_csv(path: Path, frame: pd.DataFrame) -> None:
    _write_atomic(path, lambda p: frame.to_csv(p, index=False))


def default_seeds_dir(config: PPOConfig, num_seeds: int, root: str | Path = "runs") -> Path:
    """Creates `runs/<env>-<YYYYmmdd-HHMMSS>-seeds<first>-<last>-<random>`."""
    name = config.env_name.replace(":", "_")
    first, last = config.seed, config.seed + num_seeds - 1
    stem = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-seeds{first}-{last}"
    return rundir.make_unique_dir(root, stem)


def train_seeds(
    config: PPOConfig,
    run_dir: str | Path | None,
    num_seeds: int,
    devices: Any = None,
    progress: bool = True,
    overwrite: bool = False,
    *,
    plot: bool = True,
    seed_plots: bool = False,
    verbose: bool = True,
) -> SeedsResult:
    """Trains `num_seeds` seeds of `config` as one program and writes one run directory.

    Args:
      config: the configuration of every seed; seed k is `config.seed + k`.
      run_dir: output directory (module docstring for its layout); None creates
        `runs/<env>-<time>-seeds<first>-<last>-<random>` after validation. A non-empty
        one is refused unless `overwrite` (its contents are removed after validation).
      num_seeds: S >= 1.
      devices: None (the first min(S, local device count) local devices), an int (the
        first n local devices) or a list of devices. S is padded to a multiple of the
        device count with copies of the last seed, whose results are dropped.
      progress: show a tqdm bar (updates, env steps per seed, steps/s of all seeds,
        mean latest return).
      overwrite: replace the contents of a non-empty `run_dir` that holds a run.
      plot: write the top-level `learning_curve.png` (`plot_seeds`).
      seed_plots: also write each seed's `learning_curve.png` (`runner.plot_learning_curve`,
        ~0.5 s a seed; off by default, the top-level plot shows every seed's spread).
      verbose: print (to stderr) how the seeds are split over the devices.

    Checkpoints (per seed, as `purejaxppo train` writes them) are saved every
    `config.save_freq` updates, every `config.save_minutes` minutes, and at the end. A
    seed whose losses or parameters turn NaN / Inf is marked in `diverged` and
    `summary.csv`; its last finite state is its newest checkpoint (none if no update was
    finite), and the other seeds train on.

    Returns:
      `SeedsResult`.

    Raises:
      ValueError: before anything is compiled or written: `check_seeds`'s errors, a host
        env ("gymnasium:<id>", which cannot run under `vmap`), a bad env / network config
        (`make_train_fns`), more devices than there are local ones, or a non-empty
        `run_dir` (`rundir.DirectoryNotEmpty`).
    """
    import jax
    from jax.sharding import PartitionSpec as P
    from tqdm.auto import tqdm

    from purejaxppo import parallel
    from purejaxppo.checkpoint import save_checkpoint
    from purejaxppo.envs.host import check_jittable_env
    from purejaxppo.guards import first_nonfinite_update, nonfinite_leaf
    from purejaxppo.runner import final_return, plot_learning_curve
    from purejaxppo.train import make_train_fns

    # Validate everything before anything on disk changes.
    seeds = check_seeds(config, num_seeds, devices=devices if isinstance(devices, int) else None)
    check_jittable_env(
        config.env_name, f"--num-seeds {num_seeds} (the seeds vmapped in one program)"
    )
    if run_dir is not None:
        run_dir = Path(run_dir)
        rundir.check_fresh(run_dir, overwrite)
    fns = make_train_fns(config)
    names = fns.metric_names
    if devices is None:
        devices = min(num_seeds, len(jax.local_devices()))
    mesh = parallel.make_mesh(devices, parallel.RUNS_AXIS)
    num_devices = mesh.devices.size
    num_runs = parallel.pad_runs(num_seeds, num_devices)
    seed_configs = [config.replace(seed=seed) for seed in seeds]

    if run_dir is None:
        run_dir = default_seeds_dir(config, num_seeds)
    elif overwrite:
        rundir.clear(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    seed_dirs = [run_dir / f"seed_{seed}" for seed in seeds]
    _write_yaml(run_dir / "config.yaml", config.to_dict())
    _write_yaml(
        run_dir / "seeds.yaml",
        {
            "seeds": seeds,
            "num_seeds": num_seeds,
            "num_devices": num_devices,
            "devices": [str(d) for d in mesh.devices.flat],
            "seeds_per_device": num_runs // num_devices,
            "padding_runs": num_runs - num_seeds,
        },
    )
    for seed_dir, seed_config in zip(seed_dirs, seed_configs, strict=True):
        seed_dir.mkdir(exist_ok=True)
        _write_yaml(seed_dir / "config.yaml", seed_config.to_dict())
    if verbose:
        padding = f", {num_runs - num_seeds} padding run(s)" if num_runs > num_seeds else ""
        print(
            f"train: {num_seeds} seeds ({seeds[0]}..{seeds[-1]}) in one program on "
            f"{num_devices} device(s), {num_runs // num_devices} per device{padding}",
            file=sys.stderr,
        )

    # Inputs: run r trains seed min(r, S - 1) (the padding repeats the last seed).
    pick = np.minimum(np.arange(num_runs), num_seeds - 1)
    key_data = np.stack([np.asarray(jax.random.key_data(jax.random.key(s))) for s in seeds])
    hparams = jax.tree.map(
        lambda x: np.repeat(np.asarray(x)[None], num_runs, axis=0),
        Hyperparams.from_config(config),
    )
    key_data, hparams = parallel.to_global((key_data[pick], hparams), mesh, P(parallel.RUNS_AXIS))
    init_program = parallel.make_runs_program(
        parallel.batch_runs(fns.init, lambda runner: runner), mesh
    )
    programs: dict[int, Callable] = {}  # segment length -> compiled program

    def run_program(length: int) -> Callable:
        """`(runner [R], hparams [R]) -> (runner, metrics [R, length], params finite [R])`."""

        def run(runner: Any, hp: Hyperparams) -> Any:
            runner, metrics = fns.run(runner, hp, length)
            return runner, metrics, _all_finite(runner.train_state.params)

        if length not in programs:
            programs[length] = parallel.make_runs_program(jax.vmap(run), mesh)
        return programs[length]

    history: list[dict[str, np.ndarray]] = []  # per segment: name -> [S, length]
    diverged: dict[int, tuple[int, str]] = {}  # seed index -> (update, what)
    saved_step = [0] * num_seeds  # newest "last" checkpoint of each seed (0: none)

    def seed_history(k: int, segments: int | None = None) -> dict[str, np.ndarray]:
        parts = history[:segments]
        return {name: np.concatenate([part[name][k] for part in parts]) for name in names}

    def seed_table(k: int) -> pd.DataFrame:
        frame = pd.DataFrame(seed_history(k))
        frame.insert(0, "update", np.arange(1, len(frame) + 1))
        return frame

    def to_host(state: Any) -> Any:
        """The runs' state as numpy arrays `[R, ...]` (one transfer; slicing a seed out of
        the devices' arrays would compile a gather per leaf), the key as key data."""
        return parallel.to_host(state.replace(key=jax.random.key_data(state.key)))

    def seed_state(host: Any, k: int) -> Any:
        state = jax.tree.map(lambda x: x[k], host)
        return state.replace(key=jax.random.wrap_key_data(state.key))

    def save(k: int, host: Any, segments: int | None = None) -> None:
        state = seed_state(host, k)
        save_checkpoint(seed_dirs[k], state, seed_history(k, segments), seed_configs[k])
        _write_csv(seed_dirs[k] / "metrics.csv", seed_table(k).iloc[: int(state.update_step)])
        saved_step[k] = int(state.update_step)

    runner = init_program(key_data)
    done = 0
    start, last_save_time = time.perf_counter(), time.monotonic()
    bar = tqdm(
        total=config.num_updates,
        unit="update",
        disable=not progress,
        desc=f"{config.env_name} x{num_seeds} seeds (compiling)",
        dynamic_ncols=True,
    )
    with bar:
        while done < config.num_updates:
            length = min(config.log_freq, config.num_updates - done)
            if config.save_freq:
                length = min(length, config.save_freq - done % config.save_freq)
            previous = runner  # a diverged seed keeps its last finite state
            runner, metrics, finite = run_program(length)(runner, hparams)
            metrics, finite = parallel.to_host((metrics, finite))
            metrics = {name: metrics[name][:num_seeds] for name in names}
            history.append(metrics)
            for k in range(num_seeds):
                if k in diverged:
                    continue
                bad = first_nonfinite_update({n: metrics[n][k] for n in names}, done + 1)
                if bad is None and not finite[k]:
                    params = seed_state(to_host(runner), k).train_state.params
                    bad = (done + length, f"params {nonfinite_leaf(params)}")
                if bad is not None:
                    diverged[k] = bad
                    if done > saved_step[k]:  # keep the last finite state, as train does
                        save(k, to_host(previous), len(history) - 1)
            done += length
            at_save = bool(config.save_freq) and done % config.save_freq == 0
            at_save |= bool(config.save_minutes) and (
                time.monotonic() - last_save_time >= 60 * config.save_minutes
            )
            if at_save or done == config.num_updates:
                host = to_host(runner)
                for k in range(num_seeds):
                    if k not in diverged:
                        save(k, host)
                last_save_time = time.monotonic()
            latest = metrics["episode_return"][:, -1]
            bar.set_description(f"{config.env_name} x{num_seeds} seeds")
            bar.set_postfix(
                env_steps=f"{done * config.batch_size:,}",
                sps=f"{done * config.batch_size * num_seeds / (time.perf_counter() - start):,.0f}",
                ret=f"{np.nanmean(latest):.1f}" if np.isfinite(latest).any() else "n/a",
                refresh=False,
            )
            bar.update(length)

    # Files: each seed's table (the full one, NaN rows of a diverged seed included), then
    # the top level.
    tables = [seed_table(k) for k in range(num_seeds)]
    for k, table in enumerate(tables):
        _write_csv(seed_dirs[k] / "metrics.csv", table)
        if seed_plots:
            _write_atomic(
                seed_dirs[k] / "learning_curve.png",
                lambda p, table=table, k=k: plot_learning_curve(
                    table, p, title=f"{config.env_name}, seed {seeds[k]}"
                ),
            )
    metrics_table = pd.concat(
        [table.assign(seed=seed) for seed, table in zip(seeds, tables, strict=True)],
        ignore_index=True,
    )
    metrics_table = metrics_table[["seed", "update", *names]]
    finals = np.array([final_return(t["episode_return"].to_numpy()) for t in tables])
    first_bad = {seeds[k]: update for k, (update, _) in diverged.items()}
    summary = summarize_seeds(seeds, finals, first_bad)
    _write_csv(run_dir / "metrics.csv", metrics_table)
    _write_csv(run_dir / "summary.csv", summary)
    if plot:
        _write_atomic(
            run_dir / "learning_curve.png",
            lambda p: plot_seeds(metrics_table, p, title=f"PPO on {config.env_name}"),
        )
    if diverged and verbose:
        details = "; ".join(
            f"seed {seeds[k]} at update {update} ({what}; "
            + (f"last finite state: update {saved_step[k]})" if saved_step[k] else "no checkpoint)")
            for k, (update, what) in sorted(diverged.items())
        )
        print(
            f"train: {len(diverged)} of {num_seeds} seeds diverged (NaN / Inf): {details}",
            file=sys.stderr,
        )
    return SeedsResult(
        run_dir=run_dir,
        seeds=tuple(seeds),
        metrics=metrics_table,
        summary=summary,
        final_returns=finals,
        diverged=first_bad,
        runner_state=seed_state(jax.tree.map(lambda x: x[:num_seeds], host), slice(None)),
        num_devices=num_devices,
    )


def _all_finite(params: Any) -> Any:
    """Scalar bool: every floating-point leaf of one run's `params` is finite (traced)."""
    import jax
    import jax.numpy as jnp

    flags = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree.leaves(params)
        if jnp.issubdtype(x.dtype, jnp.inexact)
    ]
    return jnp.all(jnp.stack(flags)) if flags else jnp.bool_(True)


def summarize_seeds(
    seeds: Sequence[int], final_returns: np.ndarray, diverged: dict[int, int] | None = None
) -> pd.DataFrame:
    """`summary.csv`: a row per seed (`seed`, `final_return`, `diverged`: first non-finite
    update, 0 for none), then the rows `AGGREGATES` over the seeds' finite final returns
    (std with ddof=0, IQM = mean of the middle 50%, as `pjp.sweep`'s summary); their
    `diverged` cell counts the diverged seeds."""
    from purejaxppo.sweeps import iqm

    diverged = diverged or {}
    values = np.asarray(final_returns, np.float64)
    finite = values[~np.isnan(values)]

    def stat(fn: Callable[[np.ndarray], Any]) -> float:
        return float(fn(finite)) if finite.size else math.nan

    rows = [
        {"seed": str(seed), "final_return": float(value), "diverged": int(diverged.get(seed, 0))}
        for seed, value in zip(seeds, values, strict=True)
    ]
    stats = {
        "mean": stat(np.mean),
        "std": stat(np.std),
        "iqm": iqm(values),
        "min": stat(np.min),
        "max": stat(np.max),
    }
    rows += [
        {"seed": name, "final_return": stats[name], "diverged": len(diverged)}
        for name in AGGREGATES
    ]
    return pd.DataFrame(rows)


#: Panels of `plot_seeds`: (metric, axis label); the first is the large one.
PLOT_PANELS = (
    ("episode_return", "episode return"),
    ("v_loss", "value loss"),
    ("entropy", "policy entropy (nats)"),
    ("approx_kl", "approx KL"),
)


def plot_seeds(metrics: pd.DataFrame, path: str | Path, title: str = "") -> None:
    """Writes a PNG of the seeds' learning curves against env steps: the mean episode
    return over the seeds with a band of ±1 std (ddof=0) and a lighter min-max band, and
    below it the same for the value loss, the policy entropy and the approx KL.
    NaN-aware: an update where no episode of a seed ended leaves that seed out.

    Args:
      metrics: the long table of `train_seeds` (columns seed, update, env_steps and the
        metrics of `PLOT_PANELS`).
      path: the PNG to write (the format follows its suffix).
      title: the figure's title.
    """
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = metrics.groupby("update")["env_steps"].first()
    num_seeds = metrics["seed"].nunique()
    fig = plt.figure(figsize=(10, 8))
    grid = fig.add_gridspec(2, 3, height_ratios=(1.6, 1))
    axes = [fig.add_subplot(grid[0, :])] + [fig.add_subplot(grid[1, i]) for i in range(3)]
    for ax, (column, label) in zip(axes, PLOT_PANELS, strict=True):
        wide = metrics.pivot(index="update", columns="seed", values=column)
        x = steps.loc[wide.index].to_numpy()
        values = wide.to_numpy(np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN updates
            mean, std = np.nanmean(values, axis=1), np.nanstd(values, axis=1)
            low, high = np.nanmin(values, axis=1), np.nanmax(values, axis=1)
        keep = ~np.isnan(mean)
        (line,) = ax.plot(x[keep], mean[keep], lw=1.5, label=f"mean over {num_seeds} seeds")
        color = line.get_color()
        ax.fill_between(
            x[keep], (mean - std)[keep], (mean + std)[keep], color=color, alpha=0.3, lw=0,
            label="±1 std",
        )  # fmt: skip
        ax.fill_between(x[keep], low[keep], high[keep], color=color, alpha=0.12, lw=0,
                        label="min-max")  # fmt: skip
        ax.set_ylabel(label)
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize=9)
    fig.suptitle(title or "PPO")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
