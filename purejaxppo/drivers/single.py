"""The driver of one run, behind `purejaxppo train`: jitted segments, progress, run directory.

The run is split into jitted segments of `config.log_freq` updates (`TrainFns.run`, driven
by `drivers.segments.run_segments`), so that a progress bar and the metrics file advance
while training proceeds. The segments call the same `update` function as the one-call
`train`, so the numbers are the same as `jax.jit(make_train(config))(key)` for the same key
(tests/test_cli.py checks bitwise).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import yaml

from purejaxppo import fingerprint, rundir
from purejaxppo.acting import EVAL_KEY_STREAM, make_evaluators, make_media
from purejaxppo.checkpoint import load_checkpoint, save_checkpoint
from purejaxppo.config import PPOConfig
from purejaxppo.drivers import warm
from purejaxppo.drivers.fingerprints import RESUME, run_fields
from purejaxppo.drivers.plots import plot_learning_curve
from purejaxppo.drivers.report import final_return_of
from purejaxppo.drivers.segments import (
    RESUME_KEY_STREAM,
    SegmentHooks,
    compiling,
    first_divergence,
    progress_bar,
    run_segments,
    segment_length,
    speed_postfix,
)
from purejaxppo.guards import TrainingDiverged, nonfinite_leaf
from purejaxppo.sinks import check_sinks, make_sinks
from purejaxppo.train import make_train_fns
from purejaxppo.types import RunnerState


class RunResult(NamedTuple):
    """What `train_and_log` returns."""

    run_dir: Path
    metrics: pd.DataFrame  # one row per update; columns "update" and every metric
    # Mean return of the newest finished training episodes (`report.final_return_of`),
    # and how many episodes that is.
    final_return: float
    runner_state: RunnerState
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

    Checkpoints (orbax, atomic) are written every `config.save_freq` updates, every
    `config.save_minutes` minutes of wall time and at the end, under
    `run_dir/checkpoints/last` (the newest `config.keep_checkpoints` are kept). After
    every segment the loss metrics and the parameters are checked: a NaN / Inf stops the
    run with `TrainingDiverged`; the last finite state is saved (if newer than the last
    checkpoint) and a non-finite one never is.

    Raises:
      ValueError: from `make_env` / `make_networks` for a bad env id, env kwarg or action
        space; from `load_checkpoint` when resuming from a missing / mismatched
        checkpoint; `fingerprint.FingerprintMismatch` when resuming with a config that
        differs from the one recorded at the start (`drivers.fingerprints`);
        `rundir.DirectoryNotEmpty` for a fresh run in a non-empty directory;
        `rundir.DirectoryLocked` while another process writes to `run_dir`.
      guards.TrainingDiverged: non-finite losses or parameters.
      signals.TrainingInterrupted: Ctrl-C / SIGTERM; the running segment was
        finished and saved first (resume with `resume=True`).
      ImportError: naming the extra of a logger whose package is missing.
    Also `ValueError` for `video_freq` on an env without a renderer (before anything on
    disk changes).
    """
    run_dir = Path(run_dir)
    # Validate everything before anything on disk changes.
    if not resume:
        rundir.check_fresh(run_dir, overwrite)
    else:  # its config as recorded at the start (none: a run from before records)
        fingerprint.check(run_dir, run_fields(config), what=RESUME)
    program, init_params = warm.program_and_start(config, resume=resume)
    fns = make_train_fns(program, init_params=init_params)
    loggers = [name for name in config.loggers if name != "csv"]  # metrics.csv: below
    check_sinks(loggers)
    if config.upload_checkpoints and "wandb" not in loggers:
        raise ValueError(
            f"upload_checkpoints=True: uploads to W&B, but the loggers are "
            f"{list(config.loggers)}: add --logger wandb"
        )
    media = make_media(config, fns)  # checks video_freq's renderer
    evaluators = make_evaluators(config, fns.networks)
    key = jax.random.key(config.seed) if key is None else key
    run = _SingleRun(config, fns, run_dir, evaluators, media, key)
    # One writer for the whole run (`rundir.claim`); the old contents go under the lock.
    with rundir.claim(run_dir, "run", resume=resume, overwrite=overwrite):
        table = _train_claimed(run, key, loggers, resume, progress, plot, save_initial)
    final, episodes = final_return_of(table["episode_return"], table.get("episode_count"))
    return RunResult(
        run_dir=run_dir,
        metrics=table,
        final_return=final,
        runner_state=run.runner,
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
    c, run_dir = run.config, run.run_dir
    if resume:
        run.resume(key)
    else:
        run.start(key, save_initial=save_initial)
    run.sinks = make_sinks(
        loggers, run_dir, append=resume, name=c.name, upload_checkpoints=c.upload_checkpoints
    )
    if not resume:
        run.sinks.log_config(c.to_dict())
    bar = progress_bar(
        c.num_updates,
        initial=run.done,
        unit="update",
        desc=compiling(c.env_name),
        enabled=progress,
    )
    with bar, run.sinks:
        run_segments(
            c.num_updates,
            run.done,
            run.hooks(),
            bar=bar,
            save_freq=c.save_freq,
            save_minutes=c.save_minutes,
            label=c.env_name,
            fetch=jax.device_get,
            # a stop at once before the first checkpoint promises none (`signals.hinted`)
            resume_hint=lambda: (
                None if run.saved_step is None else f"purejaxppo train --resume {run_dir}"
            ),
        )
        table = pd.concat(run.frames, ignore_index=True)
        if plot:
            plot_learning_curve(table, run_dir / "learning_curve.png", title=c.env_name)
            steps = int(table["env_steps"].iloc[-1])
            run.sinks.log_image("learning_curve", run_dir / "learning_curve.png", steps)
    return table


GAME_RETURN, GAME_OVER = "info/game_over_return", "info/game_over"


def return_postfix(frame: pd.DataFrame) -> dict[str, str]:
    """The progress bar's return entry for one segment's rows of metrics.

    With both Atari metrics `info/game_over_return` and `info/game_over` (configs/atari.yaml's
    `info_metrics`): `game`, the mean raw full-game score of the games that ended in the
    segment, sum(game_over_return * n) / sum(game_over * n) with n the rows'
    `episode_count` (1 without it); "n/a" when no game ended. Otherwise `ret`, the newest
    `episode_return` (for EnvPool Atari the same raw full-game score: `envs.rows.envpool_rows`
    counts games, whatever `episodic_life` / `reward_clip` do to the learning signal).
    """
    if GAME_RETURN in frame and GAME_OVER in frame:
        weight = frame["episode_count"] if "episode_count" in frame else 1.0
        rows = frame[GAME_RETURN].notna() & frame[GAME_OVER].notna()
        games = float((frame[GAME_OVER] * weight)[rows].sum())
        total = float((frame[GAME_RETURN] * weight)[rows].sum())
        return {"game": f"{total / games:.1f}" if games > 0 else "n/a"}
    returns = frame["episode_return"].dropna()
    return {"ret": f"{returns.iloc[-1]:.1f}" if len(returns) else "n/a"}


class _SingleRun:
    """The state of one `train_and_log` and its `SegmentHooks` (run, process, save)."""

    def __init__(self, config, fns, run_dir, evaluators, media, key):
        self.config, self.fns, self.run_dir = config, fns, run_dir
        self.names = fns.metric_names  # METRICS, then action_frac/<i>, info/<key>
        self.evaluators, self.media = evaluators, media
        self.hparams = fns.hparams  # the config's (`Hyperparams.from_config`)
        # Evaluation episodes draw from their own stream of the caller's key.
        self.eval_base_key = jax.random.fold_in(key, EVAL_KEY_STREAM)
        self.eval_columns = [f"eval/{name}/return" for name in evaluators]
        self.eval_history: dict[str, list] = {name: [] for name in evaluators}
        self.frames: list[pd.DataFrame] = []
        self.done = 0
        self.saved_step: int | None = None  # newest "last" checkpoint on disk
        self.improved = False
        self.sinks: Any = None
        self.previous = self.runner = None
        self.run_segment = jax.jit(fns.run, static_argnums=2)
        self.programs: dict[int, Any] = {}  # segment length -> compiled program
        self.start_time, self.start_updates = time.perf_counter(), 0

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
        if length not in self.programs:
            lowered = self.run_segment.lower(self.runner, self.hparams, length)
            self.programs[length] = lowered.compile()

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / "metrics.csv"

    def start(self, key: jax.Array, *, save_initial: bool = False) -> None:
        """Initialises the run and writes its config (`save_initial`: and the "last"
        checkpoint of update 0, the initial params)."""
        self.runner = jax.jit(self.fns.init)(key)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config_text = yaml.safe_dump(self.config.to_dict(), sort_keys=False)
        (self.run_dir / "config.yaml").write_text(config_text)
        fingerprint.record(self.run_dir, run_fields(self.config))  # compared on resume
        if save_initial:
            self._save_checkpoint(self.runner, "last")
            self.saved_step = int(self.runner.update_step)

    def resume(self, key: jax.Array) -> None:
        checkpoint = load_checkpoint(self.run_dir, self.config, self.fns.setup)  # resolved once
        rundir.set_aside_newer_checkpoints(self.run_dir, checkpoint.update_step)
        self.runner = checkpoint.runner_state
        if self.fns.kind.episodes_restart_on_resume:
            self._restart_episodes(key, checkpoint.update_step)
        self.done = self.saved_step = self.start_updates = checkpoint.update_step
        self.eval_history.update(checkpoint.eval_history)
        # A checkpoint written before a metric existed (e.g. `loss`) has no history of
        # it: its rows get NaN there, the updates run from here on log it.
        missing = [name for name in self.names if name not in checkpoint.metrics]
        if missing and self.done:  # (update 0 has no history at all)
            print(f"resume: the checkpoint has no history of {missing} (NaN)", file=sys.stderr)
        frame = pd.DataFrame(checkpoint.metrics).reindex(columns=list(self.names))
        frame.insert(0, "update", np.arange(1, self.done + 1))
        for name, column in zip(self.evaluators, self.eval_columns, strict=True):
            frame[column] = np.nan
            for update, value in self.eval_history.get(name, []):
                frame.loc[frame["update"] == update, column] = value
        self.frames.append(frame)
        frame.to_csv(self.metrics_path, index=False)  # drops rows logged after the checkpoint
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
        fresh = jax.jit(self.fns.init)(fresh_key)
        self.runner = self.runner.replace(env=fresh.env)
        print(
            f"resume: {self.config.env_name} ({self.fns.kind.title}) keeps its episodes on "
            "the host, outside the checkpoint: the envs start fresh episodes (params, "
            "optimizer state and statistics continue from the checkpoint)",
            file=sys.stderr,
        )

    def run(self, done: int, length: int) -> Any:
        self.previous = self.runner
        program = self.programs.get(length)
        if program is None:
            self.runner, metrics = self.run_segment(self.runner, self.hparams, length)
        else:
            self.runner, metrics = program(self.runner, self.hparams)
        return metrics

    def process(self, done: int, length: int, metrics: Any) -> dict[str, str]:
        frame = pd.DataFrame({name: np.asarray(metrics[name]) for name in self.names})
        frame.insert(0, "update", np.arange(done + 1, done + length + 1))
        for column in self.eval_columns:
            frame[column] = np.nan
        self._check_finite(done, length, metrics, frame)
        self.done = done + length
        self.improved = self._evaluate(frame)
        frame.to_csv(self.metrics_path, mode="a", header=len(self.frames) == 0, index=False)
        self.frames.append(frame)
        for row in frame.drop(columns="update").to_dict("records"):
            self.sinks.log_metrics(int(row["env_steps"]), row)
        env_steps = int(frame["env_steps"].iloc[-1])
        self.media(self.runner, self.done, env_steps, self.run_dir, self.sinks)
        ran = (self.done - self.start_updates) * self.config.batch_size
        speed = speed_postfix(ran, time.perf_counter() - self.start_time)
        return {"env_steps": f"{env_steps:,}", **speed, **return_postfix(frame)}

    def _check_finite(self, done: int, length: int, metrics: Any, frame: pd.DataFrame) -> None:
        """Raises `TrainingDiverged` for a NaN / Inf loss or parameter, after writing the
        segment's rows (as evidence) and the last finite state (never a non-finite one)."""
        params = self.runner.train_state.params
        diverged = first_divergence(
            metrics, done, length, lambda: None if nonfinite_leaf(params) is None else "params"
        )
        if diverged is None:
            return
        frame.to_csv(self.metrics_path, mode="a", header=len(self.frames) == 0, index=False)
        previous_step = int(self.previous.update_step)
        if previous_step > 0 and (self.saved_step is None or previous_step > self.saved_step):
            self._save_checkpoint(self.previous, "last")
            self.saved_step = previous_step
        kept = (
            "no update finished with finite values, so there is no checkpoint"
            if self.saved_step is None
            else f"the last finite state (update {self.saved_step}) is kept in "
            f"{self.run_dir / 'checkpoints' / 'last' / str(self.saved_step)}"
        )
        raise TrainingDiverged(
            f"training diverged at update {diverged.update}: {diverged.what} is not finite "
            f"(NaN or Inf); {kept}; nothing non-finite was saved. Try a smaller "
            f"learning_rate or max_grad_norm.",
            update=diverged.update,
            what=diverged.what,
        )

    def _evaluate(self, frame: pd.DataFrame) -> bool:
        """Runs the eval splits when due; True if `best_split`'s return (default: the
        first split's) is its best so far."""
        if not (self.config.eval_freq and self.done % self.config.eval_freq == 0):
            return False
        params = self.runner.train_state.params
        eval_key = jax.random.fold_in(self.eval_base_key, self.done)
        for (name, run_eval), column in zip(
            self.evaluators.items(), self.eval_columns, strict=True
        ):
            returns, _ = run_eval(params, eval_key, jnp.float32(1.0))
            value = float(np.mean(returns))
            frame.loc[frame.index[-1], column] = value
            self.eval_history[name].append([self.done, value])
        chosen = self.eval_history[self.config.best_split or next(iter(self.evaluators))]
        _, latest = chosen[-1]  # [update, return] pairs, as the checkpoint stores them
        return latest >= max(v for _, v in chosen)

    def _history(self) -> dict[str, np.ndarray]:
        if not self.frames:  # update 0 (`save_initial`): none yet (orbax refuses empty arrays)
            return {}
        so_far = pd.concat(self.frames, ignore_index=True)
        return {name: so_far[name].to_numpy() for name in self.names}

    def _save_checkpoint(self, runner: RunnerState, kind: str) -> Path:
        """Saves `runner` with the metrics and evaluations so far as `kind` ("last" /
        "best", `checkpoint.save_checkpoint`); returns the checkpoint's directory."""
        return save_checkpoint(
            self.run_dir,
            runner,
            metrics=self._history(),
            config=self.config,
            eval_history=self.eval_history,
            kind=kind,
        )

    def save(self, done: int, due: bool) -> None:
        """ "last" when the save clock is due (or at the end), "best" when improved."""
        kinds = (["last"] if due else []) + (["best"] if self.improved else [])
        steps = done * self.config.batch_size
        for kind in kinds:
            path = self._save_checkpoint(self.runner, kind)
            # W&B artifacts when `upload_checkpoints` (the other sinks ignore them): every
            # new best, and the last checkpoint of a run that finished.
            if self.sinks is None:
                continue
            if kind == "best":
                self.sinks.log_checkpoint("best", path, steps, aliases=["best"])
            elif done == self.config.num_updates:
                self.sinks.log_checkpoint("final", path, steps, aliases=["final"])
        if due:
            self.saved_step = done
