"""THE loop of jitted segments that every driver runs (single run, seeds, sweeps, PBT).

A driver trains in segments of updates so that a progress bar advances, metrics are
logged and checkpoints are written between compiled calls (as rejax's
`OnPolicyMixin.train`: one short loop, each driver adding its hooks). Per segment:

1. `hooks.length(done)`: how many updates (or generations) the next segment runs; for
   the usual case, `segment_length` caps it at the log frequency and stops it on every
   multiple of the save / eval / video / collect frequencies;
2. `hooks.run(done, length)`: the jitted call (device arrays out);
3. `hooks.fetch(...)`: one transfer to the host (`parallel.to_host`: `jax.device_get`, and an
   all-gather only for arrays split over several processes);
4. `hooks.process(done, length, fetched)`: the driver's bookkeeping: the divergence
   check (`first_divergence`; a single run stops, a seed or a sweep run is marked),
   history, logging; returns the progress bar's postfix (an "n/a" entry, such as a
   return where no episode ended in the segment, keeps the value shown before:
   `held_postfix`);
5. `hooks.save(done, due)`: `due` is the save clock: a multiple of `save_freq`, at least
   `save_minutes` since the last due save, the end of the run, or a stop request.

Ctrl-C (SIGINT) or SIGTERM during the loop asks it to stop, under the one stop protocol
of `purejaxppo.signals`: a line says so at once, the running segment finishes, is
processed and saved (`due`), and `TrainingInterrupted` is raised, so an interrupted run
loses nothing and continues with `--resume`. A second signal stops at once (`StopNow`),
also in the middle of a segment (`run_responsively`).

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

"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from purejaxppo.signals import (
    Hint,
    TrainingInterrupted,
    hinted,
    run_responsively,
    stop_requests,
)

#: Stream of the key that seeds the fresh EnvPool episodes of a resumed run or population
#: (`fold_in(fold_in(key, RESUME_KEY_STREAM), update)`): the pool is not in checkpoints.
RESUME_KEY_STREAM = 2

#: Seconds a segment should take once timed (`SegmentSizer`): a bar update this often.
SEGMENT_SECONDS = 3.0
#: Seconds between the bar's frames when it writes to a file rather than a terminal or a
#: notebook (a log, SLURM's `.out`): each frame is a carriage return on one line, and at
#: tqdm's 0.1 s they filled 28 KB of a 10-second CartPole run (233 frames). A user's
#: `TQDM_MININTERVAL` wins.
LOG_MININTERVAL_S = 30.0


class SegmentHooks(NamedTuple):
    """A driver's part of `run_segments` (see the module docstring for the order)."""

    length: Callable[[int], int]  # done -> length of the next segment (>= 1)
    run: Callable[[int, int], Any]  # (done, length) -> device results
    process: Callable[[int, int, Any], Mapping[str, Any] | None]  # -> bar postfix
    save: Callable[[int, bool], None] | None = None  # (done after, due) per segment
    # (done, length) -> None: compiles the next segment's program before `run` runs it,
    # so that the bar says "compiling" only while it compiles (None: `run` compiles).
    prepare: Callable[[int, int], None] | None = None
    # The device-to-host transfer applied to `run`'s result (None: `parallel.to_host`).
    fetch: Callable[[Any], Any] | None = None
    # How to continue after a stop request, for `TrainingInterrupted` and `StopNow`: a
    # command line, or a function that gives one (None while nothing is saved), asked
    # when the stop happens (None: no hint).
    resume_hint: Hint = None


class SegmentOptions(NamedTuple):
    """How `run_segments` saves, stops and sizes segments."""

    save_freq: int = 0  # the save clock in updates (0: off); the end is always due
    save_minutes: float = 0.0  # the save clock in minutes (0: off)
    # Handle SIGINT / SIGTERM as stop requests (`stop_requests`). Off for a program
    # spread over several processes, whose hosts could see a signal after different
    # segments and wait on each other's collectives.
    stop_on_signals: bool = True
    # Size segments to about this many seconds (`SegmentSizer`; None: `SEGMENT_SECONDS`)
    # where the driver compiles ahead (`hooks.prepare`, so a segment's time is its
    # run's); 0 (or no `prepare`): the driver's lengths.
    seconds: float | None = None


