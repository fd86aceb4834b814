"""Checks of what `Policy` is asked to act on: observations of the observation space's
structure and shape, and finite; actions of the action space's shape and values; action
masks of `[B, A]` that leave every row an action.

`check_count`, `check_flag`, `check_key` and `sampling` check the plain arguments of the
acting API (`max_steps`, `num_episodes`, `greedy`, `key`, `temperature`), accepting numpy
scalars and 0-d arrays as Python numbers; `check_params` and `check_state` check params
and recurrent states against the policy's own (shapes only), and `refuse_traced_state`
keeps traced inputs away from the state a recurrent `Policy` keeps.

The value checks look at concrete arrays only (numpy, or jax arrays outside a trace), with one
numpy pass; an argument that is a tracer (inside `jax.jit`, `vmap`, `grad`, `lax.scan`)
is not looked at, so traced calls stay free of host work. Each raises a `ValueError`
naming the argument, the first offending entry by its index, its value and what the
space allows.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces

from purejaxppo.actions import action_shape
from purejaxppo.guards import check_finite_params, check_temperature
from purejaxppo.networks import ActionSpec

#: Slack of the squashed-Box bound check, relative to |low| + |high|: `mid + half *
#: tanh(u)` at a saturated tanh may round a few float32 ulps past a bound.
BOUND_SLACK = 1e-5

#: Row indices named in a message at most.
MAX_NAMED = 10


def traced(*trees: Any) -> bool:
    """Whether any leaf of `trees` is a JAX tracer (the call is being transformed)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(trees))


def check_count(name: str, value: Any, minimum: int = 1) -> int:
    """`value` as an int, after checking it is an integer >= `minimum`: a Python int, a
    numpy integer scalar (`np.int64(8)`) or a 0-d integer array; not a bool, a float
    (`2.5`, nor an integral `2.0`) or a tracer.

    Raises:
      ValueError: "max_steps=-5: must be an int >= 1", naming `name` and the value.
    """
    try:
        if isinstance(value, (bool, np.bool_)) or traced(value):
            raise TypeError
        count = operator.index(value)
    except TypeError:
        count = None
    if count is None or count < minimum:
        raise ValueError(f"{name}={value!r}: must be an int >= {minimum}")
    return count


