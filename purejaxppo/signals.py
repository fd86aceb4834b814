"""The stop protocol of every command: SIGINT (Ctrl-C) and SIGTERM as stop requests.

One protocol for every driver and command (train, `--num-seeds`, sweep, pbt, collect,
eval, export, tune):

1. A first SIGINT / SIGTERM is a *stop request* (`stop_requests`): one line says so at
   once ("purejaxppo: SIGTERM: stopping after the running segment ..."), the running unit
   (a segment of updates, a generation, a chunk, a checkpoint's evaluation) finishes, what
   is finished is written, and the command raises `TrainingInterrupted` (segment loops) or
   `CommandStopped` (other commands). The CLI turns either into one line saying how to
   continue and exit code 130 (SIGINT) / 143 (SIGTERM): 128 + the signal number, as a
   shell reports it.
2. A second signal stops at once (`StopNow`, a `KeyboardInterrupt`), also in the middle
   of a compiled call: that call runs in a worker thread that the main thread waits for in
   steps of 0.1 s (`run_responsively`), because Python runs signal handlers only in the
   main thread and never while it blocks in a native call. `StopNow.resume_hint` says how
   to continue from what is on disk; None means nothing was saved, and the CLI then says
   so and gives the command that starts again: it never promises a checkpoint that does
   not exist.
3. A request is never lost: the list that `stop_requests` yields stays open for the
   whole command (one request for a whole sweep, across its chunks and groups), and a
   driver checks it after every unit.

A program spread over several processes takes no requests here (its hosts could see a
signal after different units and wait on each other's collectives): the multi-process
command (`cli.distributed`) turns a first Ctrl-C into a SIGTERM to itself, which JAX's
preemption sync point makes every process honour after the same segment, and a second
one into an immediate exit with the resume command.

This module is on the ground floor: it imports nothing of purejaxppo, so every layer
(drivers, acting, datasets, the CLI) may use it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "SEGMENT_STOP",
    "CommandStopped",
    "StopNow",
    "TrainingInterrupted",
    "exit_code",
    "hinted",
    "run_responsively",
    "stop_requests",
]

#: The first line a stop request prints in a segment loop (`stop_requests`).
SEGMENT_STOP = "stopping after the running segment (it is saved first)"

#: A resume hint: a command line, or a function that gives one (None: nothing saved yet),
#: asked when the stop happens.
Hint = str | Callable[[], "str | None"] | None


def exit_code(signal_name: str) -> int:
    """128 + the signal number (130 for SIGINT, 143 for SIGTERM), as a shell reports."""
    return 128 + int(signal.Signals[signal_name])


def _resolve(hint: Hint) -> str | None:
    return hint() if callable(hint) else hint


class StopNow(KeyboardInterrupt):
    """A second SIGINT / SIGTERM: stop at once (the running unit is lost; the newest
    complete checkpoint on disk is kept). `resume_hint`: how to continue from what is on
    disk, or None where nothing is (nothing saved yet, or a command that saves nothing)."""

    resume_hint: str | None = None

    def __init__(self, signal_name: str):
        super().__init__(f"stopped at once by a second {signal_name}")
        self.signal_name = signal_name

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 for SIGINT, 143 for SIGTERM)."""
        return exit_code(self.signal_name)


class TrainingInterrupted(KeyboardInterrupt):
    """A run stopped by SIGINT / SIGTERM at the end of a unit (a segment of updates, a
    generation, a sweep's chunk).

    Attributes:
      done: updates (or generations) done; the driver's save hook ran after the last of
        them, so its checkpoint is on disk where the driver saves any.
      signal_name: "SIGINT" or "SIGTERM".
      resume_hint: how to continue (a command line), or None where the driver writes no
        checkpoint.
      unit: what `done` counts ("update", "generation").
    """

    def __init__(
        self, done: int, signal_name: str, resume_hint: str | None = None, unit: str = "update"
    ):
        super().__init__(f"stopped by {signal_name} after {unit} {done}")
        self.done, self.signal_name, self.resume_hint = done, signal_name, resume_hint
        self.unit = unit

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 for SIGINT, 143 for SIGTERM), as a shell reports."""
        return exit_code(self.signal_name)


class CommandStopped(KeyboardInterrupt):
    """A command that is no segment loop (`collect`, `eval --all-steps`, `export`) stopped
    by SIGINT / SIGTERM after its running unit.

    Attributes:
      signal_name: "SIGINT" or "SIGTERM".
      kept: one clause saying what was written and how to finish or discard it.
    """

    def __init__(self, signal_name: str, kept: str):
        super().__init__(f"stopped by {signal_name}; {kept}")
        self.signal_name, self.kept = signal_name, kept

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 for SIGINT, 143 for SIGTERM), as a shell reports."""
        return exit_code(self.signal_name)


def run_responsively(call: Callable[[], Any]) -> Any:
    """`call()` in a daemon worker thread while the main thread waits in 0.1 s steps, so
    that a signal's handler runs at once (off the main thread: `call()` directly)."""
    if threading.current_thread() is not threading.main_thread():
        return call()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as err:  # handed to the main thread
            box["error"] = err

    worker = threading.Thread(target=target, name="purejaxppo-segment", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
    if "error" in box:
        raise box["error"]
    return box["value"]


@contextlib.contextmanager
def stop_requests(
    stopping: str = SEGMENT_STOP, at_once: Callable[[str], None] | None = None
) -> Iterator[list[str]]:
    """While open, SIGINT and SIGTERM append their names to the yielded list instead of
    stopping the process; a second signal raises `StopNow` at once. The previous handlers
    come back on exit. Outside the main thread (where Python cannot set handlers) the list
    stays empty and signals keep their handlers.

    The first signal prints one line at once, "purejaxppo: SIGNAL: `stopping`; Ctrl-C again
    stops at once" (`stopping`: what is saved, and when); the second raises `StopNow`, or,
    with `at_once`, calls `at_once(signal name)`, which cleans up and ends the process
    itself (for work running in the main thread, where an exception raised by a handler
    can land in a callback that ignores it, e.g. a garbage-collection callback)."""
    requested: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return
    names = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}

    def request(signum: int, frame: Any) -> None:
        if requested and at_once is not None:
            at_once(names[signum])
        if requested:
            raise StopNow(names[signum])
        requested.append(names[signum])
        print(
            f"\npurejaxppo: {names[signum]}: {stopping}; Ctrl-C again stops at once",
            file=sys.stderr,
            flush=True,
        )

    previous = {sig: signal.getsignal(sig) for sig in names}
    for sig in names:
        signal.signal(sig, request)
    try:
        yield requested
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


@contextlib.contextmanager
def hinted(resume_hint: Hint) -> Iterator[None]:
    """Attaches `resume_hint` (resolved when the stop happens: a function returns None
    while nothing is saved) to a `StopNow` passing through."""
    try:
        yield
    except StopNow as stop:
        stop.resume_hint = _resolve(resume_hint)
        raise
