"""Warm start: a run's initial params / normalisation statistics / optimizer state taken
from another run (`PPOConfig.init_from`, `make_train(config, init_params=...)`).

The parts (`PPOConfig.init_parts`, `INIT_PARTS`):

- "params": every collection of the params tree but the normalisation statistics (the
  actor-critic's weights, flax's `"params"`);
- "normalization": the `obs_norm` / `reward_norm` collections (`purejaxppo.normalize`);
- "optimizer": the optimizer state (Adam's moments and its count, which also sets where
  `anneal_lr`'s schedule starts).

What is not taken comes from the run's own `init(key)`. `apply_init` is pure and works on
traced arrays, so `init_params` can be an argument of a jitted / vmapped program: every
seed of `--num-seeds`, every run of a sweep and every PBT member starts from the same
source. `check_init` compares shapes before anything compiles.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from purejaxppo.config_checks import INIT_PARTS
from purejaxppo.normalize import COLLECTIONS
from purejaxppo.types import Params, TrainState

__all__ = ["INIT_PARTS", "apply_init", "check_init", "source_parts"]


def _select(params: Params, parts: tuple[str, ...]) -> dict[str, Any]:
    """The collections of `params` that `parts` take."""
    take_norm, take_params = "normalization" in parts, "params" in parts
    return {
        k: v
        for k, v in params.items()
        if (k in COLLECTIONS and take_norm) or (k not in COLLECTIONS and take_params)
    }


def source_parts(source: TrainState | Params, parts: tuple[str, ...]) -> dict[str, Any]:
    """`{"params": {collection: tree}, "opt_state": tree | None}`: what `parts` take of
    `source` (a `TrainState`, or a params tree when the optimizer is not taken).

    Raises:
      ValueError: "optimizer" in `parts` with a bare params tree; an unknown part.
    """
    unknown = [p for p in parts if p not in INIT_PARTS]
    if unknown:
        raise ValueError(f"init_parts={list(parts)}: {unknown} not in {INIT_PARTS}")
    if isinstance(source, TrainState):
        params, opt_state = source.params, source.opt_state
    else:
        params, opt_state = source, None
    if "optimizer" in parts and opt_state is None:
        raise ValueError(
            'init_parts includes "optimizer": pass a TrainState (params and opt_state) as '
            "init_params, not a params tree"
        )
    return {
        "params": _select(dict(params), parts),
        "opt_state": opt_state if "optimizer" in parts else None,
    }


def check_init(target: TrainState, source: dict[str, Any], parts: tuple[str, ...]) -> None:
    """Raises a ValueError naming the first layer whose path or shape differs between the
    run's own initial state `target` (arrays or `jax.ShapeDtypeStruct`s) and `source`
    (`source_parts`): another network shape, another env's observation / action sizes,
    normalisation on in one run and off in the other, or another optimizer."""
    want = {"params": _select(dict(target.params), parts)}
    got = {"params": source["params"]}
    if source["opt_state"] is not None:
        want["opt_state"], got["opt_state"] = target.opt_state, source["opt_state"]
    want_leaves = {_name(p): v for p, v in _leaves(want)}
    got_leaves = {_name(p): v for p, v in _leaves(got)}
    for name, leaf in want_leaves.items():
        if name not in got_leaves:
            raise ValueError(
                f"init_params: the source has no layer {name} (shape {np.shape(leaf)}) that "
                f"this config's network / env needs (init_parts={list(parts)})"
            )
        if tuple(np.shape(got_leaves[name])) != tuple(np.shape(leaf)):
            raise ValueError(
                f"init_params: layer {name} has shape {tuple(np.shape(got_leaves[name]))} in "
                f"the source, this config's network / env needs {tuple(np.shape(leaf))}"
            )
    extra = [name for name in got_leaves if name not in want_leaves]
    if extra:
        raise ValueError(
            f"init_params: the source has layer {extra[0]} (shape "
            f"{tuple(np.shape(got_leaves[extra[0]]))}) that this config's network / env "
            f"does not have (init_parts={list(parts)})"
        )


def _leaves(tree: Any) -> list[tuple[Any, Any]]:
    return jax.tree_util.tree_flatten_with_path(tree)[0]


def _name(path: tuple[Any, ...]) -> str:
    """'params/actor_encoder/obs_mlp/dense_0/bias' for a tree path (flax's own "params"
    collection name appears once)."""
    names = []
    for key in path:
        for attr in ("key", "name", "idx"):
            if hasattr(key, attr):
                names.append(str(getattr(key, attr)))
                break
    if names[:2] == ["params", "params"]:
        names = names[1:]
    return "/".join(names)


def apply_init(train_state: TrainState, source: dict[str, Any]) -> TrainState:
    """`train_state` with the collections (and optimizer state) of `source` (pure,
    jittable; `source` as `source_parts` returns it, already checked by `check_init`)."""
    params = dict(train_state.params)
    for name, tree in source["params"].items():
        params[name] = jax.tree.map(
            lambda new, old: jax.numpy.asarray(new, old.dtype), tree, params[name]
        )
    opt_state = train_state.opt_state
    if source["opt_state"] is not None:
        leaves, treedef = jax.tree.flatten(opt_state)
        new = jax.tree.leaves(source["opt_state"])
        opt_state = jax.tree.unflatten(
            treedef, [jax.numpy.asarray(n, o.dtype) for n, o in zip(new, leaves, strict=True)]
        )
    return train_state.replace(params=params, opt_state=opt_state)
