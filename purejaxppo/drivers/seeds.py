"""Several seeds of one config in one program: `purejaxppo train --num-seeds N`.

`train_seeds(config, run_dir, num_seeds=8)` trains the seeds `config.seed + k`, k in
[0, N), as ONE compiled program: `vmap` over the `[S]` runs, split over the devices along
`parallel.RUNS_AXIS` (`parallel.make_runs_program`, as `pjp.sweep` does), in jitted
segments of `log_freq` updates so that a progress bar advances, compiled ahead and so
sized in seconds as a single run's (`segments.SegmentSizer`: a cap only splits
segments, the numbers stay bitwise the same, tests/test_segments.py). Seed s starts from
`jax.random.key(s)` and computes what `purejaxppo train --seed s` computes (to float
tolerance: batching may change the order of float sums; tests/test_train_seeds.py).

The run directory:

    <run_dir>/
      config.yaml          the config (its `seed` is the first seed)
      seeds.yaml           the seeds, their number, the devices they were split over
      .purejaxppo-fingerprint.json
                           what decides the results (config, seeds, layout over the
                           devices; `drivers.fingerprints`), compared on --resume
      metrics.csv          every seed's rows (long format): seed, update, every metric
      summary.csv          final return per seed (and its first non-finite update,
                           0 for none); then rows mean, std, iqm, min, max over seeds
      learning_curve.png   mean episode return over the seeds, a ±1 std band and a
                           lighter min-max band, against env steps (and the same for
                           value loss, entropy, approx KL: `drivers.plots.plot_seeds`)
      seed_<s>/            a single-run directory per seed, as `purejaxppo train --seed s`
                           writes it: config.yaml (seed s), its fingerprint,
                           metrics.csv, checkpoints/last/<update>/ (for `purejaxppo
                           eval`, `pjp.Policy.load`, `export`); its learning_curve.png
                           only with `seed_plots=True` (one plot costs ~0.5 s)

`purejaxppo train --resume <run_dir>` (`resume=True`) continues every seed as ONE
program from the newest update step every seed has a checkpoint of, after comparing
config, seeds and device layout with the records of the start (`drivers.seeds_resume`,
`drivers.fingerprints`); its results are bitwise the uninterrupted run's on CPU. The
seeds continue together: the command line refuses `--resume <run_dir>/seed_<s>`.

The driver features of one run that work per update outside the program (evaluation,
videos, datasets, logging sinks other than csv) are refused for N > 1 before anything
is computed (`check_seeds`). EnvPool ids ("envpool:<id>") train the N seeds on
ONE pool of N x num_envs envs, and gymnasium ids ("gymnasium:<id>") on one vector env of
N x num_envs copies, on one device by default (`envs.host_calls`); `devices` > 1 is
refused for them.

This module imports the env suites and the training program (`kinds`, `train`) only
inside `train_seeds`: importing them imports gymnax, which starts JAX's backend, and the
command line imports `check_seeds` to validate a request before it sets the CPU device
count (tests/test_seeds_imports.py). Everything else is imported at the top.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
import pandas as pd
from jax.sharding import PartitionSpec as P

from purejaxppo import parallel, rundir, stored_programs
from purejaxppo.checkpoint import save_checkpoint
from purejaxppo.config import PPOConfig
from purejaxppo.drivers import seeds_resume, warm
from purejaxppo.drivers.fingerprints import check_seeds_root, record_seeds, seeds_fields
from purejaxppo.drivers.plots import plot_learning_curve, plot_seeds
from purejaxppo.drivers.report import (
    AGGREGATES,  # noqa: F401 - the rows of summary.csv, documented here
    final_return,
    summarize_seeds,
    write_atomic,
    write_csv,
    write_yaml,
)
from purejaxppo.drivers.seed_checks import check_seeds
from purejaxppo.drivers.segments import (
    CompiledSegments,
    Divergence,
    SegmentHooks,
    SegmentOptions,
    compiling,
    first_divergence,
    progress_bar,
    run_segments,
    segment_length,
    speed_postfix,
)
from purejaxppo.guards import all_finite, nonfinite_leaf
from purejaxppo.hyperparams import Hyperparams

__all__ = ["SeedsResult", "check_seeds", "train_seeds"]


class SeedsResult(NamedTuple):
    """What `train_seeds` returns.

    Attributes:
      run_dir: the run directory written.
      seeds: the seeds, `[S]`, in run order.
      metrics: one row per seed x update: columns `seed`, `update`, every metric.
      summary: one row per seed (`seed`, `final_return`, `diverged`), then the rows
        `AGGREGATES` (the `seed` column holds their names), as in `summary.csv`.
      final_returns: float64 `[S]`, each seed's mean return of its newest 100 finished
        training episodes (`report.final_return`)
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


