"""Collectives over a mapped axis (inside `shard_map` / `pmap`), for code that takes an
optional `axis_name`; the devices and meshes themselves are `parallel`'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["all_gather_flat", "merged_moments", "pmean_flat", "psum_flat"]


def pmean_flat(tree: Any, axis_name: str) -> Any:
    """`lax.pmean(tree, axis_name)` with one all-reduce per dtype: the leaves are ravelled
    into one vector, summed over the devices of `axis_name`, split back and divided by
    the device count.

    XLA already combines the per-leaf all-reduces of a pytree into one op, but XLA:CPU's
    gloo collectives (multi-process runs, `initialize_distributed`) then run one
    allreduce per operand, each a loopback or network round trip (~0.2 ms on a 2-core
    host): the CartPole MLP's gradient and loss terms, 18 arrays, cost 18 of them per
    minibatch step. The numbers are `lax.pmean`'s bit for bit (checked for 1 and 2
    devices, XLA:CPU, jax 0.10.2): the optimisation barriers keep XLA from fusing the
    leaves' producers and consumers differently than around the per-leaf all-reduce.
    One device: `lax.pmean` itself.

    Args:
      tree: a pytree of floating-point arrays of any shapes (e.g. the gradients).
      axis_name: the mapped axis (inside `shard_map` / `pmap`).

    Returns:
      The pytree of the same structure, shapes and dtypes, averaged over the axis.
    """
    size = jax.lax.axis_size(axis_name)
    if size == 1:
        return jax.lax.pmean(tree, axis_name)
    return jax.tree.map(lambda x: x / size, psum_flat(tree, axis_name))


def psum_flat(tree: Any, axis_name: str) -> Any:
    """`lax.psum(tree, axis_name)` with one all-reduce per dtype (see `pmean_flat`).

    Args:
      tree: a pytree of numeric arrays of any shapes (e.g. episode sums and counts).
      axis_name: the mapped axis (inside `shard_map` / `pmap`).

    Returns:
      The pytree of the same structure, shapes and dtypes, summed over the axis.
    """
    if jax.lax.axis_size(axis_name) == 1:
        return jax.lax.psum(tree, axis_name)
    summed = _per_dtype(jax.lax.optimization_barrier(tree), lambda v: jax.lax.psum(v, axis_name))
    return jax.lax.optimization_barrier(summed)


def _per_dtype(tree: Any, collective: Callable[[jax.Array], jax.Array], rows: int = 0) -> Any:
    """`collective` of the leaves of each dtype ravelled into one vector `[n]`, giving
    `[n]` (`rows` 0) or `[rows, n]`, split back into the leaves' shapes (after `rows`)."""
    leaves, treedef = jax.tree.flatten(tree)
    by_dtype: dict[Any, list[int]] = {}
    for i, leaf in enumerate(leaves):
        by_dtype.setdefault(jnp.result_type(leaf), []).append(i)
    out = list(leaves)
    for indices in by_dtype.values():
        flat = collective(jnp.concatenate([jnp.ravel(leaves[i]) for i in indices]))
        splits = np.cumsum([np.size(leaves[i]) for i in indices])[:-1]
        for i, part in zip(indices, jnp.split(flat, splits, axis=-1), strict=True):
            out[i] = part.reshape((rows, *np.shape(leaves[i])) if rows else np.shape(leaves[i]))
    return jax.tree.unflatten(treedef, out)


def all_gather_flat(tree: Any, axis_name: str) -> Any:
    """Every device's `tree`, stacked: each leaf `[*shape]` becomes `[D, *shape]` (D devices
    on `axis_name`, in axis-index order), with one all-reduce per dtype.

    Each device writes its leaves, ravelled into one vector, into its own row of a `[D, n]`
    zero array, and the rows are summed over the axis (`lax.psum`): every sum adds zeros
    to one value, so the result is exact (up to the sign of a zero) and the same on every
    device. Statistics merged from it on each device (`merged_moments`, the advantage
    normalisation of `update.make_minibatch_grads`) are computed in the same order
    everywhere, so they are bitwise identical on every device and depend on D and each
    device's samples only, not on how the devices are spread over processes. Meant for
    small trees (statistics): D times the data crosses the axis.

    Args:
      tree: a pytree of numeric arrays of any shapes and dtypes.
      axis_name: the mapped axis (inside `shard_map` / `pmap`).

    Returns:
      The pytree of the same structure, every leaf `[D, *shape]` of its dtype.
    """
    size = jax.lax.axis_size(axis_name)
    index = jax.lax.axis_index(axis_name)

    def gather(flat: jax.Array) -> jax.Array:
        rows = jnp.zeros((size, flat.size), flat.dtype).at[index].set(flat)
        return jax.lax.psum(rows, axis_name)

    return _per_dtype(tree, gather, rows=size)


def merged_moments(mean: Any, var: Any, axis_name: str) -> tuple[Any, Any]:
    """The mean and variance of every device's samples together, from each device's own
    mean and (population) variance of equally many samples, with one all-reduce
    (`all_gather_flat`): mean = mean_d(mean_d), var = mean_d(var_d) + mean_d((mean_d -
    mean)^2) (Chan et al. 1979, the parallel merge; no cancellation of large means).

    Args:
      mean, var: pytrees of the same structure, float arrays of any shapes: this device's
        moments over its samples (the same sample count on every device).
      axis_name: the mapped axis (inside `shard_map` / `pmap`).

    Returns:
      `(mean, var)` of the same structure, shapes and dtypes, identical on every device.
    """
    means, variances = all_gather_flat((mean, var), axis_name)
    mean = jax.tree.map(lambda m: jnp.mean(m, axis=0), means)
    var = jax.tree.map(
        lambda v, m, g: jnp.mean(v, axis=0) + jnp.mean(jnp.square(m - g), axis=0),
        variances,
        means,
        mean,
    )
    return mean, var
