"""Metrics streamed to the host while one jitted training call runs.

`make_emitter(fn)` builds `emit(run_index, update, metrics)`, a traced no-output function
that hands one update's reduced metrics to the host through `jax.debug.callback`. It has
a custom `vmap` rule (`jax.custom_batching.custom_vmap`): under `vmap` over S runs (and
nested `vmap`s) the host gets ONE call with the `[S]` batch, and `fn` is then called once
per run, in row order, instead of S device-to-host transfers per update. The callback of
`make_train(config, callback=fn, callback_every=k)` is built on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: `fn(run, update, metrics)`: run index (int), updates done (int, 1-based), and the
#: update's metrics as Python floats.
MetricsCallback = Callable[[int, int, dict[str, float]], Any]


def make_emitter(fn: MetricsCallback) -> Callable[[jax.Array, jax.Array, Mapping], jax.Array]:
    """`emit(run_index, update, metrics) -> int32 0` calling `fn` on the host per run.

    `run_index` int32 scalar: the run's index, or -1 for "its position in the vmapped
    batch" (row-major over nested `vmap`s; 0 without `vmap`). `update` int32 scalar,
    `metrics` a dict of float32 scalars. Calls are unordered between runs of different
    programs but each run's updates arrive in order within one program (one host call per
    emitted update, sequenced by the scan).
    """

    def host(run_index: np.ndarray, update: np.ndarray, metrics: dict[str, np.ndarray]) -> None:
        run_index = np.asarray(run_index).reshape(-1)
        update = np.asarray(update).reshape(-1)
        columns = {name: np.asarray(v).reshape(-1) for name, v in metrics.items()}
        for row in range(run_index.shape[0]):
            run = row if run_index[row] < 0 else int(run_index[row])
            fn(run, int(update[row]), {name: float(v[row]) for name, v in columns.items()})

    @jax.custom_batching.custom_vmap
    def emit(run_index: jax.Array, update: jax.Array, metrics: Mapping) -> jax.Array:
        jax.debug.callback(host, run_index, update, dict(metrics))
        return jnp.zeros((), jnp.int32)

    @emit.def_vmap
    def _emit_batched(axis_size, in_batched, run_index, update, metrics):
        def broadcast(x, batched):
            return x if batched else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))

        run_index, update, metrics = jax.tree.map(
            broadcast, (run_index, update, metrics), tuple(in_batched)
        )
        out = emit(run_index, update, metrics)  # one host call with the whole batch
        return jnp.broadcast_to(out, (axis_size, *out.shape)), True

    return emit
