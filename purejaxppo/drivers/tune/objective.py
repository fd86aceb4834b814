"""What `tune` tells Optuna: a training metric averaged over a final window of updates.

`"episode_return:0.1"` (the default) is the mean return of the episodes that ended in
the last 10% of a trial's updates, every episode weighing the same (as
`drivers.report.final_return` weighs them); a metric that is no per-episode mean (a loss,
`approx_kl`, ...) is the plain mean of its finite per-update values over the window. The
intermediate values of pruning are the same number over the last window of the updates
done so far.

`"eval_return[:EPISODES]"` scores greedy evaluation instead (RL Zoo's objective): at every
report each lane plays EPISODES episodes (default 10) with argmax / mean actions, as
`pjp.evaluate(..., greedy=True)` does, and the value is their mean return; the trial's
value is the evaluation after its last update, every intermediate value the evaluation
at that report.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from purejaxppo.metrics import METRICS

#: Per-episode means, weighted by the episodes that ended in each update.
PER_EPISODE = ("episode_return", "episode_length")
DIRECTIONS = ("maximize", "minimize")
#: The objective of greedy evaluation episodes at each report.
EVAL_RETURN = "eval_return"
#: Evaluation episodes per report by default (`eval_return`).
EVAL_EPISODES = 10


@dataclasses.dataclass(frozen=True)
class Objective:
    """A trial's objective (see the module docstring).

    Attributes:
      metric: a name of `METRICS` (a per-update training metric).
      window: fraction of the trial's updates averaged, in (0, 1].
      direction: "maximize" or "minimize".
    """

    metric: str = "episode_return"
    window: float = 0.1
    direction: str = "maximize"
    episodes: int = 0  # eval_return: greedy evaluation episodes per report

    @property
    def evaluates(self) -> bool:
        """Whether the objective is greedy evaluation (`eval_return`)."""
        return self.metric == EVAL_RETURN

    @property
    def text(self) -> str:
        """`METRIC:WINDOW` (or `eval_return:EPISODES`), as `parse_objective` reads it."""
        return f"{self.metric}:{self.episodes if self.evaluates else format(self.window, 'g')}"

    def updates(self, num_updates: int) -> int:
        """Updates in the window of a run of `num_updates`: ceil(window x num_updates),
        at least 1."""
        return max(1, math.ceil(self.window * num_updates - 1e-9))

    def value(self, values: np.ndarray, counts: np.ndarray, num_updates: int) -> float:
        """The objective of one run's first `len(values)` updates (all of them: the final
        value; fewer: an intermediate value).

        Args:
          values: float32 `[U]` per-update values of `metric`.
          counts: float32 `[U]` episodes that ended in each update (`episode_count`).
          num_updates: the run's updates (sets the window's length).

        Returns:
          float64 mean over the last `updates(num_updates)` updates; NaN when the window
          holds no finite value (no episode ended in it).
        """
        if self.evaluates:  # values: one evaluation per report so far
            last = float(np.asarray(values, np.float64)[-1]) if len(values) else math.nan
            return last if np.isfinite(last) else math.nan
        k = self.updates(num_updates)
        window = np.asarray(values[-k:], np.float64)
        if self.metric in PER_EPISODE:
            weights = np.asarray(counts[-k:], np.float64)
            keep = (weights > 0) & np.isfinite(window)
            total = float(weights[keep].sum())
            return float((window[keep] * weights[keep]).sum() / total) if total else math.nan
        window = window[np.isfinite(window)]
        return float(window.mean()) if window.size else math.nan


def parse_objective(text: str, direction: str = "maximize") -> Objective:
    """`"METRIC[:WINDOW]"` -> `Objective` (WINDOW default 0.1); `"eval_return[:EPISODES]"`
    (EPISODES default `EVAL_EPISODES`).

    Raises:
      ValueError: naming the value, for an unknown metric (listing them), a window outside
        (0, 1], EPISODES not an integer >= 1, or a direction other than maximize /
        minimize.
    """
    metric, _, window = str(text).partition(":")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r}: must be one of {DIRECTIONS}")
    if metric == EVAL_RETURN:
        episodes = int(window) if window.isdigit() else 0 if window else EVAL_EPISODES
        if episodes < 1:
            raise ValueError(
                f"objective {text!r}: EPISODES {window!r} must be an integer >= 1, e.g. "
                "eval_return:10 (greedy episodes at every report)"
            )
        return Objective(metric=metric, window=1.0, direction=direction, episodes=episodes)
    if metric not in METRICS:
        raise ValueError(
            f"objective {text!r}: unknown metric {metric!r}; one of {', '.join(METRICS)} "
            "(as METRIC or METRIC:WINDOW, e.g. episode_return:0.1), or eval_return[:EPISODES]"
        )
    try:
        fraction = float(window) if window else 0.1
    except ValueError:
        fraction = math.nan
    if not 0 < fraction <= 1:
        raise ValueError(
            f"objective {text!r}: the window {window!r} must be a fraction of the updates "
            "in (0, 1], e.g. episode_return:0.1 for the last 10%"
        )
    return Objective(metric=metric, window=fraction, direction=direction)


def aggregate(values: np.ndarray, how: str = "mean") -> float:
    """A trial's value from its seeds' values (`TuneOptions.aggregate`).

    Args:
      values: float64 `[K]`, one value per seed (NaN: no episode ended in that seed's
        window; left out).
      how: "mean"; "median"; "iqm", the interquartile mean: the mean after cutting
        floor(K / 4) values from each end of the sorted values (as rliable's
        `scipy.stats.trim_mean(values, 0.25)`, Agarwal et al. 2021).

    Returns:
      float; NaN when no value is finite. With K = 1 the value itself.
    """
    finite = np.sort(np.asarray(values, np.float64)[np.isfinite(values)])
    if not finite.size:
        return math.nan
    if how == "median":
        return float(np.median(finite))
    if how == "iqm":
        cut = int(0.25 * finite.size)
        finite = finite[cut : finite.size - cut]
    return float(finite.mean())
