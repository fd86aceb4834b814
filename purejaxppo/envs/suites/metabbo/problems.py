"""BBOB problem instances for the `metabbo:` envs: the 24 noiseless BBOB functions of
evosax's `MetaBBOBProblem` (Hansen et al. 2009, https://inria.hal.science/inria-00362633),
MetaBox's train / test partitions of them, and the checks of function ids and dimensions.

Functions are named by their BBOB id 1..24 (f1 sphere ... f24 Lunacek bi-Rastrigin, the
order of `evosax.problems.bbob.bbob_fns.bbob_fns`) or by evosax's name ("sphere", ...).
An instance is a function plus a shift `x_opt` in [-4, 4]^D, an offset `f_opt` (Cauchy,
clipped to [-1000, 1000]) and rotations R, Q, all drawn by `MetaBBOBProblem.sample_params`
from the instance key. The envs work with the cost `f(x) - f_opt` (>= 0, 0 at the optimum),
as MetaBox does (its problems expose the optimum to compute costs and rewards).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

#: evosax names of the BBOB functions in BBOB order: FUNCTION_NAMES[i] is f_{i+1}.
FUNCTION_NAMES = (
    "sphere",
    "ellipsoidal",
    "rastrigin",
    "bueche_rastrigin",
    "linear_slope",
    "attractive_sector",
    "step_ellipsoidal",
    "rosenbrock",
    "rosenbrock_rotated",
    "ellipsoidal_rotated",
    "discus",
    "bent_cigar",
    "sharp_ridge",
    "different_powers",
    "rastrigin_rotated",
    "weierstrass",
    "schaffers_f7",
    "schaffers_f7_ill_cond",
    "griewank_rosenbrock",
    "schwefel",
    "gallagher_101_me",
    "gallagher_21_hi",
    "katsuura",
    "lunacek",
)


def _ids(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


#: MetaBox's partitions of BBOB f1..f24 (Ma et al., NeurIPS 2023 Datasets & Benchmarks,
#: "MetaBox: A Benchmark Platform for Meta-Black-Box Optimization with Reinforcement
#: Learning", Sec. 3 / its README "Problem Difficulty Classification"): "easy" trains on
#: 16 functions and tests on the 8 others; "difficult" swaps the two sets.
PARTITIONS = {
    "easy": (_ids("4,6-14,18-20,22-24"), _ids("1,2,3,5,15,16,17,21")),
    "difficult": (_ids("1,2,3,5,15,16,17,21"), _ids("4,6-14,18-20,22-24")),
}

#: Smallest dimension evosax 0.3.2's BBOB supports: in 1-D its Schaffers F7 functions
#: (f17, f18) return a bare float and `MetaBBOBProblem.eval` fails to trace. All 24
#: functions give finite values in the COCO dimensions 2, 3, 5, 10, 20, 40 (checked).
MIN_DIMS = 2

#: BBOB search domain [-5, 5]^D (evosax `MetaBBOBProblem.x_range`).
X_RANGE = (-5.0, 5.0)


def function_ids(field: str, functions: Iterable[Any]) -> tuple[int, ...]:
    """BBOB ids (1..24) of `functions` (ids or evosax names), in order, without repeats.

    Raises:
      ValueError: naming `field` and the ids outside 1..24, or an unknown name with its
        close matches, or an empty list.
    """
    if isinstance(functions, (str, int)):
        functions = [functions]
    functions = list(functions)
    if not functions:
        raise ValueError(f"{field}: must name at least one BBOB function (ids 1..24)")
    ids: list[int] = []
    bad: list[Any] = []
    for fn in functions:
        if isinstance(fn, str) and not fn.isdigit():
            if fn not in FUNCTION_NAMES:
                close = difflib.get_close_matches(fn, FUNCTION_NAMES, n=3, cutoff=0.5)
                hint = f"close matches: {', '.join(close)}" if close else "names are evosax's"
                raise ValueError(f"{field}: unknown BBOB function {fn!r} ({hint})")
            ids.append(FUNCTION_NAMES.index(fn) + 1)
        elif isinstance(fn, bool) or not isinstance(fn, (int, str)) or not 1 <= int(fn) <= 24:
            bad.append(fn)
        else:
            ids.append(int(fn))
    if bad:
        raise ValueError(f"{field}: {bad} are not BBOB function ids (the ids are 1..24)")
    return tuple(dict.fromkeys(ids))


def check_num_dims(num_dims: Any) -> int:
    """`num_dims` as an int. Raises ValueError (one line) unless it is an int >= 2."""
    if isinstance(num_dims, bool) or not isinstance(num_dims, int) or num_dims < MIN_DIMS:
        raise ValueError(
            f"num_dims={num_dims!r}: evosax's BBOB supports integer dimensions >= {MIN_DIMS} "
            "(COCO uses 2, 3, 5, 10, 20, 40)"
        )
    return num_dims


def make_problem(functions: Sequence[int], num_dims: int) -> Any:
    """An evosax `MetaBBOBProblem` over the BBOB ids `functions` (noiseless) in `num_dims`
    dimensions; its `fn_id` i is the function `functions[i]`."""
    from evosax.problems import MetaBBOBProblem

    return MetaBBOBProblem(
        fn_names=[FUNCTION_NAMES[i - 1] for i in functions],
        min_num_dims=num_dims,
        max_num_dims=num_dims,
        noise_config={"noise_model_names": ["noiseless"], "use_stabilization": True},
    )


def sample_instance(problem: Any, key: jax.Array, fn_index: jax.Array) -> Any:
    """`MetaBBOBProblem.Params` of one instance: shift, offset and rotations from `key`,
    the function `problem.fns[fn_index]` (int32 scalar)."""
    params = problem.sample_params(key)
    return params.replace(fn_id=jnp.asarray(fn_index, jnp.int32))


@functools.lru_cache(maxsize=8)
def _sampler(num_dims: int) -> Any:
    """One `MetaBBOBProblem` per dimension whose `sample_params` draws every instance (its
    draws of shift, offset and rotations do not depend on the function list), so the
    sampler compiles once per process and dimension, not once per env."""
    return make_problem((1,), num_dims)


def instance_bank(keys: jax.Array, num_dims: int) -> Any:
    """`MetaBBOBProblem.Params` of `len(keys)` instances (leaves `[K, ...]`), instance k
    drawn from `keys[k]` (uint32 `[K, 2]`) exactly as `sample_instance` draws it; their
    `fn_id` is left 0 (the env sets the function)."""
    return jax.vmap(_sampler(num_dims).sample_params)(keys)


def evaluate(problem: Any, key: jax.Array, x: jax.Array, params: Any) -> jax.Array:
    """Fitness `f(x)` (float32 `[P]`, the BBOB value including `f_opt`) of the
    population x (float32 `[P, D]`); the cost is `f(x) - params.f_opt`."""
    fitness, _, _ = problem.eval(key, x, problem.init(key, params), params)
    return fitness
