"""What one run of `purejaxppo train` records (`drivers.single`): the metrics table and
`metrics.csv`, the other loggers (`purejaxppo.sinks`), the progress bar's postfix, and the
divergence check after every segment.

In a run over several processes every process keeps the table (a checkpoint saves its
history) and checks the metrics alike; process 0 alone writes (`writer`): metrics.csv,
the loggers. Imports nothing that starts JAX's backend (the command line checks a
config with `check_upload` before the processes join).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from purejaxppo.config import PPOConfig
from purejaxppo.drivers.segments import first_divergence, speed_postfix
from purejaxppo.guards import TrainingDiverged, nonfinite_leaf
from purejaxppo.sinks import check_sinks, make_sinks

__all__ = ["GAME_OVER", "GAME_RETURN", "RunRecord", "check_upload", "return_postfix", "run_loggers"]

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


def check_upload(config: PPOConfig) -> None:
    """Raises a one-line `ValueError` for `upload_checkpoints` without the wandb logger."""
    if config.upload_checkpoints and "wandb" not in config.loggers:
        raise ValueError(
            f"upload_checkpoints=True: uploads to W&B, but the loggers are "
            f"{list(config.loggers)}: add --logger wandb"
        )


def run_loggers(config: PPOConfig) -> list[str]:
    """The run's loggers but "csv" (metrics.csv is the run's own), checked.

    Raises:
      ImportError: naming the extra of a logger whose package is missing (`check_sinks`).
      ValueError: as `check_upload`.
    """
    loggers = [name for name in config.loggers if name != "csv"]
    check_sinks(loggers)
    check_upload(config)
    return loggers


class RunRecord:
    """The metrics of one run so far (`frames`, one per segment) and where they go.

    run_dir: the run directory (metrics.csv in it).
    names: the metric names (`TrainFns.metric_names`).
    eval_columns: the `eval/<split>/return` columns (NaN but on evaluated updates).
    writer: this process writes (metrics.csv, the loggers).
    """

    def __init__(self, run_dir: Path, names: list[str], eval_columns: list[str], *, writer: bool):
        self.run_dir, self.names, self.eval_columns = run_dir, names, eval_columns
        self.writer = writer
        self.frames: list[pd.DataFrame] = []
        self.sinks: Any = None

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / "metrics.csv"

    def open_sinks(self, loggers: list[str], config: PPOConfig, *, resume: bool) -> Any:
        """The loggers (none but in the writer), given the config on a fresh run."""
        self.sinks = make_sinks(
            loggers if self.writer else [],
            self.run_dir,
            append=resume,
            name=config.name,
            upload_checkpoints=config.upload_checkpoints,
        )
        if self.writer and not resume:
            self.sinks.log_config(config.to_dict())
        return self.sinks

    def restore(self, metrics: Mapping[str, Any], done: int, evaluations: list[list]) -> None:
        """A resumed run's rows from its checkpoint (`done` updates; `evaluations`: the
        [update, return] pairs of each of `eval_columns`); the writer rewrites metrics.csv
        with them, dropping rows logged after the checkpoint."""
        missing = [name for name in self.names if name not in metrics]
        if missing and done and self.writer:  # (update 0 has no history at all)
            print(f"resume: the checkpoint has no history of {missing} (NaN)", file=sys.stderr)
        frame = pd.DataFrame(metrics).reindex(columns=list(self.names))
        frame.insert(0, "update", np.arange(1, done + 1))
        for pairs, column in zip(evaluations, self.eval_columns, strict=True):
            frame[column] = np.nan
            for update, value in pairs:
                frame.loc[frame["update"] == update, column] = value
        self.frames.append(frame)
        if self.writer:
            frame.to_csv(self.metrics_path, index=False)

    def rows(self, done: int, length: int, metrics: Mapping[str, Any]) -> pd.DataFrame:
        """One segment's rows (updates `done + 1` ... `done + length`), eval columns NaN."""
        frame = pd.DataFrame({name: np.asarray(metrics[name]) for name in self.names})
        frame.insert(0, "update", np.arange(done + 1, done + length + 1))
        for column in self.eval_columns:
            frame[column] = np.nan
        return frame

    def _append_csv(self, frame: pd.DataFrame) -> None:
        if self.writer:
            frame.to_csv(self.metrics_path, mode="a", header=not self.frames, index=False)

    def add(self, frame: pd.DataFrame) -> None:
        """Keeps a segment's rows; the writer appends them to metrics.csv and the loggers."""
        self._append_csv(frame)
        self.frames.append(frame)
        if self.writer:
            for row in frame.drop(columns="update").to_dict("records"):
                self.sinks.log_metrics(int(row["env_steps"]), row)

    def table(self) -> pd.DataFrame:
        return pd.concat(self.frames, ignore_index=True)

    def history(self) -> dict[str, np.ndarray]:
        """metric -> its values so far, for a checkpoint ({} before any update: orbax
        refuses empty arrays)."""
        if not self.frames:
            return {}
        so_far = self.table()
        return {name: so_far[name].to_numpy() for name in self.names}

    @staticmethod
    def postfix(frame: pd.DataFrame, env_steps_run: int, seconds: float) -> dict[str, str]:
        """The bar's postfix after a segment: env steps, steps/s, the return entry."""
        env_steps = int(frame["env_steps"].iloc[-1])
        speed = speed_postfix(env_steps_run, seconds)
        return {"env_steps": f"{env_steps:,}", **speed, **return_postfix(frame)}

    def check_finite(
        self,
        frame: pd.DataFrame,
        metrics: Mapping[str, Any],
        segment: tuple[int, int],
        params: Any,
        keep_last_finite: Callable[[], int | None],
    ) -> None:
        """Raises `TrainingDiverged` for a NaN / Inf loss or parameter of the segment
        (`segment`: updates done before it, its length; `params` on the host or this
        process), after writing its rows (as evidence) and `keep_last_finite()`, which
        saves the state before the segment when newer than the last checkpoint (never a
        non-finite one) and returns the newest saved update (None: none)."""
        done, length = segment
        diverged = first_divergence(
            metrics, done, length, lambda: None if nonfinite_leaf(params) is None else "params"
        )
        if diverged is None:
            return
        self._append_csv(frame)
        saved_step = keep_last_finite()
        kept = (
            "no update finished with finite values, so there is no checkpoint"
            if saved_step is None
            else f"the last finite state (update {saved_step}) is kept in "
            f"{self.run_dir / 'checkpoints' / 'last' / str(saved_step)}"
        )
        raise TrainingDiverged(
            f"training diverged at update {diverged.update}: {diverged.what} is not finite "
            f"(NaN or Inf); {kept}; nothing non-finite was saved. Try a smaller "
            f"learning_rate or max_grad_norm.",
            update=diverged.update,
            what=diverged.what,
        )
