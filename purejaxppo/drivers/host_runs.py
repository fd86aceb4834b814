"""Several seeds of a host env (gymnasium) for `--num-seeds` (`drivers.seeds`).

A host env steps in Python (`host_train`), so its seeds cannot be vmapped into one
compiled program. `HostRuns` keeps one run per seed, each with its own vector env, and
steps them one after another within each segment; it hands the seeds driver what its
compiled program would: the runs' state stacked `[S, ...]`, metrics `[S, length]` and a
finite-parameters flag per seed. Seed k trains exactly what `purejaxppo train --seed
<seed k>` trains (the same key, the same host-env seeds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.guards import all_finite
from purejaxppo.hyperparams import Hyperparams

__all__ = ["HostRuns"]


def _stack(trees: Sequence[Any]) -> Any:
    """`[S, ...]` leaves from S trees of the same structure (typed keys included)."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


class HostRuns:
    """S host-env runs stepped one after another (module docstring).

    Args:
      make_fns: builds one run's `TrainFns` (called once per seed: each run gets the
        vector env of its own `host_train` update).
      config: the configuration shared by the seeds.
      seeds: the seeds; run k's key is `jax.random.key(seeds[k])`.
      init_params: the warm start, or None.
    """

    def __init__(
        self,
        make_fns: Callable[[], Any],
        config: Any,
        seeds: Sequence[int],
        init_params: Any = None,
    ):
        self.fns = [make_fns() for _ in seeds]
        self.keys = [jax.random.key(seed) for seed in seeds]
        self.hparams = Hyperparams.from_config(config)
        self.init_params = init_params
        self.runners: list[Any] = []

    def init(self) -> Any:
        """Starts every run; returns their state stacked `[S, ...]`."""
        self.runners = [
            jax.jit(fns.init)(key, self.init_params)
            for fns, key in zip(self.fns, self.keys, strict=True)
        ]
        return _stack(self.runners)

    def run(self, length: int) -> tuple[Any, dict[str, np.ndarray], np.ndarray]:
        """`length` updates of every run, one run after another: `(state [S, ...],
        metrics name -> [S, length], params finite bool [S])`."""
        metrics, finite = [], []
        for k, fns in enumerate(self.fns):
            self.runners[k], rows = fns.run(self.runners[k], self.hparams, length)
            metrics.append(rows)
            finite.append(bool(all_finite(self.runners[k].train_state.params)))
        stacked = {name: np.stack([np.asarray(m[name]) for m in metrics]) for name in metrics[0]}
        return _stack(self.runners), stacked, np.array(finite)
