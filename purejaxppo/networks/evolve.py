"""Weight transfer between MLP architectures (AgileRL's evolvable networks, `add_layer` /
`add_node`; Net2Net, Chen et al. 2016, arXiv:1511.05641, for the function-preserving idea).

A member of a PBT population whose `hidden_sizes` change (explore) keeps what it has
learned: `transfer_params(old, new)` fills a freshly initialised parameter tree of the new
architecture (`new`) with the old one's weights, and `transfer_train_state` does the same
for the optimizer's moments. Trees are matched by key (`dense_0`, `dense_1`, ... of each
`DenseStack`, then the heads' `out`), so the rules hold for the actor and critic alike:

* a layer both trees hold: the old kernel `[I, O]` goes into the top-left block of the new
  `[I', O']`; the new units' incoming weights (columns `O:`) keep their fresh
  initialisation and their outgoing weights (rows `I:` of every kernel) are zero; bias
  `[O]` into the first O entries, the rest fresh;
* a layer only the new tree holds (a layer added after the old ones): its first
  `min(I', O')` units copy their input (identity kernel columns, zero bias), the rest are
  fresh units;
* a layer only the old tree holds (fewer layers) is dropped, and narrower layers keep
  their first units: these transfers lose information.

Invariant (tested): widening layers and adding layers leaves the network's outputs
unchanged, exactly, when the activation `a` satisfies `a(0) = 0` (new units start with
zero outgoing weights) and, for an added layer, `a(a(x)) = a(x)` (relu; with tanh an
added identity layer is only near the identity for small pre-activations).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np


def _is_dense(tree: Any) -> bool:
    return isinstance(tree, Mapping) and getattr(tree.get("kernel"), "ndim", 0) == 2


def _block(old: Any, new: Any, zero_new_rows: bool) -> np.ndarray:
    """`new` with `old` in its leading block; with `zero_new_rows`, the rows of a 2-D
    `new` beyond `old`'s (the weights out of new input units) are zero."""
    old, out = np.asarray(old), np.array(new, copy=True)
    if old.shape == out.shape:
        return old.astype(out.dtype, copy=True)
    if old.ndim != out.ndim:
        return out
    common = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, out.shape, strict=True))
    if zero_new_rows and out.ndim == 2:
        out[old.shape[0] :, :] = 0
    out[common] = old[common]
    return out


def _identity_layer(new: Mapping[str, Any]) -> dict[str, np.ndarray]:
    kernel = np.array(new["kernel"], copy=True)
    width = min(kernel.shape)
    kernel[:, :width] = np.eye(kernel.shape[0], width, dtype=kernel.dtype)
    bias = np.array(new["bias"], copy=True)
    bias[:width] = 0
    return {**{k: np.asarray(v) for k, v in new.items()}, "kernel": kernel, "bias": bias}


def _walk(old: Any, new: Any, moments: bool, flat: Any = None) -> Any:
    if flat is not None and _is_flat_moment(old, new, flat):
        (old_size, unravel_old), (new_size, ravel_new, unravel_new) = flat
        moved = _walk(unravel_old(old), unravel_new(new), moments=True)
        return ravel_new(moved)
    if isinstance(new, Mapping):
        if not isinstance(old, Mapping):
            return new
        out = {}
        for name, value in new.items():
            if name in old:
                out[name] = _walk(old[name], value, moments, flat)
            elif _is_dense(value) and not moments and str(name).startswith("dense_"):
                out[name] = _identity_layer(value)
            else:
                out[name] = value
        return out
    if isinstance(new, tuple) and hasattr(new, "_fields"):  # optax states (NamedTuple)
        return type(new)(*(_walk(o, n, moments, flat) for o, n in zip(old, new, strict=True)))
    if isinstance(new, (tuple, list)):
        return type(new)(_walk(o, n, moments, flat) for o, n in zip(old, new, strict=True))
    if hasattr(new, "shape"):
        return _block(old, new, zero_new_rows=not moments)
    return new


def transfer_params(old: Any, new: Any) -> Any:
    """`new` (a freshly initialised parameter tree of the new architecture, nested dicts of
    arrays) with the weights of `old` transferred by the module's rules; host arrays.

    Args:
      old: parameters of the old architecture, e.g. `{"params": {"actor_encoder": ...}}`.
      new: parameters of the new architecture, same keys but for added / removed layers.
    """
    return _walk(old, new, moments=False)


def _is_flat_moment(old: Any, new: Any, flat: Any) -> bool:
    (old_size, _), (new_size, _, _) = flat
    old_shape, new_shape = getattr(old, "shape", None), getattr(new, "shape", None)
    return old_shape == (old_size,) and new_shape == (new_size,)


def _flat_codec(old_params: Any, new_params: Any) -> Any:
    from jax.flatten_util import ravel_pytree

    old_vector, unravel_old = ravel_pytree(old_params)
    new_vector, unravel_new = ravel_pytree(new_params)

    def ravel_new(tree: Any) -> np.ndarray:
        return np.asarray(ravel_pytree(tree)[0])

    def host(unravel):
        return lambda v: jax.tree.map(np.asarray, unravel(v))

    return (old_vector.size, host(unravel_old)), (new_vector.size, ravel_new, host(unravel_new))


def transfer_moments(old: Any, new: Any, old_params: Any = None, new_params: Any = None) -> Any:
    """Optimizer state `new` (freshly initialised for the new parameters: zero moments)
    with `old`'s entries copied where both trees have them (Adam's `mu`, `nu` by block,
    its `count`); entries of new units and added layers keep `new`'s values.

    Moments kept as one raveled vector (`optax.flatten`, float32 `[n_params]`) are
    unraveled with `old_params` / `new_params` (`jax.flatten_util.ravel_pytree`),
    transferred as trees, and raveled again."""
    flat = None if old_params is None else _flat_codec(old_params, new_params)
    return _walk(old, new, moments=True, flat=flat)


def transfer_train_state(old: Any, new: Any) -> Any:
    """A `TrainState` (`params`, `opt_state`) of the new architecture: `new` (freshly
    initialised) with `old`'s parameters (`transfer_params`) and optimizer moments
    (`transfer_moments`)."""
    return new.replace(
        params=transfer_params(old.params, new.params),
        opt_state=transfer_moments(old.opt_state, new.opt_state, old.params, new.params),
    )