def progress_bar(
    total: int,
    *,
    unit: str,
    desc: str,
    initial: int = 0,
    enabled: bool = True,
) -> Any:
    """The progress bar of every driver: `tqdm.auto.tqdm` (a widget in notebooks, text in
    terminals), disabled when not `enabled`, resizing with the terminal; a frame at most
    every `LOG_MININTERVAL_S` where stderr is neither a terminal nor a Jupyter kernel's
    (its last frame always)."""
    from tqdm.auto import tqdm

    throttle = {}
    # a kernel's stderr (ipykernel's OutStream) shows frames as they come, also where
    # tqdm falls back to text frames for want of ipywidgets
    interactive = sys.stderr.isatty() or type(sys.stderr).__module__.startswith("ipykernel")
    if not interactive and "TQDM_MININTERVAL" not in os.environ:
        throttle["mininterval"] = LOG_MININTERVAL_S
    bar = tqdm(
        total=total,
        initial=initial,
        unit=unit,
        desc=desc,
        disable=not enabled,
        dynamic_ncols=True,
        **throttle,
    )
    bar._run_timed = False  # its rate counts from the first compiled segment on
    return bar


def leave_out_of_rate(bar: Any, since: float) -> None:
    """Leaves the time since `since` (the bar's clock, `bar._time()`: a compile) out of
    the bar's elapsed time, rate and ETA, as tqdm's `unpause` leaves out a pause."""
    if getattr(bar, "disable", True) or not hasattr(bar, "start_t"):
        return  # no bar shown (or not a tqdm)
    spent = bar._time() - since
    bar.start_t += spent
    bar.last_print_t += spent


def advance_uncounted(bar: Any, units: int) -> None:
    """Advances the bar by `units` without counting them or the time they took in its rate
    and ETA (the first segment, whose time is mostly its compile): the rate counts from
    here (`initial`), its smoothed samples start afresh. Once per bar: a sweep's later
    chunks reuse the first one's program, and its bar keeps counting them."""
    if getattr(bar, "disable", True) or getattr(bar, "_run_timed", True):
        bar.update(units)
        return
    bar._run_timed = True
    bar.n += units
    bar.initial = bar.last_print_n = bar.n
    bar.start_t = bar.last_print_t = bar._time()
    bar._ema_dn, bar._ema_dt = type(bar._ema_dn)(bar.smoothing), type(bar._ema_dt)(bar.smoothing)
    bar.refresh()


def compiling(label: str) -> str:
    """The progress bar's description while a program compiles: "`label` (compiling)"."""
    return f"{label} (compiling)"


def largest_divisor_at_most(n: int, bound: int) -> int:
    """The largest divisor of `n` that is at most `bound` (at least 1): a segment length
    that splits `n` updates into equal segments.

    Example: (12, 5) -> 4; (97, 10) -> 1 (97 is prime).
    """
    return max(d for d in range(1, max(1, min(n, bound)) + 1) if n % d == 0)


def speed_postfix(env_steps: float, seconds: float) -> dict[str, str]:
    """The progress bar's `sps`: env steps per second, as every driver shows it
    (`{"sps": "12,345"}`)."""
    return {"sps": f"{env_steps / max(seconds, 1e-9):,.0f}"}


def held_postfix(shown: dict[str, Any], postfix: Mapping[str, Any]) -> dict[str, Any]:
    """The bar's postfix after a segment: `postfix`, except that an entry "n/a" (no
    episode ended in the segment, so no return) keeps the value `shown` before. A run
    whose episodes end less often than its segments do (EnvPool MuJoCo: the envs'
    1000-step episodes end together, every ~16 updates of configs/mujoco.yaml) shows its
    newest return, not "n/a"; "n/a" stays until the first episode ends. Updates `shown`."""
    shown.update({k: v for k, v in postfix.items() if v != "n/a" or k not in shown})
    return shown


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


class CompiledSegments:
    """Each segment length's program, compiled ahead once for the run's arguments.

    `build(length)` returns the jitted program of a segment of `length` updates;
    `prepare(length, *args)` lowers it for `args` (the runner and hyperparameters, whose
    shapes and shardings do not change over a run) and compiles it, once per length;
    `program(length)` is the compiled one, or the jitted one where none was compiled
    (it compiles on its first call).
    """

    def __init__(self, build: Callable[[int], Any]):
        self.build = build
        self.compiled: dict[int, Any] = {}  # segment length -> compiled program

    def prepare(self, length: int, *args: Any) -> Any:
        """The compiled program of `length` (lowered for `args` and compiled if new)."""
        if length not in self.compiled:
            self.compiled[length] = self.build(length).lower(*args).compile()
        return self.compiled[length]

    def __contains__(self, length: int) -> bool:
        """Whether the program of `length` is compiled."""
        return length in self.compiled

    def program(self, length: int) -> Any:
        """The compiled program of `length`, else the jitted one (compiled on its call)."""
        compiled = self.compiled.get(length)
        return self.build(length) if compiled is None else compiled


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
        divisor = largest_divisor_at_most(self.natural, fit)
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


