"""How the library's programs compile: `jit_once` for a program that runs once per run
(XLA's cheaper CPU pipeline, `ONCE_COMPILER_OPTIONS`), and `signature`, what decides a
compiled program's input. Used by `parallel` (the runs' and the data-parallel inits) and
`stored_programs` (a run's programs kept as exports).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

__all__ = ["ONCE_COMPILER_OPTIONS", "jit_once", "signature"]


#: XLA options for a program that runs once per run, its init (network parameters,
#: optimizer state, env reset; of one run or of `[R]` runs, `make_runs_program(...,
#: once=True)`): LLVM's level-1 pipeline instead of XLA's default level 3 (or the level 2
#: `import purejaxppo` sets on a CPU-only install, `_xla_flag`).
#: On a 2-core CPU it compiles CartPole's init in 0.9-1.0 s instead of 1.2-1.4 s (a
#: MinAtar CNN, GRU, transformer, MAPPO, Navix and Craftax init 13-35% faster), and the
#: init's output is bitwise the same (`tests/test_jit_once.py`; the data-parallel init on
#: 4 devices: `tests/test_parallel.py`); running it once, its run time does not count.
ONCE_COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}


def jit_once(fn: Callable) -> Callable:
    """`jax.jit(fn)` for a program called once or twice per process (a run's init): on
    the CPU compiled with `ONCE_COMPILER_OPTIONS` (a cheaper compile, the same output),
    once per argument signature (pytree structure, shapes, dtypes, weak types,
    shardings); on other backends, and under a transformation (`jax.eval_shape`, an
    enclosing `jit`), `jax.jit(fn)` itself. Every compile passes the persistent compile
    cache.

    Args:
      fn: a traceable function whose arguments are pytrees of JAX arrays (e.g. the run's
        init, `key -> RunnerState`, a typed PRNG key `[]`; the runs' init of
        `make_runs_program`, `(key data [R, 2], warm start) -> RunnerState [R]`).

    Returns:
      A function with `fn`'s signature and outputs (bitwise `jax.jit(fn)`'s on the CPU:
      `tests/test_jit_once.py`).

    Raises:
      What `jax.jit(fn)` raises when it traces or compiles; `AttributeError` for an
      argument leaf that is not an array (no `shape` / `dtype`).
    """
    jitted = jax.jit(fn)
    compiled: dict[Any, Any] = {}

    def call(*args: Any) -> Any:
        leaves, tree = jax.tree.flatten(args)
        traced = any(isinstance(x, jax.core.Tracer) for x in leaves)  # e.g. `eval_shape`
        if traced or jax.default_backend() != "cpu":
            return jitted(*args)
        arguments = (tree, *(signature(x) for x in leaves))
        if arguments not in compiled:
            lowered = jitted.lower(*args)
            compiled[arguments] = lowered.compile(compiler_options=ONCE_COMPILER_OPTIONS)
        return compiled[arguments](*args)

    return call


def signature(x: Any) -> tuple:
    """`(shape, dtype, weak_type, sharding)` of an array leaf: what decides its part of a
    compiled program's input (`jit_once`, `stored_programs`). `AttributeError` for a
    leaf without `shape` / `dtype`."""
    return (x.shape, x.dtype, getattr(x, "weak_type", False), getattr(x, "sharding", None))
