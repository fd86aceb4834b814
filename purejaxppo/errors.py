"""Errors that the command line reports as one line, and the wording every one-line error
shares (`short` values, `did_you_mean` hints, `bad` field errors); importable without JAX
(the CLI catches them before any backend starts: `purejaxppo --devices N` must still be
able to set the CPU device count)."""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Sequence
from typing import Any

__all__ = ["EnvError", "bad", "describe_error", "did_you_mean", "short"]


class EnvError(RuntimeError):
    """An error raised by a host env's own code (its `reset` / `step`, a dead worker, a
    non-finite reward), as one line naming the env and where: the CLI prints it and
    exits 2; `PUREJAXPPO_DEBUG=1` shows the env's traceback (the error's `__cause__`)."""


def describe_error(err: BaseException) -> str:
    """`Type: first line of the message` (`Type` alone when the message is empty)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0][:300]}" if lines else type(err).__name__


def did_you_mean(word: str, choices: Sequence[str], n: int = 3) -> str:
    """`"; did you mean a, b?"` for the choices closest to `word` (difflib), or ``""``."""
    close = difflib.get_close_matches(str(word), list(choices), n=n)
    return f"; did you mean {', '.join(close)}?" if close else ""


_SHORT = reprlib.Repr()  # keyword arguments need Python 3.12
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 3, 8, 8, 8
_SHORT.maxstring = _SHORT.maxother = 60


def short(value: Any, limit: int = 200) -> str:
    """`repr(value)`, shortened (nested containers and long strings elided, at most `limit`
    characters): error messages never quote a huge value in full."""
    text = _SHORT.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bad(field: str, value: Any, why: str) -> ValueError:
    """The error for a field's value: `"<field>=<short(value)>: <why>"`."""
    return ValueError(f"{field}={short(value)}: {why}")
