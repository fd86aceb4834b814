"""Envs that step on the host, called from inside the compiled program.

EnvPool pools and gymnasium vector envs live in host memory and step in C++ / Python.
`batched_call(host_fn, shapes)` makes one env's call that, vmapped over the N envs of a
run (and over R runs batched in one program), becomes ONE `jax.experimental.io_callback`
of `host_fn` on all R x N envs: the rollout scan steps them like any JAX env, so there is
one training loop for every kind of env (`kinds`). Measured against a Python loop
around a jitted policy step (benchmarks/gymnasium_host.py, CartPole-v1, 4 envs x 128 steps,
idle 2-core CPU): one run's update 47.4 ms against the loop's 36.7 ms (a host call costs
~60 us, a jitted call from Python ~10 us), 8 runs batched in one program 104.6 ms per
update, 2.8x faster than 8 loops one after another.

Errors: an exception in `host_fn` (the env's own code as a one-line `errors.EnvError`, a
factory's `ValueError`) cannot cross XLA; JAX raises a `JaxRuntimeError` that names only
the callback. `host_fn`'s exception is kept (`take_host_error`), so `errors_of_envs(fn)`
and the CLI raise it in its place, and JAX's log of the callback's traceback is dropped.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["after", "batched_call", "errors_of_envs", "take_host_error"]

_raised: list[Exception] = []
_lock = threading.Lock()


class _DropKept(logging.Filter):
    """Drops JAX's "io_callback failed" log (a traceback) of an error that is kept: it is
    raised again in one piece (`errors_of_envs`, the CLI: one line for an `EnvError`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        with _lock:
            return not any(error is kept for kept in _raised)


logging.getLogger("jax._src.callback").addFilter(_DropKept())


def take_host_error(err: BaseException) -> Exception | None:
    """The exception a host call raised (an env's `EnvError`, a factory's `ValueError`),
    if `err` (what running the compiled program raised) is JAX's report of it; it is then
    forgotten. None otherwise."""
    if "callback" not in str(err).lower():
        return None
    with _lock:
        return _raised.pop() if _raised else None


def errors_of_envs(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (which runs a compiled program) raising the host call's own exception (an
    env's `EnvError`, ...) in place of JAX's runtime error about it; results are waited
    for (outside a trace), so the error is raised here, not where a result is first read.

    Raises:
      the kept exception of a failed host call (`take_host_error`); any other error of
      `fn` unchanged.
    """

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            out = fn(*args, **kwargs)
            if not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(out)):
                jax.block_until_ready(out)
            return out
        except jax.errors.JaxRuntimeError as err:
            error = take_host_error(err)
            if error is None:
                raise
            raise error from error.__cause__

    return run


def _kept(host_fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        try:
            return host_fn(*args)
        except Exception as err:
            with _lock:
                _raised[:] = [err]
            raise

    return call


def after(action: jax.Array, count: jax.Array) -> jax.Array:
    """`action` (any shape and dtype), unchanged, made to depend on `count` (an int32 step
    counter, never negative) so that the unordered host call taking it waits for the call
    that produced `count`: the dependency rides on the one operand (each operand of a
    host call costs ~30 us per step on CPU, measured) instead of a second one."""
    action = jnp.asarray(action)
    return jnp.where(count >= 0, action, jnp.zeros_like(action))


def batched_call(host_fn: Callable[..., Any], result_shapes: Callable[[int], Any]) -> Any:
    """`call(*args)` on one env's arrays whose `jax.vmap` over N envs makes one host
    call `host_fn(*args [N, ...])` (an unordered `io_callback`); `result_shapes(n)` gives
    its results' `ShapeDtypeStruct`s (a pytree). Each vmap around that (R runs batched in
    one program, and so on) flattens its axis into the envs' one: one host call of
    `host_fn(*args [R * N, ...])`, run-major (run r's env i is row r * N + i), whose
    results are reshaped back to `[R, N, ...]`. Unordered: make an input depend on the
    previous call's results (the adapters pass an action that reads a step counter), so
    the calls keep their order. Each operand costs ~30 us per call on CPU (measured: one
    operand 62 us per call in a scan, two 96 us), so the adapters pass one.
    """
    host_fn = _kept(host_fn)

    @jax.custom_batching.custom_vmap
    def call_pool(*args: Any) -> Any:
        return jax.experimental.io_callback(
            host_fn, result_shapes(args[0].shape[0]), *args, ordered=False
        )

    @call_pool.def_vmap
    def _flatten(axis_size: int, in_batched: Any, *args: Any) -> Any:
        # args: [R, N, ...] (unbatched ones [N, ...], broadcast over the R runs).
        args = _broadcast(axis_size, in_batched, args)
        out = call_pool(*(a.reshape(-1, *a.shape[2:]) for a in args))
        out = jax.tree.map(lambda x: x.reshape(axis_size, -1, *x.shape[1:]), out)
        return out, jax.tree.map(lambda _: True, out)

    @jax.custom_batching.custom_vmap
    def call(*args: Any) -> Any:
        return jax.tree.map(lambda x: x[0], call_pool(*(a[None] for a in args)))

    @call.def_vmap
    def _rule(axis_size: int, in_batched: Any, *args: Any) -> Any:
        out = call_pool(*_broadcast(axis_size, in_batched, args))
        return out, jax.tree.map(lambda _: True, out)

    return call


def _broadcast(axis_size: int, in_batched: Any, args: Any) -> list[jax.Array]:
    """`args` with a leading axis of `axis_size` on each (unbatched ones broadcast)."""
    return [
        a if batched else jnp.broadcast_to(a, (axis_size, *jnp.shape(a)))
        for a, batched in zip(args, in_batched, strict=True)
    ]
