"""A wall-clock budget for a peer's tuner that has no option for one (CleanRL's `Tuner`,
RL Zoo's `train.py --optimize`): both end in `optuna.Study.optimize(objective, n_trials=...)`,
so `limit_optimize(seconds)` makes every later `optimize` call pass Optuna's own `timeout`
as well. Optuna then starts no trial once `seconds` have passed since `optimize` began
and lets the running one finish (so a study ends up to one trial past its budget; the
caller records the wall time it really took).

Imports only Optuna (run inside the peers' virtualenvs).
"""

from __future__ import annotations

import functools

__all__ = ["limit_optimize"]


def limit_optimize(seconds: float) -> None:
    """Every later `optuna.Study.optimize` call stops starting trials after `seconds`.

    Raises:
      ValueError: `seconds` is not positive.
    """
    if not seconds > 0:
        raise ValueError(f"limit_optimize: seconds must be > 0, got {seconds!r}")
    import optuna

    original = optuna.study.Study.optimize
    if getattr(original, "budget_s", None) is not None:
        original = original.__wrapped__

    @functools.wraps(original)
    def optimize(self, func, *args, **kwargs):
        kwargs["timeout"] = seconds
        return original(self, func, *args, **kwargs)

    optimize.budget_s = seconds
    optuna.study.Study.optimize = optimize
