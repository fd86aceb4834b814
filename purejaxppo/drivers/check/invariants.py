"""The invariants `purejaxppo check` reads off a short run on the config's own env: what
every healthy PPO run shows in its first updates, whatever the env.

Each invariant maps the run's metrics (`TrainOutput.metrics`, float32 `[K, U]`) to one
value per seed; the row passes when the median over seeds lies in its range. Sources:
the PPO paper's diagnostics (Schulman et al. 2017) as CleanRL logs them (`approx_kl`,
`clipfrac`, `explained_variance`), and the implementation details of Huang et al. 2022
("The 37 Implementation Details of PPO").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["INVARIANTS", "Invariant"]


class Invariant(NamedTuple):
    """One invariant row.

    Attributes:
      row: the row's name.
      isolates: what it measures.
      points_to: the part of PPO a failure points to.
      measure: `(metrics [K, U] by name, config, stats) -> float64 [K]`; `stats` holds
        the run's final normalisation statistics (or None).
      low, high: the passing range of the median over seeds.
      applies: `config -> None`, or the reason to skip.
      undefined: why the row is skipped when every seed's value is NaN (None: a NaN seed
        fails the row).
      informational: the row is measured and shown but never fails the check.
    """

    row: str
    isolates: str
    points_to: str
    measure: Callable[[dict[str, np.ndarray], Any, Any], np.ndarray]
    low: float
    high: float
    applies: Callable[[Any], str | None] = lambda config: None
    undefined: str | None = None
    informational: bool = False

    @property
    def expected(self) -> str:
        """The passing range as text."""
        if self.informational:
            return "(shown only)"
        if math.isinf(self.high):
            return f">= {self.low:g}"
        if math.isinf(self.low):
            return f"<= {self.high:g}"
        return f"[{self.low:g}, {self.high:g}]"


_LOSSES = ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac", "grad_norm")


def _finite(metrics: dict[str, np.ndarray], config: Any, stats: Any) -> np.ndarray:
    stacked = np.stack([np.asarray(metrics[name]) for name in _LOSSES if name in metrics])
    return np.isfinite(stacked).all(axis=(0, 2)).astype(np.float64)


def _after_first(metrics: dict[str, np.ndarray], name: str) -> np.ndarray:
    values = np.asarray(metrics[name], np.float64)
    return np.nanmean(values[:, 1:] if values.shape[1] > 1 else values, axis=1)


def _approx_kl(metrics: dict[str, np.ndarray], config: Any, stats: Any) -> np.ndarray:
    return _after_first(metrics, "approx_kl")


def _clipfrac(metrics: dict[str, np.ndarray], config: Any, stats: Any) -> np.ndarray:
    return _after_first(metrics, "clipfrac")


def _explained_variance_rise(metrics: dict[str, np.ndarray], config: Any, stats: Any):
    values = np.asarray(metrics["explained_variance"], np.float64)
    third = max(1, values.shape[1] // 3)
    with np.errstate(all="ignore"):
        return np.nanmean(values[:, -third:], axis=1) - np.nanmean(values[:, :third], axis=1)


#: The updates over which the entropy must not collapse.
ENTROPY_UPDATES = 3


def _entropy_kept(metrics: dict[str, np.ndarray], config: Any, stats: Any) -> np.ndarray:
    """The entropy's drop over the first `ENTROPY_UPDATES` updates, as a fraction of the
    first update's |entropy| (a bandit that PPO solves in 10 updates loses most of it by
    then, legitimately; a collapse loses nearly all of it at once)."""
    values = np.asarray(metrics["entropy"], np.float64)
    first = values[:, 0]
    later = values[:, min(ENTROPY_UPDATES, values.shape[1] - 1)]
    with np.errstate(all="ignore"):
        return (first - later) / np.maximum(np.abs(first), 1e-3)


def _statistics_moved(metrics: dict[str, np.ndarray], config: Any, stats: Any) -> np.ndarray:
    """The observation statistics' count over the env steps the run took (1: every
    observation was counted)."""
    steps = np.asarray(metrics["env_steps"], np.float64)[:, -1]
    count = np.asarray(stats["count"], np.float64).reshape(len(steps), -1)[:, 0]
    return count / steps


def _with_minibatch_steps(config: Any) -> str | None:
    if config.update_epochs * config.num_minibatches <= 1:
        return "one minibatch step per update: the ratio never leaves 1"
    return None


def _normalising(config: Any) -> str | None:
    return None if config.normalize_observations else "normalize_observations is off"


INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        row="invariant: finite losses",
        isolates="fraction of seeds whose losses, KL and gradient norm stay finite",
        points_to="numerics: the learning rate, the loss scale, a log of 0 (log-prob of an "
        "impossible action)",
        measure=_finite,
        low=1.0,
        high=math.inf,
    ),
    Invariant(
        row="invariant: approx_kl",
        isolates="mean approx_kl after the first update",
        points_to="the ratio / old log-probs: 0 means the policy never moves or the old "
        "log-probs are recomputed by the new policy; large means they are not the acting "
        "policy's",
        measure=_approx_kl,
        low=1e-6,
        high=0.2,
        applies=_with_minibatch_steps,
    ),
    Invariant(
        row="invariant: clipfrac",
        isolates="mean clipfrac after the first update (0 allowed)",
        points_to="the ratio / old log-probs and clip_coef (nearly every sample's ratio "
        "out of the clip range)",
        measure=_clipfrac,
        low=-math.inf,
        high=0.6,
        applies=_with_minibatch_steps,
    ),
    Invariant(
        row="invariant: explained variance",
        isolates="explained_variance: last third of updates minus first third (informational)",
        points_to="the critic and its value target",
        measure=_explained_variance_rise,
        low=-math.inf,
        high=math.inf,
        undefined="the returns have no variance (every episode returns the same): "
        "explained variance is undefined",
        informational=True,
    ),
    Invariant(
        row="invariant: entropy kept",
        isolates=f"entropy drop over the first {ENTROPY_UPDATES} updates, as a fraction of "
        "the first update's |entropy|",
        points_to="the entropy term, or a learning rate that collapses the policy at once",
        measure=_entropy_kept,
        low=-math.inf,
        high=0.9,
    ),
    Invariant(
        row="invariant: normalisation statistics move",
        isolates="observation statistics' count / env steps taken",
        points_to="the normalisation statistics (updated from every rollout)",
        measure=_statistics_moved,
        low=0.9,
        high=1.5,
        applies=_normalising,
    ),
)
"""The invariants, in the order of the report."""