def check_flag(name: str, value: Any) -> bool:
    """`value` as a bool, after checking it is one (`True` / `False`, or `np.bool_`):
    a string such as `'no'` is truthy, and 0 / 1 are not flags.

    Raises:
      TypeError: "greedy='no': must be a bool (True or False)", naming `name`.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}={value!r}: must be a bool (True or False)")
    return bool(value)


def check_key(name: str, key: Any) -> None:
    """Raises unless `key` is one PRNG key: a typed key (`jax.random.key(seed)`, shape
    `()`) or a raw uint32 key of shape `(2,)` (`jax.random.PRNGKey(seed)`). Looks at the
    shape and dtype only, so a traced key is checked too (at no cost).

    Raises:
      TypeError: naming `name` and what was given (an int seed: pass
        `jax.random.key(seed)`).
    """
    dtype = getattr(key, "dtype", None)
    shape = tuple(getattr(key, "shape", ()))
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if shape == ():
            return
        what = f"a batch of keys of shape {shape}"
    elif dtype is not None and str(dtype) == "uint32" and shape == (2,):
        return
    elif dtype is not None and shape:
        what = f"an array of shape {shape} and dtype {dtype}"
    else:
        what = f"{key!r} ({type(key).__name__})"
    if _is_int(key):
        seed = int(key)
        what = f"{seed} ({type(key).__name__}); for the seed {seed} pass jax.random.key({seed})"
    raise TypeError(f"{name}: expected one PRNG key (jax.random.key(seed)), got {what}")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def sampling(name: str, key: Any, temperature: Any) -> tuple[jax.Array, float]:
    """`(key, temperature)` of one policy step (`Policy.act`): a given key (checked, see
    `check_key`) samples at `temperature`, 1 unless given; without a key the step is
    greedy (temperature 0, with a key that is not used).

    Raises:
      ValueError: a temperature that is not a finite number >= 0, or one > 0 without a key.
      TypeError: a `key` that is not one PRNG key.
    """
    if key is not None:
        check_key(f"{name}: key", key)
    if temperature is not None:
        temperature = check_temperature(temperature)
    if key is None:
        if temperature:
            raise ValueError(
                f"temperature={temperature!r} samples, which needs a key: pass key=, or "
                "leave temperature unset with key=None for the greedy action"
            )
        return jax.random.key(0), 0.0  # greedy: the key is not used
    return key, 1.0 if temperature is None else temperature


def check_params(name: str, params: Any, reference: Any) -> None:
    """Raises unless `params` have the structure and leaf shapes of `reference` (the
    policy's own params). Shapes only: traced params are checked too.

    Raises:
      ValueError: naming `name` and the first leaf that is missing, unexpected or of
        another shape.
    """
    want = {jax.tree_util.keystr(p): np.shape(x) for p, x in _leaves(reference)}
    got = {jax.tree_util.keystr(p): np.shape(x) for p, x in _leaves(params)}
    if want == got:
        return
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    if not got:
        what = f"a {type(params).__name__} with no array leaves"
    elif missing or extra:
        what = f"no leaf {missing[0]}" if missing else f"an unexpected leaf {extra[0]}"
        what += f"; {len(missing)} missing, {len(extra)} unexpected leaves"
    else:
        leaf = next(k for k in want if want[k] != got[k])
        what = f"{leaf} has shape {got[leaf]}, the policy's {want[leaf]}"
    raise ValueError(
        f"{name} do not match this policy's ({what}); pass the params of a policy of "
        "the same config (policy.get_params())"
    )


def _leaves(tree: Any) -> list[tuple[Any, Any]]:
    return jax.tree_util.tree_flatten_with_path(tree)[0]


def check_params_finite(params: Any, what: str) -> None:
    """A policy never acts with NaN / Inf params (it would return action 0 silently):
    `guards.check_finite_params` on concrete params; traced ones are not looked at.

    Raises:
      ValueError: "<what>: parameters are not finite (NaN or Inf in <leaf path>) ...".
    """
    if not traced(params):
        check_finite_params(params, what)


def check_state(name: str, state: Any, initial: Any, size: int) -> None:
    """Raises unless `state` has the structure and leaf shapes of `initial`, the policy
    state of `size` envs (shapes only).

    Raises:
      ValueError: naming `name`, the expected and the given shapes.
    """
    want = jax.tree.map(np.shape, initial)
    try:
        got = jax.tree.map(np.shape, state)
    except Exception:  # noqa: BLE001  (a leaf np.shape cannot read)
        got = type(state).__name__
    if jax.tree.structure(want) != jax.tree.structure(got) or want != got:
        raise ValueError(
            f"{name}: expected the policy state of {size} envs, shape {want}, got {got}"
        )


def refuse_traced_state(method: str, *trees: Any) -> None:
    """A recurrent policy keeps its state on the object: raises when any leaf of `trees`
    (the inputs, and the kept state) is traced, before any of it reaches that state.

    Raises:
      ValueError: naming `Policy.<method>` and the pure step to use instead.
    """
    if traced(*trees):
        raise ValueError(
            f"Policy.{method}: a recurrent policy keeps its state on the Python object "
            "and cannot step inside jax.jit / vmap / lax.scan (a traced state would be "
            "kept); call it outside the transform, or step with the pure "
            "`step = purejaxppo.actions.make_get_action(policy.networks)`, which takes "
            "and returns the state: `state, out = step(params, state, obs, reset, key, "
            "mask, greedy=False)` from `state = policy.initial_state(B)`"
        )


def observation_shapes(space: Any) -> Any:
    """Shapes of one observation: a tuple for an array space, or a dict / list of them
    for gymnax `Dict` / `Tuple` spaces (the structure `Policy.act` and `evaluate` check)."""
    if isinstance(space, spaces.Dict):
        return {k: observation_shapes(s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return [observation_shapes(s) for s in space.spaces]
    return tuple(int(s) for s in space.shape)


def batch_observation(obs: Any, shapes: Any) -> tuple[Any, bool]:
    """`(obs with a leading batch axis, whether obs was one observation)`.

    `obs` is an array (or a dict / tuple of arrays, like the space) of one observation
    `[*shape]` or a batch `[B, *shape]`; every entry must agree. Concrete floating-point
    entries must be finite (a NaN / inf observation would silently give action 0); traced
    entries (inside `jax.jit` / `vmap`) are not checked.

    Raises:
      ValueError: naming the entry whose structure or shape does not fit `shapes`, an
        empty batch (`[0, *shape]`), or a concrete entry holding a NaN / inf (naming the
        entry and the first such index, e.g. "obs[3, 1] = nan").
    """
    leaves: list[tuple[str, jax.Array, tuple[int, ...]]] = []

    def visit(node: Any, want: Any, name: str) -> Any:
        if isinstance(want, dict):
            if not isinstance(node, Mapping) or set(node) != set(want):
                got = sorted(node) if isinstance(node, Mapping) else type(node).__name__
                raise ValueError(f"{name}: expected a dict with keys {sorted(want)}, got {got}")
            return {k: visit(node[k], want[k], f"{name}[{k!r}]") for k in want}
        if isinstance(want, list):
            if not isinstance(node, Sequence) or len(node) != len(want):
                raise ValueError(f"{name}: expected a tuple of {len(want)} arrays")
            return tuple(
                visit(n, w, f"{name}[{i}]") for i, (n, w) in enumerate(zip(node, want, strict=True))
            )
        array = jnp.asarray(node)
        if array.shape != want and array.shape[1:] != want:
            raise ValueError(f"{name} shape {array.shape}: expected {want} or [B, *{want}]")
        check_finite(name, node)
        leaves.append((name, array, want))
        return array

    tree = visit(obs, shapes, "obs")
    singles = {array.shape == want for _, array, want in leaves}
    batches = {array.shape[0] for _, array, want in leaves if array.shape != want}
    if len(singles) > 1 or len(batches) > 1:
        got = {name: array.shape for name, array, _ in leaves}
        raise ValueError(f"obs entries disagree on the batch size: {got}")
    if batches == {0}:
        got = {name: array.shape for name, array, _ in leaves}
        got = got["obs"] if list(got) == ["obs"] else got
        raise ValueError(f"obs has shape {got}: an empty batch (B = 0); give B >= 1 observations")
    single = singles == {True}
    if single:
        tree = jax.tree.map(lambda x: x[None], tree)
    return tree, single


def checked_actions(
    spec: ActionSpec, actions: Any, size: int, single: bool, *, bounded: bool
) -> jax.Array:
    """`actions` as `[B, *action_shape(spec)]` int32 / float32 (Box: also given in the env's
    shape), after checking their shape and (concrete) values (`check_action_values`).

    Raises:
      ValueError: another shape than expected (naming both), or a value outside the space.
    """
    array = jnp.asarray(actions)
    one = action_shape(spec)
    want = one if single else (size, *one)
    env_shape = spec.shape if single else (size, *spec.shape)
    if spec.kind == "continuous" and array.shape == env_shape:
        array = array.reshape(want)
    if array.shape != want:
        raise ValueError(
            f"actions: expected shape {want} ({spec.kind} actions of shape {one} for "
            f"{'one observation' if single else f'B = {size} observations'}), "
            f"got {array.shape}"
        )
    check_action_values("actions", actions, spec, bounded=bounded)
    array = array.astype(jnp.float32 if spec.kind == "continuous" else jnp.int32)
    return array[None] if single else array


def checked_action(spec: ActionSpec, action: Any) -> tuple[jax.Array, bool]:
    """`(action as [B, *action_shape(spec)], whether one action was given)`: one action
    or a batch, as `get_action` returns them, after checking the shape and (concrete)
    values (`check_action_values`; any finite Box action).

    Raises:
      ValueError: another shape than `get_action` returns, or a value outside the space.
    """
    array = jnp.asarray(action)
    one = action_shape(spec)
    if array.shape != one and array.shape[1:] != one:
        raise ValueError(
            f"action: expected shape {one} or [B, *{one}] ({spec.kind} actions), got {array.shape}"
        )
    check_action_values("action", action, spec, bounded=False)
    single = array.shape == one
    return (array[None] if single else array), single


def checked_mask(spec: ActionSpec, mask: Any, size: int, single: bool) -> jax.Array | None:
    """`action_mask` as `[B, A]` (bool / 0-1; `[A]` for one observation), or None.

    Raises:
      ValueError: a mask on Box / MultiBinary actions, of another shape than `[B, A]`, or
        (concrete) with rows that allow no action (`check_mask_rows`).
    """
    if mask is None:
        return None
    if spec.kind not in ("discrete", "multi_discrete"):
        raise ValueError(
            f"action_mask: only Discrete and MultiDiscrete actions can be masked; this "
            f"policy's actions are {spec.kind}"
        )
    array = jnp.asarray(mask)
    want = (spec.num_actions,) if single else (size, spec.num_actions)
    if array.shape != want:
        raise ValueError(
            f"action_mask: expected shape {want} (one flag per action"
            f"{'' if single else f' for B = {size} observations'}), got {array.shape}"
        )
    check_mask_rows(mask, spec, single)
    return array[None] if single else array


def _at(name: str, index: tuple[int, ...]) -> str:
    return f"{name}[{', '.join(str(int(i)) for i in index)}]" if index else name


def _first(bad: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))


def describe_actions(spec: ActionSpec) -> str:
    """The action space and the values it allows, e.g. "Discrete(2): integers in [0, 2)"."""
    if spec.kind == "discrete":
        return f"Discrete({spec.num_actions}): integers in [0, {spec.num_actions})"
    if spec.kind == "multi_discrete":
        nvec = tuple(int(n) for n in spec.nvec)
        return f"MultiDiscrete(nvec={nvec}): component k an integer in [0, nvec[k])"
    if spec.kind == "multi_binary":
        return f"MultiBinary({spec.num_actions}): 0 or 1 per bit"
    low, high = np.asarray(spec.low), np.asarray(spec.high)
    if low.size and np.all(low == low.flat[0]) and np.all(high == high.flat[0]):
        low, high = low.flat[0], high.flat[0]
    return f"Box(shape {tuple(spec.shape)}, low={low}, high={high})"


def check_finite(name: str, x: Any) -> None:
    """Raises if the floating-point array `x` holds a NaN or inf (integer and bool arrays
    are finite; a tracer is not checked).

    Raises:
      ValueError: "obs[3, 1] = nan: must be finite ..." naming the first non-finite entry.
    """
    if traced(x):
        return
    array = np.asarray(x)
    if not np.issubdtype(array.dtype, np.inexact):
        return
    finite = np.isfinite(array)
    if finite.all():
        return
    index = _first(~finite)
    raise ValueError(
        f"{_at(name, index)} = {array[index]}: must be finite; {name} (shape {array.shape}) "
        f"holds {int(np.size(finite) - np.count_nonzero(finite))} NaN / inf entries, the "
        "first at that index"
    )


def check_action_values(name: str, actions: Any, spec: ActionSpec, *, bounded: bool) -> None:
    """Raises if `actions` (one action or a batch, in the policy's or the env's action
    shape) are not values of the action space.

    Discrete, MultiDiscrete and MultiBinary actions must be finite integers (integral
    floats are accepted) in [0, n), per component [0, nvec[k]), or {0, 1}. Box actions must
    be finite; with `bounded` (squashed Gaussians, whose actions lie within the bounds)
    also within [low, high] up to `BOUND_SLACK`. Without it any finite Box action is
    valid: an unbounded Gaussian gives every real action a density. A tracer is not
    checked.

    Raises:
      ValueError: naming `name`, the first bad entry's index and value, and the space.
    """
    if traced(actions):
        return
    array = np.asarray(actions)
    space = describe_actions(spec)
    if np.issubdtype(array.dtype, np.inexact):
        finite = np.isfinite(array)
        if not finite.all():
            index = _first(~finite)
            raise ValueError(f"{_at(name, index)} = {array[index]}: must be finite ({space})")
    if spec.kind == "continuous":
        if not bounded:
            return
        low, high = np.asarray(spec.low, np.float32), np.asarray(spec.high, np.float32)
        if array.shape[array.ndim - low.ndim :] != low.shape:
            low, high = low.reshape(-1), high.reshape(-1)  # the policy's flat [A] actions
        slack = BOUND_SLACK * (np.abs(low) + np.abs(high))
        bad = (array < low - slack) | (array > high + slack)
        if bad.any():
            index = _first(bad)
            raise ValueError(
                f"{_at(name, index)} = {array[index]}: outside the bounds [low, high] of "
                f"{space}; squashed actions lie within them (out of them the policy's "
                "probability is 0)"
            )
        return
    if np.issubdtype(array.dtype, np.inexact):
        fractional = array != np.floor(array)
        if fractional.any():
            index = _first(fractional)
            raise ValueError(f"{_at(name, index)} = {array[index]}: not an integer ({space})")
    if spec.kind == "multi_discrete":
        upper = np.asarray(spec.nvec)
    else:
        upper = np.asarray(spec.num_actions if spec.kind == "discrete" else 2)
    bad = (array < 0) | (array >= upper)
    if bad.any():
        index = _first(bad)
        top = upper[index[-1]] if upper.ndim else upper
        raise ValueError(f"{_at(name, index)} = {array[index]}: outside [0, {int(top)}) ({space})")


def check_mask_rows(mask: Any, spec: ActionSpec, single: bool) -> None:
    """Raises if a row of `action_mask` (`[B, A]`, or `[A]` for one observation; nonzero =
    allowed) allows no action: for MultiDiscrete, no value of some component (the flat
    mask's entries `[sum(nvec[:k]), sum(nvec[:k + 1]))`). A tracer is not checked.

    Raises:
      ValueError: naming `action_mask` and the rows (and components) with no allowed action.
    """
    if traced(mask):
        return
    allowed = np.asarray(mask).reshape(-1, spec.num_actions) != 0  # [B, A]
    if spec.kind == "multi_discrete":
        edges = np.cumsum((0, *spec.nvec))
        free = np.stack(
            [allowed[:, a:b].any(axis=1) for a, b in zip(edges[:-1], edges[1:], strict=True)], 1
        )  # [B, K]
    else:
        free = allowed.any(axis=1, keepdims=True)  # [B, 1]
    empty = ~free
    if not empty.any():
        return
    rows = np.flatnonzero(empty.any(axis=1))
    named = ", ".join(str(r) for r in rows[:MAX_NAMED]) + (", ..." if len(rows) > MAX_NAMED else "")
    where = "action_mask" if single else f"action_mask rows [{named}] ({len(rows)} of {len(free)})"
    verb = "allows" if single else "allow"
    if spec.kind == "multi_discrete":
        first = np.flatnonzero(empty[rows[0]]).tolist()
        what = f"no value of components {first}" + ("" if single else f" in row {rows[0]}")
        need = "each component needs a nonzero entry among its nvec[k] flat entries"
    else:
        what, need = "no action", "each row needs a nonzero entry"
    raise ValueError(f"{where} {verb} {what}: {need} ({describe_actions(spec)})")
