"""Collectives over a mapped axis (inside `shard_map` / `pmap`), for code that takes an
optional `axis_name`; the devices and meshes themselves are `parallel`'s."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["pmean_flat"]


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
    leaves, treedef = jax.tree.flatten(jax.lax.optimization_barrier(tree))
    by_dtype: dict[Any, list[int]] = {}
    for i, leaf in enumerate(leaves):
        by_dtype.setdefault(jnp.result_type(leaf), []).append(i)
    sums = list(leaves)
    for indices in by_dtype.values():
        flat = jnp.concatenate([jnp.ravel(leaves[i]) for i in indices])
        flat = jax.lax.psum(flat, axis_name)
        splits = np.cumsum([np.size(leaves[i]) for i in indices])[:-1]
        for i, part in zip(indices, jnp.split(flat, splits), strict=True):
            sums[i] = part.reshape(np.shape(leaves[i]))
    sums = jax.lax.optimization_barrier(jax.tree.unflatten(treedef, sums))
    return jax.tree.map(lambda x: x / size, sums)
