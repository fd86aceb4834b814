"""THE loop of jitted segments that every driver runs (single run, seeds, sweeps, PBT).

A driver trains in segments of updates so that a progress bar advances, metrics are
logged and checkpoints are written between compiled calls (as rejax's
`OnPolicyMixin.train`: one short loop, each driver adding its hooks). Per segment:

1. `hooks.length(done)`: how many updates (or generations) the next segment runs; for
   the usual case, `segment_length` caps it at the log frequency and stops it on every
   multiple of the save / eval / video / collect frequencies;
2. `hooks.run(done, length)`: the jitted call (device arrays out);
3. `fetch(...)`: one transfer to the host (`parallel.to_host`: `jax.device_get`, and an
   all-gather only for arrays split over several processes);
4. `hooks.process(done, length, fetched)`: the driver's bookkeeping: the divergence
   check (`first_divergence`; a single run stops, a seed or a sweep run is marked),
   history, logging; returns the progress bar's postfix;
5. `hooks.save(done, due)`: `due` is the save clock: a multiple of `save_freq`, at least
   `save_minutes` since the last due save, the end of the run, or a stop request.

Ctrl-C (SIGINT) or SIGTERM during the loop asks it to stop (`stop_requests`): a line says
so at once, the running segment finishes, is processed and saved (`due`), and
`TrainingInterrupted` is raised, so an interrupted run loses nothing and continues with
`--resume`. A second signal stops at once (`StopNow`, a `KeyboardInterrupt`), also in the
middle of a segment: the segment's compiled call runs in a worker thread that the main
thread waits for in steps of 0.1 s (`run_responsively`), because Python runs signal
handlers only in the main thread and never while it blocks in a native call.

Segments are sized in seconds where the driver compiles ahead (`hooks.prepare`): the
first segment runs the driver's length and is timed; when it took more than twice
`SEGMENT_SECONDS`, the later ones are capped at the updates that run in about
`SEGMENT_SECONDS` (`SegmentSizer`), so the bar advances every few seconds whatever
`log_freq` is, after the first segment. A cap only splits segments (every frequency's
boundary stays a boundary) and costs one more compiled program (the bar says
"compiling" while it compiles, as for every segment length not run before); fast runs
are never capped and compile nothing more. The segments call the same
`update` as the one-call `train`, so a segmented run equals a one-call run for the same
key however it is cut (tests/test_cli.py, tests/test_train.py check bitwise).
The progress bar (tqdm) is made here and nowhere else (`progress_bar`).

Commands that are not segment loops (`collect`, `eval --all-steps`, `export`) take the same
`stop_requests` with their own first line, check it after each unit, and raise
`CommandStopped` naming what they kept.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

#: Stream of the key that seeds the fresh EnvPool episodes of a resumed run or population
#: (`fold_in(fold_in(key, RESUME_KEY_STREAM), update)`): the pool is not in checkpoints.
RESUME_KEY_STREAM = 2

#: Seconds a segment should take once timed (`SegmentSizer`): a bar update this often.
SEGMENT_SECONDS = 3.0

#: The first line a stop request prints in a segment loop (`stop_requests`).
SEGMENT_STOP = "stopping after the running segment (it is saved first)"


def _exit_code(signal_name: str) -> int:
    """128 + the signal number (130 for SIGINT, 143 for SIGTERM), as a shell reports."""
    return 128 + int(signal.Signals[signal_name])


class StopNow(KeyboardInterrupt):
    """A second SIGINT / SIGTERM: stop at once (the running segment is lost; the newest
    complete checkpoint on disk is kept). `resume_hint`: how to continue, or None."""

    resume_hint: str | None = None

    def __init__(self, signal_name: str):
        super().__init__(f"stopped at once by a second {signal_name}")
        self.signal_name = signal_name

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 for SIGINT, 143 for SIGTERM)."""
        return _exit_code(self.signal_name)


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


