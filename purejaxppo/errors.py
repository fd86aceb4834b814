"""Errors that the command line reports as one line, importable without JAX (the CLI
catches them before any backend starts: `purejaxppo --devices N` must still be able to
set the CPU device count)."""

from __future__ import annotations

__all__ = ["EnvError", "describe_error"]


class EnvError(RuntimeError):
    """An error raised by a host env's own code (its `reset` / `step`, a dead worker, a
    non-finite reward), as one line naming the env and where: the CLI prints it and
    exits 2; `PUREJAXPPO_DEBUG=1` shows the env's traceback (the error's `__cause__`)."""


def describe_error(err: BaseException) -> str:
    """`Type: first line of the message` (`Type` alone when the message is empty)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0][:300]}" if lines else type(err).__name__
