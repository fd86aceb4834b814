"""The driver of one run, behind `purejaxppo train`: jitted segments, progress, run directory.

The run is split into jitted segments of `config.log_freq` updates (a `Program`'s
`segment`, driven by `drivers.segments.run_segments`), so that a progress bar and the
metrics file advance while training proceeds. The segments call the same `update`
function as the one-call `train`, so the numbers are the same as
`jax.jit(make_train(config))(key)` for the same key (tests/test_cli.py checks bitwise).
What the run records (metrics.csv, the loggers, the divergence check) is
`drivers.record`'s.

One driver for one process or several: the `Program` is the local `jit` of
`make_train_fns` (`local_program`), or with `distributed=True` ONE agent data-parallel
over every device of every process (`data_parallel_program`: its `num_envs` envs split
over the devices, gradients and statistics reduced over all of them), behind `purejaxppo
train --coordinator HOST:PORT --num-processes N --process-id I`. Every process then runs
this same driver (as JAX and orbax expect of a multi-host program) after
`processes.initialize_distributed`, and:

* process 0 alone writes the run directory (it holds its lock, `rundir.claim`), shows
  the progress bar, logs, records the videos and datasets and runs the evaluations, on
  the parameters every process holds; it passes their returns to the others
  (`processes.from_process_zero`), so that all of them save the same "best" checkpoints;
* every process takes part in every checkpoint (orbax's multi-process save, with its
  barriers). The runner state is gathered to the host first, so a checkpoint is the
  same files a one-process run writes (`purejaxppo eval`, `export` and `Policy.load` read
  it in one process; a resume on another topology of the same device count continues it
  bitwise, one on another device count continues its state with the new count's
  rollout and minibatch randomness);
* decisions that each process could take differently are agreed: the save clock (any
  process's), every step that may fail in only some processes (`processes.together`),
  and segments are not sized in seconds (every host would measure differently);
* SIGTERM (to one process or all: a scheduler that preempts one host stops the whole
  run): JAX's preemption service passes the notice to every process and turns it into a
  sync point that all of them reach after the same segment
  (`reached_preemption_sync_point`); the run saves there, together, and every process
  stops with `TrainingInterrupted` (exit 143). The driver takes no Ctrl-C stop requests
  itself (`SegmentOptions(stop_on_signals=False)`): `purejaxppo train` turns a first Ctrl-C
  into that same SIGTERM notice, and a second into an exit at once with the resume
  command (`cli.distributed`).

The run directory must then be on a file system every process sees (checked at the start).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import yaml

from purejaxppo import fingerprint, processes, rundir
from purejaxppo.acting import EVAL_KEY_STREAM, make_evaluators, make_media
from purejaxppo.checkpoint import load_checkpoint, save_checkpoint
from purejaxppo.config import PPOConfig
from purejaxppo.drivers import warm
from purejaxppo.drivers.fingerprints import run_fields
from purejaxppo.drivers.plots import plot_learning_curve
from purejaxppo.drivers.program import (
    Program,
    agree,
    check_run_dir,
    claim_run_dir,
    data_parallel_program,
    local_program,
)
from purejaxppo.drivers.record import RunRecord, return_postfix, run_loggers
from purejaxppo.drivers.report import final_return_of
from purejaxppo.drivers.segments import (
    RESUME_KEY_STREAM,
    CompiledSegments,
    SegmentHooks,
    SegmentOptions,
    compiling,
    progress_bar,
    run_segments,
    segment_length,
)
from purejaxppo.signals import TrainingInterrupted
from purejaxppo.types import RunnerState

__all__ = ["RunResult", "return_postfix", "train_and_log"]

T = TypeVar("T")


class RunResult(NamedTuple):
    """What `train_and_log` returns (in every process)."""

    run_dir: Path
    metrics: pd.DataFrame  # one row per update; columns "update" and every metric
    # Mean return of the newest finished training episodes (`report.final_return_of`),
    # and how many episodes that is.
    final_return: float
    runner_state: RunnerState  # over several processes: a host copy
    final_episodes: int = 0


def train_and_log(
    config: PPOConfig,
    run_dir: str | Path,
    *,
    key: jax.Array | None = None,
    progress: bool = True,
    plot: bool = True,
    resume: bool = False,
    overwrite: bool = False,
    save_initial: bool = False,
    distributed: bool = False,
) -> RunResult:
    """Trains one agent in jitted segments and writes a run directory.

    Writes `run_dir/config.yaml` (the resolved config), `run_dir/metrics.csv` (one row per
    update, appended after every segment of `log_freq` updates) and
    `run_dir/learning_curve.png`. The other `config.loggers` (`purejaxppo.sinks`: jsonl,
    tensorboard, wandb, mlflow) get the config, every row keyed by env steps, the PNG
    and the videos. With `config.video_freq`, a greedy episode of the current policy is
    recorded every `video_freq` updates to `run_dir/videos/update_<n>.gif`; with
    `config.collect_freq`, `collect_episodes` sampled episodes are written every
    `collect_freq` updates to `run_dir/datasets/update_<n>/` (`purejaxppo.acting.datasets`).

    Everything is validated (config, env and its kwargs, networks, evaluation splits,
    the checkpoint to resume) before anything in `run_dir` changes.

    Args:
      config: the run's configuration.
      run_dir: output directory (created). A fresh run refuses a non-empty one unless
        `overwrite`.
      key: PRNG key; default `jax.random.key(config.seed)`. Training and the periodic
        evaluations (`fold_in(key, EVAL_KEY_STREAM)`, then the update index) derive from
        it. A resumed run uses `config.seed`'s key for its evaluations, and an "envpool:"
        or "gymnasium:" run for the fresh episodes it starts (`fold_in(key, RESUME_KEY_STREAM)`, then the
        checkpoint's update step).
      progress: show a tqdm progress bar (updates, env steps, steps/s, latest return).
      plot: write the learning-curve PNG.
      resume: continue from the newest checkpoint in `run_dir` (see `checkpoint.py`);
        the continued run ends bitwise equal to an uninterrupted one on CPU. Except on an
        "envpool:" or "gymnasium:" env: its pool / vector env lives on the host, outside
        the checkpoint, so the envs start fresh episodes there (a note on stderr says so)
        and the rest continues.
      overwrite: a fresh run may replace the contents of a non-empty run directory
        (removed after validation, just before training starts).
      save_initial: a fresh run also saves a "last" checkpoint of update 0 (the initial
        params, before any update), `Policy.load(run_dir, step=0)`; with
        `keep_checkpoints: all` it stays beside the later ones.
      distributed: train ONE agent over every device of every process (see the module
        docstring); call it in every process, with the same arguments. `num_envs` is the
        total over all devices; `run_dir` must be on a file system every process sees.

    Checkpoints (orbax, atomic) are written every `config.save_freq` updates, every
    `config.save_minutes` minutes of wall time and at the end, under
    `run_dir/checkpoints/last` (the newest `config.keep_checkpoints` are kept). After
    every segment the loss metrics and the parameters are checked: a NaN / Inf stops the
    run with `TrainingDiverged`; the last finite state is saved (if newer than the last
    checkpoint) and a non-finite one never is.

    Raises (over several processes: in every process alike):
      ValueError: from `make_env` / `make_networks` for a bad env id, env kwarg or action
        space; from `load_checkpoint` when resuming from a missing / mismatched
        checkpoint; `fingerprint.FingerprintMismatch` when resuming with a config that
        differs from the one recorded at the start (`drivers.fingerprints`);
        `rundir.DirectoryNotEmpty` for a fresh run in a non-empty directory;
        `rundir.DirectoryLocked` while another process writes to `run_dir`; with
        `distributed`, a host env, a device count that does not divide `num_envs`, a run
        directory another process does not see.
      guards.TrainingDiverged: non-finite losses or parameters.
      signals.TrainingInterrupted: Ctrl-C / SIGTERM (`distributed`: SIGTERM to any
        process); the running segment was finished and saved first (resume with
        `resume=True`).
      ImportError: naming the extra of a logger whose package is missing.
    Also `ValueError` for `video_freq` on an env without a renderer (before anything on
    disk changes).
    """
    run_dir = Path(run_dir)
    # Validate everything before anything on disk changes.
    check_run_dir(run_dir, config, resume=resume, overwrite=overwrite, distributed=distributed)
    config_of_program, init_params = agree(
        distributed, "the warm start", lambda: warm.program_and_start(config, resume=resume)
    )
    make = data_parallel_program if distributed else local_program
    program = make(config_of_program, init_params)
    loggers = run_loggers(config)  # metrics.csv: `RunRecord`
    media = make_media(config, program.fns)  # checks video_freq's renderer
    evaluators = make_evaluators(config, program.fns.networks)
    key = jax.random.key(config.seed) if key is None else key
    writer = not distributed or jax.process_index() == 0
    run = _SingleRun(config, program, run_dir, evaluators, media, key, writer)
    with contextlib.ExitStack() as stack:
        claim_run_dir(stack, run_dir, resume=resume, overwrite=overwrite, distributed=distributed)
        table = _train_claimed(run, key, loggers, resume, progress, plot, save_initial)
    final, episodes = final_return_of(table["episode_return"], table.get("episode_count"))
    return RunResult(
        run_dir=run_dir,
        metrics=table,
        final_return=final,
        runner_state=program.fetch(run.runner),
        final_episodes=episodes,
    )


def _train_claimed(
    run: _SingleRun,
    key: jax.Array,
    loggers: list[str],
    resume: bool,
    progress: bool,
    plot: bool,
    save_initial: bool = False,
) -> pd.DataFrame:
    """`train_and_log`'s part under the directory lock: start or resume, train, plot."""
    c, run_dir, program = run.config, run.run_dir, run.program
    if resume:
        run.resume(key)
    else:
        run.start(key, save_initial=save_initial)
    sinks = run.record.open_sinks(loggers, c, resume=resume)
    bar = progress_bar(
        c.num_updates,
        initial=run.done,
        unit="update",
        desc=compiling(program.label),
        enabled=progress and run.writer,
    )
    shared = program.distributed
    with bar, sinks:
        # a stop at once before the first checkpoint promises none (`signals.hinted`)
        command = f"purejaxppo train --resume {run_dir}"
        hint = None if shared else lambda: None if run.saved_step is None else command
        hooks = run.hooks()._replace(fetch=program.fetch_metrics, resume_hint=hint)
        options = SegmentOptions(
            save_freq=c.save_freq,
            save_minutes=c.save_minutes,
            # over several processes SIGTERM is JAX's preemption sync point (`save`), and
            # segment lengths must not depend on a host's timing
            stop_on_signals=not shared,
            seconds=0 if shared else None,
        )
        run_segments(c.num_updates, run.done, hooks, bar=bar, options=options, label=program.label)
        table = run.record.table()
        if plot and run.writer:
            plot_learning_curve(table, run_dir / "learning_curve.png", title=c.env_name)
            steps = int(table["env_steps"].iloc[-1])
            sinks.log_image("learning_curve", run_dir / "learning_curve.png", steps)
    return table


class _SingleRun:
    """The state of one `train_and_log` and its `SegmentHooks` (run, process, save)."""

    def __init__(self, config, program: Program, run_dir, evaluators, media, key, writer):
        self.config, self.program, self.run_dir, self.writer = config, program, run_dir, writer
        self.fns = program.fns
        self.names = program.fns.metric_names  # METRICS, then action_frac/<i>, info/<key>
        self.evaluators, self.media = evaluators, media
        self.hparams = program.hparams
        # Evaluation episodes draw from their own stream of the caller's key, folded in
        # when an evaluation is due (an eager fold_in is a compile before the first update).
        self.key = key
        eval_columns = [f"eval/{name}/return" for name in evaluators]
        self.eval_history: dict[str, list] = {name: [] for name in evaluators}
        self.record = RunRecord(run_dir, self.names, eval_columns, writer=writer)
        self.done = self.segments = 0  # segments: JAX's preemption sync points so far
        self.saved_step: int | None = None  # newest "last" checkpoint on disk
        self.improved = False
        self.previous = self.runner = None
        self.programs = CompiledSegments(program.segment)
        self.start_time, self.start_updates = time.perf_counter(), 0

    def _agree(self, what: str, action: Callable[[], T]) -> T:
        return agree(self.program.distributed, what, action)

    def hooks(self) -> SegmentHooks:
        """Segments of `log_freq` updates, ending on every save / eval / video / collect."""
        c = self.config
        every = (c.save_freq, c.eval_freq, c.video_freq, c.collect_freq)
        return SegmentHooks(
            length=lambda done: segment_length(done, c.num_updates, c.log_freq, *every),
            run=self.run,
            process=self.process,
            save=self.save,
            prepare=self.prepare,
        )

    def prepare(self, done: int, length: int) -> None:
        """Compiles the program of a segment of `length` updates (once per length)."""
        self.programs.prepare(length, self.runner, self.hparams)

    def start(self, key: jax.Array, *, save_initial: bool = False) -> None:
        """Initialises the run and writes its config (`save_initial`: and the "last"
        checkpoint of update 0, the initial params)."""
        self.runner = self.program.init(key)
        if self.writer:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            config_text = yaml.safe_dump(self.config.to_dict(), sort_keys=False)
            (self.run_dir / "config.yaml").write_text(config_text)
            fingerprint.record(self.run_dir, run_fields(self.config))  # compared on resume
        if save_initial:
            self._save_checkpoint(self.runner, "last")
            self.saved_step = int(self.program.local(self.runner).update_step)

    def resume(self, key: jax.Array) -> None:
        """Every process reads the newest checkpoint (and places its share); the writer
        sets newer (damaged) checkpoints aside and rewrites metrics.csv up to it."""
        # The local run resolves its setup once; a data-parallel one's is per device.
        setup = None if self.program.distributed else self.fns.setup
        checkpoint = self._agree(
            f"reading the checkpoint in {self.run_dir}",
            lambda: load_checkpoint(self.run_dir, self.config, setup),
        )
        if self.writer:
            rundir.set_aside_newer_checkpoints(self.run_dir, checkpoint.update_step)
        self.runner = self.program.place(checkpoint.runner_state)
        if self.fns.kind.episodes_restart_on_resume:
            self._restart_episodes(key, checkpoint.update_step)
        self.done = self.saved_step = self.start_updates = checkpoint.update_step
        self.eval_history.update(checkpoint.eval_history)
        # A checkpoint written before a metric existed (e.g. `loss`) has no history of
        # it: its rows get NaN there, the updates run from here on log it.
        evaluations = [self.eval_history.get(name, []) for name in self.evaluators]
        self.record.restore(checkpoint.metrics, self.done, evaluations)
        if self.writer:
            print(
                f"resumed from update {self.done} (step {self.done * self.config.batch_size}) "
                f"in {self.run_dir}",
                file=sys.stderr,
            )

    def _restart_episodes(self, key: jax.Array, update_step: int) -> None:
        """An EnvPool pool or a gymnasium vector env lives on the host, outside the
        checkpoint (`EnvKind.episodes_restart_on_resume`): the resumed run resets it to fresh
        episodes (seeded from `fold_in(fold_in(key,
        RESUME_KEY_STREAM), update_step)`) and keeps everything else the checkpoint holds
        (params with their normalisation statistics, optimizer state, key, update step).
        The episodes running at the checkpoint are cut short, so the resumed run is not
        bitwise the run that never stopped."""
        fresh_key = jax.random.fold_in(jax.random.fold_in(key, RESUME_KEY_STREAM), update_step)
        fresh = self.program.init(fresh_key)
        self.runner = self.runner.replace(env=fresh.env)
        print(
            f"resume: {self.config.env_name} ({self.fns.kind.title}) keeps its episodes on "
            "the host, outside the checkpoint: the envs start fresh episodes (params, "
            "optimizer state and statistics continue from the checkpoint)",
            file=sys.stderr,
        )

    def run(self, done: int, length: int) -> Any:
        self.previous = self.runner
        program = self.programs.program(length)
        self.runner, metrics = program(self.runner, self.hparams)
        return metrics

    def process(self, done: int, length: int, metrics: Any) -> dict[str, str]:
        frame = self.record.rows(done, length, metrics)
        params = self.program.local(self.runner).train_state.params
        self.record.check_finite(frame, metrics, (done, length), params, self._keep_last_finite)
        self.done = done + length
        self.improved = self._evaluate(frame)
        self.record.add(frame)
        self._media(int(frame["env_steps"].iloc[-1]))
        ran = (self.done - self.start_updates) * self.config.batch_size
        return self.record.postfix(frame, ran, time.perf_counter() - self.start_time)

    def _keep_last_finite(self) -> int | None:
        """Saves the state before the diverged segment when newer than the last
        checkpoint; returns the newest saved update (None: none)."""
        previous_step = int(self.program.local(self.previous).update_step)
        if previous_step > 0 and (self.saved_step is None or previous_step > self.saved_step):
            self._save_checkpoint(self.previous, "last")
            self.saved_step = previous_step
        return self.saved_step

    def _media(self, env_steps: int) -> None:
        """The video and the dataset when due (`make_media`), written by the writer."""
        c = self.config
        if not any(freq and self.done % freq == 0 for freq in (c.video_freq, c.collect_freq)):
            return

        def record() -> None:
            if self.writer:
                runner = self.program.local(self.runner)
                self.media(runner, self.done, env_steps, self.run_dir, self.record.sinks)

        self._agree("the video / dataset", record)

    def _evaluate(self, frame: pd.DataFrame) -> bool:
        """Runs the eval splits when due (the writer; the others get its returns); True
        if `best_split`'s return (default: the first split's) is its best so far."""
        if not (self.config.eval_freq and self.done % self.config.eval_freq == 0):
            return False
        params = self.program.local(self.runner).train_state.params
        eval_key = jax.random.fold_in(jax.random.fold_in(self.key, EVAL_KEY_STREAM), self.done)

        def evaluate() -> list[float]:
            if not self.writer:
                return [0.0] * len(self.evaluators)
            returns = [
                run(params, eval_key, jnp.float32(1.0))[0] for run in self.evaluators.values()
            ]
            return [float(np.mean(r)) for r in returns]

        values = self._agree("the evaluation", evaluate)
        if self.program.distributed:
            values = processes.from_process_zero(values)
        for name, column, value in zip(
            self.evaluators, self.record.eval_columns, values, strict=True
        ):
            frame.loc[frame.index[-1], column] = value
            self.eval_history[name].append([self.done, value])
        chosen = self.eval_history[self.config.best_split or next(iter(self.evaluators))]
        _, latest = chosen[-1]  # [update, return] pairs, as the checkpoint stores them
        return latest >= max(v for _, v in chosen)

    def _save_checkpoint(self, runner: Any, kind: str) -> Path:
        """Saves `runner` with the metrics and evaluations so far as `kind` ("last" /
        "best", `checkpoint.save_checkpoint`; every process: orbax's multi-process save);
        returns the checkpoint's directory."""
        return save_checkpoint(
            self.run_dir,
            self.program.fetch(runner),
            metrics=self.record.history(),
            config=self.config,
            eval_history=self.eval_history,
            kind=kind,
        )

    def _preempted(self, done: int) -> bool:
        """JAX's preemption sync point after this segment (SIGTERM to any process)."""
        from jax.experimental import multihost_utils

        step, self.segments = self.segments, self.segments + 1
        return (
            multihost_utils.reached_preemption_sync_point(step) and done < self.config.num_updates
        )

    def save(self, done: int, due: bool) -> None:
        """ "last" when the save clock is due (or at the end), "best" when improved. Over
        several processes: due on any process's clock, and at JAX's preemption sync point,
        where every process then stops with `TrainingInterrupted`."""
        stop = self.program.distributed and self._preempted(done)
        if self.program.distributed:
            due = bool(processes.flagged_processes(due)) or stop
        kinds = (["last"] if due else []) + (["best"] if self.improved else [])
        steps = done * self.config.batch_size
        sinks = self.record.sinks
        for kind in kinds:
            path = self._save_checkpoint(self.runner, kind)
            # W&B artifacts when `upload_checkpoints` (the other sinks ignore them): every
            # new best, and the last checkpoint of a run that finished.
            if sinks is None:
                continue
            if kind == "best":
                sinks.log_checkpoint("best", path, steps, aliases=["best"])
            elif done == self.config.num_updates:
                sinks.log_checkpoint("final", path, steps, aliases=["final"])
        if due:
            self.saved_step = done
        if stop:
            hint = (
                f"purejaxppo train --resume {self.run_dir} with the same --coordinator, "
                "--num-processes and --process-id as before, in every process"
            )
            raise TrainingInterrupted(done, "SIGTERM", hint)