class TrainingInterrupted(KeyboardInterrupt):
    """A run stopped by SIGINT / SIGTERM at the end of a segment (`run_segments`).

    Attributes:
      done: updates (or generations) done; the driver's save hook ran after the last of
        them (`due=True`), so its checkpoint is on disk where the driver saves any.
      signal_name: "SIGINT" or "SIGTERM".
      resume_hint: how to continue (a command line), or None where the driver writes no
        checkpoint (sweeps).
    """

    def __init__(self, done: int, signal_name: str, resume_hint: str | None = None):
        super().__init__(f"stopped by {signal_name} after update {done}")
        self.done, self.signal_name, self.resume_hint = done, signal_name, resume_hint

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 for SIGINT, 143 for SIGTERM), as a shell reports."""
        return _exit_code(self.signal_name)


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
        return _exit_code(self.signal_name)


@contextlib.contextmanager
def stop_requests(
    stopping: str = SEGMENT_STOP, at_once: Callable[[str], None] | None = None
) -> Iterator[list[str]]:
    """While open, SIGINT and SIGTERM append their names to the yielded list instead of
    stopping the process; a second signal raises `KeyboardInterrupt` at once. The
    previous handlers come back on exit. Outside the main thread (where Python cannot
    set handlers) the list stays empty and signals keep their handlers. The first signal
    prints one line at once, "purejaxppo: SIGNAL: `stopping`; Ctrl-C again stops at
    once" (`stopping`: what is saved, and when); the second raises `StopNow`, or, with
    `at_once`, calls `at_once(signal name)`, which cleans up and ends the process itself
    (for work running in the main thread, where an exception raised by a handler can
    land in a callback that ignores it, e.g. a garbage-collection callback)."""
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
def _hinted(resume_hint: str | None) -> Iterator[None]:
    """Attaches `resume_hint` to a `StopNow` passing through."""
    try:
        yield
    except StopNow as stop:
        stop.resume_hint = resume_hint
        raise


class SegmentHooks(NamedTuple):
    """A driver's part of `run_segments` (see the module docstring for the order)."""

    length: Callable[[int], int]  # done -> length of the next segment (>= 1)
    run: Callable[[int, int], Any]  # (done, length) -> device results
    process: Callable[[int, int, Any], Mapping[str, Any] | None]  # -> bar postfix
    save: Callable[[int, bool], None] | None = None  # (done after, due) per segment
    # (done, length) -> None: compiles the next segment's program before `run` runs it,
    # so that the bar says "compiling" only while it compiles (None: `run` compiles).
    prepare: Callable[[int, int], None] | None = None


def progress_bar(
    total: int,
    *,
    unit: str,
    desc: str,
    initial: int = 0,
    enabled: bool = True,
) -> Any:
    """The progress bar of every driver: `tqdm.auto.tqdm` (a widget in notebooks, text in
    terminals), disabled when not `enabled`, resizing with the terminal."""
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        initial=initial,
        unit=unit,
        desc=desc,
        disable=not enabled,
        dynamic_ncols=True,
    )


def compiling(label: str) -> str:
    """The progress bar's description while a program compiles: "`label` (compiling)"."""
    return f"{label} (compiling)"


def segment_length(done: int, total: int, cap: int, *every: int) -> int:
    """Updates in the next segment: at most `cap` and the `total - done` left, and ending on
    the next multiple of every nonzero frequency in `every`.

    Example: done=7, total=100, cap=10, every=(5, 0) -> 3 (the segment ends at 10).
    """
    length = min(cap, total - done)
    for freq in every:
        if freq:
            length = min(length, freq - done % freq)
    return length


class SegmentSizer:
    """Caps segment lengths so that a segment runs about `seconds` (a bar update).

    The first segment runs the driver's own length; its time (compile excluded) gives the
    cap. A run whose first segment took at most `2 * seconds` is never capped, so fast
    runs compile nothing beyond the driver's own programs. Otherwise the cap is the
    updates that fit in `seconds`, rounded down to a divisor of the first segment's
    length when one is at least half of it (a later segment of that length then splits
    into whole caps, one more compiled program), at least 1. Caps never move a segment's
    end past the driver's own (`hooks.length`), so every frequency's boundary is kept.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.cap: int | None = None  # None: the first segment has not run yet
        self.natural = 0  # the first segment's length

    def length(self, natural: int) -> int:
        """The next segment's length, given the driver's (`natural`, >= 1)."""
        self.natural = self.natural or natural
        return natural if self.cap is None else min(natural, self.cap)

    def record(self, length: int, seconds: float) -> None:
        """Sets the cap from the first segment (`length` updates in `seconds`)."""
        if self.cap is not None:
            return
        if seconds <= 2 * self.seconds:
            self.cap = sys.maxsize  # fast enough: the driver's own lengths
            return
        fit = max(1, int(self.seconds * length / max(seconds, 1e-9)))
        divisor = max(d for d in range(1, fit + 1) if self.natural % d == 0)
        self.cap = divisor if 2 * divisor >= fit else fit


class Divergence(NamedTuple):
    """Where a run diverged (`first_divergence`)."""

    update: int  # the first update (1-based) with a non-finite value
    what: str  # the loss metric, or what `nonfinite_params` named (e.g. "params")


def first_divergence(
    metrics: Mapping[str, Any],
    done: int,
    length: int,
    nonfinite_params: Callable[[], str | None],
) -> Divergence | None:
    """The divergence check after a segment of `length` updates that started at `done`:
    the first update with a NaN / Inf loss and its metric (`guards.first_nonfinite_update`);
    else, if `nonfinite_params()` names something non-finite in the parameters (called
    only then), the segment's last update and that name; else None."""
    from purejaxppo.guards import first_nonfinite_update

    bad = first_nonfinite_update(metrics, done + 1)
    if bad is not None:
        update, metric = bad
        return Divergence(update=update, what=metric)
    what = nonfinite_params()
    return None if what is None else Divergence(update=done + length, what=what)