def default_seeds_dir(config: PPOConfig, num_seeds: int, root: str | Path = "runs") -> Path:
    """Creates `runs/<env>-<YYYYmmdd-HHMMSS>-seeds<first>-<last>-<random>`."""
    name = config.env_name
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
    resume: bool = False,
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
      plot: write the top-level `learning_curve.png` (`drivers.plots.plot_seeds`).
      seed_plots: also write each seed's `learning_curve.png` (`drivers.plots.plot_learning_curve`,
        ~0.5 s a seed; off by default, the top-level plot shows every seed's spread).
      verbose: print (to stderr) how the seeds are split over the devices.
      resume: continue the `--num-seeds` run in `run_dir` (written by this function with
        the same `config`, `num_seeds` and devices; `devices=None`: as many as it used)
        from the newest update step every seed has a checkpoint of; the result is
        bitwise the uninterrupted run's on CPU (an "envpool:" / "gymnasium:" run's envs
        start fresh episodes: the pool is not in the checkpoints).

    Checkpoints (per seed, as `purejaxppo train` writes them) are saved every
    `config.save_freq` updates, every `config.save_minutes` minutes, and at the end. A
    seed whose losses or parameters turn NaN / Inf is marked in `diverged` and
    `summary.csv`; its last finite state is its newest checkpoint (none if no update was
    finite), and the other seeds train on.

    Returns:
      `SeedsResult`.

    Raises:
      ValueError: before anything is compiled or written: `check_seeds`'s errors, a bad
        env / network config (`make_train_fns`), more devices than there are local ones,
        several devices for an "envpool:" or "gymnasium:" id (`kinds`' table), or a
        non-empty `run_dir` (`rundir.DirectoryNotEmpty`). With `resume`: `run_dir` not a
        `--num-seeds` run, `fingerprint.FingerprintMismatch` for another config (also an
        edited `seed_<s>/config.yaml`), other seeds or another device layout than the
        run started with (naming the field), no checkpoint step every seed has
        (`seeds_resume.common_steps`).
      signals.TrainingInterrupted: after SIGINT / SIGTERM, once the running segment is
        saved; its `resume_hint` is `purejaxppo train --resume <run_dir>`.
    """
    # Lazy: both import gymnax, which starts JAX's backend (the module docstring).
    from purejaxppo import kinds
    from purejaxppo.train import make_train_fns

    # Validate everything before anything on disk changes.
    seeds = check_seeds(config, num_seeds, devices=devices if isinstance(devices, int) else None)
    kinds.check("seeds", config.env_name, multi_agent=config.multi_agent)
    if resume:
        devices = seeds_resume.check_resumable(run_dir, overwrite, devices)
        run_dir = Path(run_dir)
    elif run_dir is not None:
        run_dir = Path(run_dir)
        rundir.check_fresh(run_dir, overwrite)
    # A warm start is read once and given to the init program as an argument (a resumed
    # run continues its own checkpoints instead).
    program, init_params = warm.program_and_start(config, resume=resume)
    fns = make_train_fns(program)
    warm.check_warm_start(fns, init_params)
    if resume:  # what decides the results, as the run started (before the devices)
        count = devices if isinstance(devices, int) else len(devices)
        fields = seeds_fields(config, seeds, count, parallel.pad_runs(num_seeds, count))
        check_seeds_root(run_dir, fields, [run_dir / f"seed_{s}" for s in seeds])
    # By default min(S, local device count) devices, the seeds padded to a multiple.
    requested = "auto" if devices is None else devices
    mesh = parallel.runs_mesh(config.env_name, requested, num_seeds, pad=True)
    if mesh is None:  # EnvPool, gymnasium: the runs share one env, on one device
        mesh = parallel.make_mesh(1, parallel.RUNS_AXIS)
    if run_dir is None:
        run_dir = default_seeds_dir(config, num_seeds)
    # One writer for the whole run (`rundir.claim`); the old contents go under the lock.
    with rundir.claim(run_dir, "run", resume=resume, overwrite=overwrite):
        run = _SeedsRun(config, fns, seeds, mesh, run_dir, init_params)
        if resume:
            run.resume(verbose)
        else:
            run.write_start(verbose)
        run.train(progress)
        return run.finish(plot, seed_plots, verbose)


class _SeedsRun(seeds_resume.ResumeSeeds):
    """The state of one `train_seeds` and its `SegmentHooks` (run, process, save); its
    `resume` and `resume_hint`: `seeds_resume.ResumeSeeds`."""

    def __init__(
        self,
        config,
        fns,
        seeds: list[int],
        mesh,
        run_dir: Path,
        init_params=None,
    ):
        self.config, self.fns, self.seeds, self.mesh = config, fns, seeds, mesh
        self.run_dir, self.names = run_dir, fns.metric_names
        self.num_seeds = num_seeds = len(seeds)
        self.num_devices = mesh.devices.size
        self.num_runs = num_runs = parallel.pad_runs(num_seeds, self.num_devices)
        self.seed_configs = [config.replace(seed=seed) for seed in seeds]
        self.seed_dirs = [run_dir / f"seed_{seed}" for seed in seeds]
        # Inputs: run r trains seed min(r, S - 1) (the padding repeats the last seed).
        pick = np.minimum(np.arange(num_runs), num_seeds - 1)
        key_data = np.stack([np.asarray(jax.random.key_data(jax.random.key(s))) for s in seeds])
        hparams = jax.tree.map(
            lambda x: np.repeat(np.asarray(x)[None], num_runs, axis=0),
            Hyperparams.from_config(config),
        )
        self.key_data, self.hparams = parallel.to_global(
            (key_data[pick], hparams), mesh, P(parallel.RUNS_AXIS)
        )
        self.init_params = init_params  # the warm start (host arrays) or None
        # a warm start is an argument of the init here, not a constant: stored as well
        store = stored_programs.directory_for(host_calls=fns.kind.host_calls, warm_start=False)
        self.stored = lambda name: (f"seeds/{name}", warm.program_config(config), store)
        self.programs = CompiledSegments(self._run_program)
        self.history: list[dict[str, np.ndarray]] = []  # per segment: name -> [S, length]
        self.diverged: dict[int, Divergence] = {}  # seed index -> where it diverged
        self.saved_step = [0] * num_seeds  # newest "last" checkpoint of each seed (0: none)
        self.done = self.first_done = 0  # updates done; where this process started
        self.runner = self.previous = self.host = None
        self.start = time.perf_counter()

    def hooks(self) -> SegmentHooks:
        """Segments of `log_freq` updates, ending on every save; compiled ahead (`prepare`),
        so `run_segments` sizes them in seconds as a single run's."""
        c = self.config
        return SegmentHooks(
            length=lambda done: segment_length(done, c.num_updates, c.log_freq, c.save_freq),
            run=self.run,
            process=self.process,
            save=self.save,
            prepare=self.prepare,
            # a stop at once before every seed saved promises nothing (`signals.hinted`)
            resume_hint=self.resume_hint,
        )

    def train(self, progress: bool) -> None:
        """Runs the segments from `done` to the end (`run_segments`) under a bar."""
        c, label = self.config, f"{self.config.env_name} x{self.num_seeds} seeds"
        bar = progress_bar(
            c.num_updates, initial=self.done, unit="update", desc=compiling(label), enabled=progress
        )
        with bar:
            run_segments(
                c.num_updates,
                self.done,
                self.hooks(),
                bar=bar,
                options=SegmentOptions(save_freq=c.save_freq, save_minutes=c.save_minutes),
                label=label,
            )

    def prepare(self, done: int, length: int) -> None:
        """Compiles the program of a segment of `length` updates (once per length)."""
        self.run_program(length)

    def write_start(self, verbose: bool) -> None:
        """Writes config.yaml, seeds.yaml, the fingerprints and every seed's config.yaml;
        starts the runs."""
        num_seeds, num_runs, num_devices = self.num_seeds, self.num_runs, self.num_devices
        seeds = self.seeds
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_yaml(self.run_dir / "config.yaml", self.config.to_dict())
        self.record()
        write_yaml(
            self.run_dir / "seeds.yaml",
            {
                "seeds": seeds,
                "num_seeds": num_seeds,
                "num_devices": num_devices,
                "devices": [str(d) for d in self.mesh.devices.flat],
                "seeds_per_device": num_runs // num_devices,
                "padding_runs": num_runs - num_seeds,
            },
        )
        for seed_dir, seed_config in zip(self.seed_dirs, self.seed_configs, strict=True):
            seed_dir.mkdir(exist_ok=True)
            write_yaml(seed_dir / "config.yaml", seed_config.to_dict())
        if verbose:
            padding = f", {num_runs - num_seeds} padding run(s)" if num_runs > num_seeds else ""
            print(
                f"train: {num_seeds} seeds ({seeds[0]}..{seeds[-1]}) in one program on "
                f"{num_devices} device(s), {num_runs // num_devices} per device{padding}",
                file=sys.stderr,
            )
        self.runner = self.init_program()(
            self.key_data, warm.replicate(self.init_params, self.mesh)
        )

    def record(self, ensure: bool = False) -> None:
        """Records what decides the results in the run directory and in every seed's
        (`drivers.fingerprints`); with `ensure`, only where none is recorded yet."""
        fields = seeds_fields(self.config, self.seeds, self.num_devices, self.num_runs)
        record_seeds(self.run_dir, fields, self.seed_dirs, self.seed_configs, ensure=ensure)

    def init_program(self) -> Callable:
        """`(key data [R, 2], warm start) -> runner [R]`, split over the devices."""
        vmap_init = self.fns.kind.vmap_init_runs
        init = warm.init_runs(self.fns.init, lambda runner: runner, vmap_init=vmap_init)
        specs, stored = warm.runs_specs(0), self.stored("init")
        return parallel.make_runs_program(init, self.mesh, specs, once=True, stored=stored)

    def _run_program(self, length: int) -> Callable:
        """`(runner [R], hparams [R]) -> (runner, metrics [R, length], params finite [R])`,
        split over the devices."""

        def run(runner: Any, hp: Hyperparams) -> Any:
            runner, metrics = self.fns.run(runner, hp, length)
            return runner, metrics, all_finite(runner.train_state.params)

        stored = self.stored(f"segment/{length}")
        return parallel.make_runs_program(jax.vmap(run), self.mesh, stored=stored)

    def run_program(self, length: int) -> Callable:
        """`_run_program(length)` compiled for the runner's shapes and shardings (once per
        length)."""
        return self.programs.prepare(length, self.runner, self.hparams)

    def run(self, done: int, length: int) -> Any:
        self.previous = self.runner  # a diverged seed keeps its last finite state
        self.runner, metrics, finite = self.run_program(length)(self.runner, self.hparams)
        return metrics, finite

    def process(self, done: int, length: int, fetched: Any) -> dict[str, str]:
        metrics, finite = fetched
        names, config = self.names, self.config
        metrics = {name: metrics[name][: self.num_seeds] for name in names}
        self.history.append(metrics)
        for k in range(self.num_seeds):
            if k in self.diverged:
                continue
            bad = first_divergence(
                {n: metrics[n][k] for n in names},
                done,
                length,
                nonfinite_params=lambda k=k: None if finite[k] else self.nonfinite_params(k),
            )
            if bad is not None:
                self.diverged[k] = bad
                if done > self.saved_step[k]:  # keep the last finite state, as train does
                    self.save_seed(k, self.to_host(self.previous), len(self.history) - 1)
        steps = (done + length) * config.batch_size
        latest = metrics["episode_return"][:, -1]
        ran = (done + length - self.first_done) * config.batch_size * self.num_seeds
        return {
            "env_steps": f"{steps:,}",
            **speed_postfix(ran, time.perf_counter() - self.start),
            "ret": f"{np.nanmean(latest):.1f}" if np.isfinite(latest).any() else "n/a",
        }

    def nonfinite_params(self, k: int) -> str:
        """ "params <path of seed k's first non-finite parameter array>"
        (`guards.nonfinite_leaf`)."""
        leaf = nonfinite_leaf(_seed_state(self.to_host(self.runner), k).train_state.params)
        return f"params {leaf}"

    def save(self, done: int, due: bool) -> None:
        if not due:
            return
        self.host = self.to_host(self.runner)
        for k in range(self.num_seeds):
            if k not in self.diverged:
                self.save_seed(k, self.host)

    def to_host(self, state: Any) -> Any:
        """The runs' state as numpy arrays `[R, ...]` (one transfer; slicing a seed out of
        the devices' arrays would compile a gather per leaf), the key as key data."""
        return parallel.to_host(state.replace(key=jax.random.key_data(state.key)))

    def seed_history(self, k: int, segments: int | None = None) -> dict[str, np.ndarray]:
        parts = self.history[:segments]
        return {name: np.concatenate([part[name][k] for part in parts]) for name in self.names}

    def seed_table(self, k: int) -> pd.DataFrame:
        frame = pd.DataFrame(self.seed_history(k))
        frame.insert(0, "update", np.arange(1, len(frame) + 1))
        return frame

    def save_seed(self, k: int, host: Any, segments: int | None = None) -> None:
        state = _seed_state(host, k)
        history = self.seed_history(k, segments)
        save_checkpoint(self.seed_dirs[k], state, history, self.seed_configs[k])
        table = self.seed_table(k).iloc[: int(state.update_step)]
        write_csv(self.seed_dirs[k] / "metrics.csv", table)
        self.saved_step[k] = int(state.update_step)

    def finish(self, plot: bool, seed_plots: bool, verbose: bool) -> SeedsResult:
        """Writes each seed's table (the full one, NaN rows of a diverged seed included),
        then the top level; returns the `SeedsResult`."""
        config, seeds, run_dir = self.config, self.seeds, self.run_dir
        tables = [self.seed_table(k) for k in range(self.num_seeds)]
        for k, table in enumerate(tables):
            write_csv(self.seed_dirs[k] / "metrics.csv", table)
            if seed_plots:
                write_atomic(
                    self.seed_dirs[k] / "learning_curve.png",
                    lambda p, table=table, k=k: plot_learning_curve(
                        table, p, title=f"{config.env_name}, seed {seeds[k]}"
                    ),
                )
        metrics_table = pd.concat(
            [table.assign(seed=seed) for seed, table in zip(seeds, tables, strict=True)],
            ignore_index=True,
        )
        metrics_table = metrics_table[["seed", "update", *self.names]]
        finals = np.array(
            [final_return(t["episode_return"], t.get("episode_count")) for t in tables]
        )
        first_bad = {seeds[k]: bad.update for k, bad in self.diverged.items()}
        summary = summarize_seeds(seeds, finals, first_bad)
        write_csv(run_dir / "metrics.csv", metrics_table)
        write_csv(run_dir / "summary.csv", summary)
        if plot:
            write_atomic(
                run_dir / "learning_curve.png",
                lambda p: plot_seeds(metrics_table, p, title=f"PPO on {config.env_name}"),
            )
        if self.diverged and verbose:
            self._report_diverged()
        host = jax.tree.map(lambda x: x[: self.num_seeds], self.host)
        return SeedsResult(
            run_dir=run_dir,
            seeds=tuple(seeds),
            metrics=metrics_table,
            summary=summary,
            final_returns=finals,
            diverged=first_bad,
            runner_state=_seed_state(host, slice(None)),
            num_devices=self.num_devices,
        )

    def _report_diverged(self) -> None:
        saved, seeds = self.saved_step, self.seeds
        details = "; ".join(
            f"seed {seeds[k]} at update {update} ({what}; "
            + (f"last finite state: update {saved[k]})" if saved[k] else "no checkpoint)")
            for k, (update, what) in sorted(self.diverged.items())
        )
        print(
            f"train: {len(self.diverged)} of {self.num_seeds} seeds diverged (NaN / Inf): "
            f"{details}",
            file=sys.stderr,
        )


def _seed_state(host: Any, k: Any) -> Any:
    state = jax.tree.map(lambda x: x[k], host)
    return state.replace(key=jax.random.wrap_key_data(state.key))
