"""Guards against silent failure: non-finite parameters and diverged training.

A PPO run whose losses turn NaN / Inf (a learning rate far too large, an unclipped
gradient) keeps running and produces plausible-looking but meaningless numbers. The
drivers call these checks between jitted segments (cheap: one reduction per array), stop
with `TrainingDiverged`, and never save, evaluate or export non-finite parameters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purejaxppo.metrics import LossMetrics

#: Metrics that must stay finite in a healthy run, in the order they are reported:
#: `LossMetrics`' fields (the `LossTerms` fields and grad_norm, derived, so a new loss term
#: is checked too) but `loss`, their weighted sum, which histories from before it was
#: recorded hold as NaN (a resumed old run). `episode_return` / `episode_length` are NaN
#: where no episode ended and `explained_variance` is NaN where the returns have zero
#: variance: not checked.
LOSS_METRICS = tuple(name for name in LossMetrics._fields if name != "loss")


def check_temperature(temperature: Any) -> float:
    """`temperature` (of `networks.select_action`: 0 greedy, 1 the policy's distribution)
    as a float, after checking it is a finite number >= 0.

    Raises:
      ValueError: naming the value (NaN, Inf, a negative number, not a number).
    """
    try:
        value = float(temperature)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(temperature, bool) or not (math.isfinite(value) and value >= 0):
        raise ValueError(f"temperature={temperature!r}: must be a finite number >= 0")
    return value


class TrainingDiverged(RuntimeError):
    """Training produced non-finite losses or parameters.

    Attributes:
      update: 1-based index of the first update with a non-finite value.
      what: the first non-finite metric (in `LOSS_METRICS` order) or "params".
    """

    def __init__(self, message: str, update: int, what: str):
        super().__init__(message)
        self.update = update
        self.what = what


def first_nonfinite_update(
    metrics: Mapping[str, Any], first_update: int = 1
) -> tuple[int, str] | None:
    """The first update (1-based, counting from `first_update`) and metric name at which a
    `LOSS_METRICS` entry of `metrics` (each `[U]`) is NaN or +-Inf; None if all finite."""
    names = [name for name in LOSS_METRICS if name in metrics]
    if not names:
        return None
    values = np.stack([np.asarray(metrics[name], np.float64).reshape(-1) for name in names])
    bad = ~np.isfinite(values)  # [metric, U]
    if not bad.any():
        return None
    step = int(np.argmax(bad.any(axis=0)))
    return first_update + step, names[int(np.argmax(bad[:, step]))]


def all_finite(tree: Any, batched: bool = False) -> jax.Array:
    """Whether every floating-point leaf of `tree` is finite (no NaN / Inf); traceable.

    Args:
      tree: a pytree of arrays (e.g. the parameters).
      batched: the leaves have a leading axis `[P]` of members (runs); the answer is then
        per member.

    Returns:
      bool `[]` (or `[P]` when `batched`); True for a tree without floating leaves.
    """
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
    if not batched:
        flags = [jnp.all(jnp.isfinite(x)) for x in leaves]
        return jnp.all(jnp.stack(flags)) if flags else jnp.bool_(True)
    ok = jnp.ones(leaves[0].shape[0], bool) if leaves else jnp.ones((), bool)
    for x in leaves:
        ok = ok & jnp.all(jnp.isfinite(x.reshape(x.shape[0], -1)), axis=1)
    return ok


def nonfinite_leaf(params: Any) -> str | None:
    """Path of the first parameter array holding a NaN / Inf (e.g. "['params']['Dense_0']
    ['kernel']"), or None if every floating-point leaf is finite.

    Checked on the host with numpy (one `device_get` of `params`): a jitted check would be
    one more compile before a run's first update, for arrays the size of a network.
    """
    host = jax.device_get(params)
    for path, leaf in jax.tree_util.tree_flatten_with_path(host)[0]:
        array = np.asarray(leaf)
        if jnp.issubdtype(array.dtype, jnp.inexact) and not np.isfinite(array).all():
            return jax.tree_util.keystr(path)
    return None


def check_finite_params(params: Any, what: str) -> None:
    """Raises ValueError if any floating-point array of `params` holds a NaN or Inf.

    Args:
      params: a pytree of arrays (flax params).
      what: what the params are, for the message (e.g. "checkpoint runs/x/checkpoints/
        last/40").

    Raises:
      ValueError: "<what>: parameters are not finite (NaN or Inf in <leaf path>) ...".
    """
    leaf = nonfinite_leaf(params)
    if leaf is not None:
        raise ValueError(
            f"{what}: parameters are not finite (NaN or Inf in {leaf}); the run diverged "
            "- use an earlier checkpoint or retrain with a smaller learning_rate / "
            "max_grad_norm"
        )