def run_segments(
    total: int,
    done: int,
    hooks: SegmentHooks,
    *,
    bar: Any,
    save_freq: int = 0,
    save_minutes: float = 0.0,
    scale: int = 1,
    label: str | None = None,
    fetch: Callable[[Any], Any] | None = None,
    resume_hint: str | None = None,
    stop_on_signals: bool = True,
    seconds: float | None = None,
) -> int:
    """Runs segments from `done` until `total` (updates or generations); returns `total`.

    Args:
      total: where the loop stops.
      done: where it starts (a resumed run's update step).
      hooks: the driver's `SegmentHooks`.
      bar: the progress bar (`progress_bar`), advanced by `length * scale` a segment.
      save_freq, save_minutes: the save clock (0: off); the end of the run is always due.
      scale: bar units per update (a sweep counts updates of all its runs).
      label: the bar's description once the first segment's program is compiled (after
        `hooks.prepare`, else after the first segment, which compiles it). With
        `hooks.prepare`, the bar says `compiling(label)` again while it prepares a
        segment of a length not run before (a program of its own: a `SegmentSizer` cap,
        a remainder before a frequency's boundary or the end).
      fetch: the device-to-host transfer applied to `hooks.run`'s result (default
        `parallel.to_host`).
      resume_hint: how to continue after a stop request, for `TrainingInterrupted`.
      stop_on_signals: handle SIGINT / SIGTERM as stop requests (`stop_requests`). Off
        for a program spread over several processes, whose hosts could see a signal
        after different segments and wait on each other's collectives.
      seconds: size segments to about this many seconds (`SegmentSizer`; None:
        `SEGMENT_SECONDS`) where the driver compiles ahead (`hooks.prepare`, so a
        segment's time is its run's); 0 (or no `prepare`): the driver's lengths.

    Raises:
      TrainingInterrupted: after SIGINT / SIGTERM, once the running segment is processed
        and saved.
      Whatever the hooks raise (e.g. `guards.TrainingDiverged` from a single run).
    """
    if fetch is None:
        from purejaxppo.parallel import to_host as fetch
    last_save = time.monotonic()
    with contextlib.ExitStack() as stack:
        requested = stack.enter_context(
            stop_requests() if stop_on_signals else contextlib.nullcontext([])
        )
        stack.enter_context(_hinted(resume_hint if hooks.save is not None else None))
        seconds = SEGMENT_SECONDS if seconds is None else seconds
        sizer = SegmentSizer(seconds) if seconds and hooks.prepare is not None else None
        prepared: set[int] = set()  # the segment lengths whose programs are compiled
        while done < total:
            length = hooks.length(done)
            if sizer is not None:
                length = sizer.length(length)
            if hooks.prepare is not None:
                if label is not None and length not in prepared:
                    bar.set_description(compiling(label))  # a new length: a new program
                prepared.add(length)
                if stop_on_signals:
                    run_responsively(lambda: hooks.prepare(done, length))  # noqa: B023
                else:
                    hooks.prepare(done, length)
                if label is not None:
                    bar.set_description(label)  # compiled: running from here on
            started = time.monotonic()
            if stop_on_signals:
                fetched = run_responsively(lambda: fetch(hooks.run(done, length)))  # noqa: B023
            else:
                fetched = fetch(hooks.run(done, length))
            if sizer is not None:
                sizer.record(length, time.monotonic() - started)
            postfix = hooks.process(done, length, fetched)
            done += length
            due = bool(save_freq) and done % save_freq == 0
            due |= bool(save_minutes) and time.monotonic() - last_save >= 60 * save_minutes
            due |= done == total or bool(requested)
            if hooks.save is not None:
                hooks.save(done, due)
            if due:
                last_save = time.monotonic()
            if label is not None:
                bar.set_description(label)
            if postfix:
                bar.set_postfix(**postfix, refresh=False)
            bar.update(length * scale)
            if requested and done < total:
                hint = resume_hint if hooks.save is not None else None
                raise TrainingInterrupted(done, requested[0], hint)
    return done
