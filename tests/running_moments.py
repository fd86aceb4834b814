"""The running moments SB3's `VecNormalize` keeps, replayed in NumPy float64 for the
`normalize_timing: "step"` tests (tests/test_normalize_timing.py, tests/test_parallel.py).

Not a test module (pytest collects only test_*.py).
"""

from __future__ import annotations

import numpy as np

#: The statistics before any sample: count 1e-4, mean 0, var 1 (gymnasium's / SB3's).
PRIOR = (1e-4, np.zeros(1), np.ones(1))


def chan_merge(stats, batch):
    """`(count, mean, var)` after merging `batch` (`[B, ...]`, float64) into `stats`: Chan
    et al.'s parallel merge, what SB3's `RunningMeanStd.update` does."""
    count, mean, var = stats
    n, m, v = batch.shape[0], batch.mean(0), batch.var(0)
    total = count + n
    delta = m - mean
    return (
        total,
        mean + delta * n / total,
        (var * count + v * n + delta**2 * count * n / total) / total,
    )