def _stopping(unit: str, saved: bool = True) -> str:
    """A stop request's first line for a loop over `unit`s ("update": its segments);
    `saved`: the loop saves before it stops (a pbt without checkpoints does not)."""
    running = "segment" if unit == "update" else unit
    kept = "it is saved first" if saved else "no checkpoints: nothing is saved"
    return f"stopping after the running {running} ({kept})"


def _prepare(
    prepare: Callable[[int, int], None],
    done: int,
    length: int,
    bar: Any,
    label: str | None,
    prepared: set[int],
    responsive: bool,
) -> None:
    """`prepare(done, length)` (compiles a segment length not run before, `prepared`), the
    bar saying `compiling(label)` meanwhile; its time is left out of the bar's ETA."""
    new = label is not None and length not in prepared  # a new length: a new program
    if new:
        bar.set_description(compiling(label))
    prepared.add(length)
    since = bar._time() if hasattr(bar, "_time") else 0.0
    if responsive:
        run_responsively(lambda: prepare(done, length))
    else:
        prepare(done, length)
    leave_out_of_rate(bar, since)  # the ETA counts running, not compiling
    if new:
        bar.set_description(label)  # compiled: running from here on


def run_segments(
    total: int,
    done: int,
    hooks: SegmentHooks,
    *,
    bar: Any,
    options: SegmentOptions | None = None,
    scale: int = 1,
    label: str | None = None,
    unit: str = "update",
) -> int:
    """Runs segments from `done` until `total` (updates or generations); returns `total`.

    Args:
      total: where the loop stops.
      done: where it starts (a resumed run's update step).
      hooks: the driver's `SegmentHooks` (with its `fetch` and `resume_hint`).
      bar: the progress bar (`progress_bar`), advanced by `length * scale` a segment.
      options: the save clock, the stop on signals and the segments' seconds
        (`SegmentOptions`; None: its defaults).
      scale: bar units per update (a sweep counts updates of all its runs).
      label: the bar's description once the first segment's program is compiled (after
        `hooks.prepare`, else after the first segment, which compiles it). With
        `hooks.prepare`, the bar says `compiling(label)` again while it prepares a
        segment of a length not run before (a program of its own: a `SegmentSizer` cap,
        a remainder before a frequency's boundary or the end).
      unit: what `total` counts, for the stop's messages ("update", "generation").

    Raises:
      TrainingInterrupted: after SIGINT / SIGTERM, once the running segment is processed
        and saved.
      Whatever the hooks raise (e.g. `guards.TrainingDiverged` from a single run).
    """
    fetch, resume_hint = hooks.fetch, hooks.resume_hint
    save_freq, save_minutes, stop_on_signals, seconds = options or SegmentOptions()
    if fetch is None:
        from purejaxppo.parallel import to_host as fetch
    last_save = time.monotonic()
    with contextlib.ExitStack() as stack:
        requested = stack.enter_context(
            stop_requests(_stopping(unit, hooks.save is not None and resume_hint is not None))
            if stop_on_signals
            else contextlib.nullcontext([])
        )
        stack.enter_context(hinted(resume_hint if hooks.save is not None else None))
        seconds = SEGMENT_SECONDS if seconds is None else seconds
        sizer = SegmentSizer(seconds) if seconds and hooks.prepare is not None else None
        prepared: set[int] = set()  # the segment lengths whose programs are compiled
        first = True  # without `hooks.prepare`, the first segment compiles its program
        shown: dict[str, Any] = {}  # the bar's postfix (`held_postfix`)
        while done < total:
            length = hooks.length(done)
            if sizer is not None:
                length = sizer.length(length)
            if hooks.prepare is not None:
                _prepare(hooks.prepare, done, length, bar, label, prepared, stop_on_signals)
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
                bar.set_description(label, refresh=False)  # shown by the update below
            if postfix:
                bar.set_postfix(**held_postfix(shown, postfix), refresh=False)
            if first and hooks.prepare is None:
                advance_uncounted(bar, length * scale)
            else:
                bar.update(length * scale)
            first = False
            if requested and done < total:
                hint = resume_hint if hooks.save is not None else None
                hint = hint() if callable(hint) else hint
                raise TrainingInterrupted(done, requested[0], hint, unit=unit)
    return done
