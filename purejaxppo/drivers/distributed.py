"""The driver of ONE agent trained over several processes (and hosts), behind
`purejaxppo train --coordinator HOST:PORT --num-processes N --process-id I`.

Every process runs this same driver (as JAX and orbax expect of a multi-host program)
after `processes.initialize_distributed`. The agent is data-parallel over every device of
every process (`parallel.make_data_parallel_run`: the `num_envs` envs split over the
devices; gradients, normalisation, advantage and episode statistics reduced over all of
them), trained in segments by the one loop `drivers.segments.run_segments`.

Who does what:

* process 0 alone writes the run directory (it holds its lock, `rundir.claim`):
  config.yaml, metrics.csv, learning_curve.png, the other loggers; it alone shows the
  progress bar;
* every process takes part in every checkpoint (`checkpoint.save_checkpoint`: orbax's
  multi-process save, with its barriers). The runner state is gathered to the host first,
  so a checkpoint is the same files a one-process run writes (`purejaxppo eval`,
  `export` and `Policy.load` read it in one process; a resume on another topology of
  the same device count continues it bitwise, one on another device count continues its
  state with the new count's rollout and minibatch randomness);
* decisions that each process could take differently are agreed: the save clock
  (`save_minutes`: any process's clock), every step that may fail in only some
  processes (`processes.flagged_processes`), and segments are `log_freq` updates (no
  time-based sizing, which every host would measure differently).

SIGTERM (to one process or all: a scheduler that preempts one host stops the whole run):
JAX's preemption service passes the notice to every process and turns it into a sync
point that all of them reach after the same segment (`reached_preemption_sync_point`);
the run saves there, together, and every process stops with `TrainingInterrupted` (exit
143). The driver takes no Ctrl-C stop requests itself (`run_segments(stop_on_signals=
False)`): `purejaxppo train` turns a first Ctrl-C into that same SIGTERM notice, and a
second into an exit at once with the resume command (`cli.distributed`).

The run directory must be on a file system every process sees (checked at the start).
Not supported here yet (refused in one line before anything runs): evaluation during
training (`eval_freq`), videos (`video_freq`) and datasets (`collect_freq`); evaluate the
checkpoints afterwards with `purejaxppo eval`.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import jax
import numpy as np
import pandas as pd
import yaml

from purejaxppo import parallel, processes, rundir
from purejaxppo.checkpoint import load_checkpoint, save_checkpoint
from purejaxppo.config import PPOConfig
from purejaxppo.drivers import warm
from purejaxppo.drivers.plots import plot_learning_curve
from purejaxppo.drivers.report import final_return_of
from purejaxppo.drivers.segments import (
    SegmentHooks,
    compiling,
    first_divergence,
    progress_bar,
    run_segments,
    segment_length,
    speed_postfix,
)
from purejaxppo.guards import TrainingDiverged, nonfinite_leaf
from purejaxppo.signals import TrainingInterrupted
from purejaxppo.sinks import check_sinks, make_sinks
from purejaxppo.types import RunnerState

T = TypeVar("T")

#: Config fields this driver refuses when nonzero (what to do instead).
UNSUPPORTED = {
    "eval_freq": "evaluate the checkpoints afterwards with purejaxppo eval",
    "video_freq": "record videos afterwards with purejaxppo eval --video",
    "collect_freq": "collect episodes afterwards with purejaxppo collect",
}


class DistributedResult(NamedTuple):
    """What `train_distributed` returns (in every process)."""

    run_dir: Path
    metrics: pd.DataFrame  # one row per update; columns "update" and every metric
    final_return: float  # mean return of the newest finished episodes (`final_return_of`)
    final_episodes: int
    runner_state: RunnerState  # host copy, PRNG key as key data


def check_distributed_config(config: PPOConfig) -> None:
    """Raises a one-line `ValueError` for a config this driver cannot run (`UNSUPPORTED`
    fields, `upload_checkpoints` without the wandb logger); touches nothing."""
    for name, instead in UNSUPPORTED.items():
        if getattr(config, name):
            raise ValueError(
                f"{name}={getattr(config, name)}: not supported by a run over several "
                f"processes: set {name}: 0 and {instead}"
            )
    if config.upload_checkpoints and "wandb" not in config.loggers:
        raise ValueError(
            f"upload_checkpoints=True: uploads to W&B, but the loggers are "
            f"{list(config.loggers)}: add --logger wandb"
        )


def together(what: str, action: Callable[[], T]) -> T:
    """Runs `action` here; when it failed (`ValueError`, `OSError`) in any process, raises
    in every process (its own error, or one naming the processes that failed), so that no
    process goes on to a collective the others never reach. `action` itself must take no
    collective that a failure could skip."""
    try:
        result, error = action(), None
    except (ValueError, OSError) as err:
        result, error = None, err
    failed = processes.flagged_processes(error is not None)
    if error is not None:
        raise error
    if failed:
        raise ValueError(f"{what} failed in process {', '.join(map(str, failed))} (see its error)")
    return result


def train_distributed(
    config: PPOConfig,
    run_dir: str | Path,
    *,
    progress: bool = True,
    plot: bool = True,
    resume: bool = False,
    overwrite: bool = False,
) -> DistributedResult:
    """Trains one agent over every device of every process; call it in every process.

    Writes (process 0) `run_dir/config.yaml`, `metrics.csv` and `learning_curve.png` as
    `drivers.single.train_and_log` does; checkpoints under `run_dir/checkpoints/last`
    every `save_freq` updates, every `save_minutes` and at the end (every process). The
    PRNG key is `jax.random.key(config.seed)`.

    Args:
      config: the run's configuration; `num_envs` is the total over all devices.
      run_dir: the run directory, on a file system every process sees.
      progress: show the progress bar (process 0).
      plot: write the learning-curve PNG (process 0).
      resume: continue from the newest checkpoint in `run_dir` (every process).
      overwrite: a fresh run may replace a non-empty `run_dir` (process 0 clears it).

    Raises (in every process alike):
      ValueError: an `UNSUPPORTED` field; a host env; a device count that does not divide
        `num_envs`; a run directory another process does not see; the errors of
        `rundir.claim` / `load_checkpoint`.
      guards.TrainingDiverged: non-finite losses or parameters (the last finite state is
        saved when newer than the last checkpoint).
      signals.TrainingInterrupted: SIGTERM; saved first.
    """
    check_distributed_config(config)
    run_dir = Path(run_dir)
    loggers = [name for name in config.loggers if name != "csv"]  # metrics.csv: below
    check_sinks(loggers)
    init_params = (
        None if resume else together("the warm start", lambda: warm.load_warm_start(config))
    )
    program = parallel.make_data_parallel_run(warm.program_config(config), init_params=init_params)
    writer = jax.process_index() == 0
    with contextlib.ExitStack() as stack:
        _claim(stack, run_dir, writer, resume, overwrite)
        run = _DistributedRun(config, program, run_dir, writer)
        if resume:
            run.resume()
        else:
            run.start(jax.random.key(config.seed))
        table = run.train(loggers, resume, progress, plot)
    final, episodes = final_return_of(table["episode_return"], table.get("episode_count"))
    return DistributedResult(
        run_dir=run_dir,
        metrics=table,
        final_return=final,
        final_episodes=episodes,
        runner_state=program.fetch(run.runner),
    )


def _claim(
    stack: contextlib.ExitStack, run_dir: Path, writer: bool, resume: bool, overwrite: bool
) -> None:
    """Process 0 claims `run_dir` (`rundir.claim`, held until the run ends); then every
    process checks that it sees the claimed directory (a shared file system). Each
    process takes the same two collectives, whatever fails."""
    error = None
    if writer:
        try:
            stack.enter_context(rundir.claim(run_dir, "run", resume=resume, overwrite=overwrite))
        except (ValueError, OSError) as err:
            error = err
    if processes.flagged_processes(error is not None):
        raise error or ValueError(f"process 0 could not claim {run_dir} (see its error)")
    missing = processes.flagged_processes(rundir.read_marker(run_dir) is None)
    if missing:
        raise ValueError(
            f"run directory {run_dir}: process {', '.join(map(str, missing))} does not see "
            "what process 0 created there: it must be on a file system every process shares"
        )


class _DistributedRun:
    """The state of one `train_distributed` and its `SegmentHooks`."""

    def __init__(self, config: PPOConfig, program: parallel.DataParallelRun, run_dir, writer):
        self.config, self.program, self.run_dir, self.writer = config, program, run_dir, writer
        self.names = program.fns.metric_names
        self.frames: list[pd.DataFrame] = []
        self.done = self.segments = 0
        self.saved_step: int | None = None
        self.sinks: Any = None
        self.runner: Any = None
        self.previous: Any = None
        self.compiled: dict[int, Any] = {}
        self.start_time, self.start_updates = time.perf_counter(), 0

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / "metrics.csv"

    def start(self, key: jax.Array) -> None:
        self.runner = self.program.init(key)
        if self.writer:
            text = yaml.safe_dump(self.config.to_dict(), sort_keys=False)
            (self.run_dir / "config.yaml").write_text(text)

    def resume(self) -> None:
        """Every process reads the newest checkpoint and places its share; process 0 sets
        newer (damaged) checkpoints aside and rewrites metrics.csv up to the checkpoint."""
        checkpoint = together(
            f"reading the checkpoint in {self.run_dir}",
            lambda: load_checkpoint(self.run_dir, self.config),
        )
        host = checkpoint.runner_state
        self.runner = self.program.place(host.replace(key=jax.random.key_data(host.key)))
        self.done = self.saved_step = self.start_updates = checkpoint.update_step
        frame = pd.DataFrame(checkpoint.metrics).reindex(columns=list(self.names))
        frame.insert(0, "update", np.arange(1, self.done + 1))
        self.frames.append(frame)
        if self.writer:
            rundir.set_aside_newer_checkpoints(self.run_dir, checkpoint.update_step)
            frame.to_csv(self.metrics_path, index=False)
            print(f"resumed from update {self.done} in {self.run_dir}", file=sys.stderr)

    def train(self, loggers: list[str], resume: bool, progress: bool, plot: bool) -> pd.DataFrame:
        """The segments (`run_segments`), then the plot (process 0)."""
        c = self.config
        names = loggers if self.writer else []
        self.sinks = make_sinks(
            names, self.run_dir, append=resume, name=c.name, upload_checkpoints=c.upload_checkpoints
        )
        if self.writer and not resume:
            self.sinks.log_config(c.to_dict())
        label = f"{c.env_name} ({self.program.mesh.devices.size} devices)"
        bar = progress_bar(
            c.num_updates,
            initial=self.done,
            unit="update",
            desc=compiling(label),
            enabled=progress and self.writer,
        )
        hooks = SegmentHooks(
            length=lambda done: segment_length(done, c.num_updates, c.log_freq, c.save_freq),
            run=self.run,
            process=self.process,
            save=self.save,
            prepare=self.prepare,
        )
        with bar, self.sinks:
            run_segments(
                c.num_updates,
                self.done,
                hooks,
                bar=bar,
                save_freq=c.save_freq,
                save_minutes=c.save_minutes,
                label=label,
                fetch=parallel.to_host,
                stop_on_signals=False,  # SIGTERM: JAX's preemption sync point (`save`)
                seconds=0,  # segment lengths must not depend on a host's timing
            )
            table = pd.concat(self.frames, ignore_index=True)
            if plot and self.writer:
                plot_learning_curve(table, self.run_dir / "learning_curve.png", title=c.env_name)
                steps = int(table["env_steps"].iloc[-1])
                self.sinks.log_image("learning_curve", self.run_dir / "learning_curve.png", steps)
        return table

    def prepare(self, done: int, length: int) -> None:
        if length not in self.compiled:
            program = self.program.segment(length)
            self.compiled[length] = program.lower(self.runner, self.program.hparams).compile()

    def run(self, done: int, length: int) -> Any:
        self.previous = self.runner
        self.runner, metrics = self.compiled[length](self.runner, self.program.hparams)
        return metrics

    def process(self, done: int, length: int, metrics: Any) -> dict[str, str]:
        frame = pd.DataFrame({name: np.asarray(metrics[name]) for name in self.names})
        frame.insert(0, "update", np.arange(done + 1, done + length + 1))
        self._check_finite(done, length, metrics, frame)
        self.done = done + length
        if self.writer:
            frame.to_csv(self.metrics_path, mode="a", header=not self.frames, index=False)
            for row in frame.drop(columns="update").to_dict("records"):
                self.sinks.log_metrics(int(row["env_steps"]), row)
        self.frames.append(frame)
        env_steps = int(frame["env_steps"].iloc[-1])
        ran = (self.done - self.start_updates) * self.config.batch_size
        speed = speed_postfix(ran, time.perf_counter() - self.start_time)
        returns = frame["episode_return"].dropna()
        latest = f"{returns.iloc[-1]:.1f}" if len(returns) else "n/a"
        return {"env_steps": f"{env_steps:,}", **speed, "ret": latest}

    def _check_finite(self, done: int, length: int, metrics: Any, frame: pd.DataFrame) -> None:
        """`TrainingDiverged` (in every process alike: the metrics and parameters are the
        same everywhere) after saving the last finite state when newer than the last
        checkpoint; the segment's rows are written as evidence."""
        params = parallel.to_host(self.runner.train_state.params)
        diverged = first_divergence(
            metrics, done, length, lambda: None if nonfinite_leaf(params) is None else "params"
        )
        if diverged is None:
            return
        if self.writer:
            frame.to_csv(self.metrics_path, mode="a", header=not self.frames, index=False)
        previous_step = done
        if previous_step > 0 and (self.saved_step is None or previous_step > self.saved_step):
            self._save(self.previous)
            self.saved_step = previous_step
        kept = (
            "no update finished with finite values, so there is no checkpoint"
            if self.saved_step is None
            else f"the last finite state (update {self.saved_step}) is kept"
        )
        raise TrainingDiverged(
            f"training diverged at update {diverged.update}: {diverged.what} is not finite "
            f"(NaN or Inf); {kept}. Try a smaller learning_rate or max_grad_norm.",
            update=diverged.update,
            what=diverged.what,
        )

    def _save(self, runner: Any) -> None:
        """Every process saves the host copy of `runner` with the metrics so far (orbax
        multi-process: process 0 writes the arrays, all meet at its barriers)."""
        host = self.program.fetch(runner)
        host = host.replace(key=jax.random.wrap_key_data(host.key))
        so_far = pd.concat(self.frames, ignore_index=True)
        history = {name: so_far[name].to_numpy() for name in self.names}
        save_checkpoint(self.run_dir, host, metrics=history, config=self.config)

    def save(self, done: int, due: bool) -> None:
        """Saves when any process's save clock is due, or at JAX's preemption sync point
        (SIGTERM to any process), where it then stops with `TrainingInterrupted`."""
        from jax.experimental import multihost_utils

        step, self.segments = self.segments, self.segments + 1
        stop = (
            multihost_utils.reached_preemption_sync_point(step) and done < self.config.num_updates
        )
        due = bool(processes.flagged_processes(due)) or stop
        if due:
            self._save(self.runner)
            self.saved_step = done
        if stop:
            hint = (
                f"purejaxppo train --resume {self.run_dir} with the same --coordinator, "
                "--num-processes and --process-id as before, in every process"
            )
            raise TrainingInterrupted(done, "SIGTERM", hint)
