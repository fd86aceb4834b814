"""Keeps orbax's "Event loop is closed" tracebacks off the terminal.

When orbax fails to read or write a checkpoint (a damaged file, a full disk), the reads
and writes still in flight in tensorstore's threads finish after orbax has closed its
event loop; each one's callback then fails and prints a traceback ending in
"RuntimeError: Event loop is closed" (up to ~150 lines per failure), around the one-line
error that purejaxppo reports. `quiet_closed_loop()` holds `sys.stderr` while a checkpoint
manager is open, waits for those late callbacks when any was seen, and writes back
everything else that was printed meanwhile, in order.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import threading
import time
from collections.abc import Iterator

__all__ = ["quiet_closed_loop", "strip_closed_loop_noise"]

#: The marker of the noise; nothing is removed from text that lacks it.
MARKER = "Event loop is closed"
#: The pieces of those tracebacks, longest first (threads interleave their fragments).
_PIECES = re.compile(
    r"Traceback \(most recent call last\):"
    r'|File "[^"]*asyncio[/\\]base_events\.py", line \d+, in (?:call_soon_threadsafe|_check_closed)'
    r"|self\._check_closed\(\)"
    r"|raise RuntimeError\('Event loop is closed'\)"
    r"|RuntimeError: Event loop is closed"
    r"|: Event loop is closed"
    r"|Event loop is closed"
    r"|RuntimeError"
)


def strip_closed_loop_noise(text: str) -> str:
    """`text` without the pieces of "Event loop is closed" tracebacks (`_PIECES`) and the
    lines they leave empty; unchanged when it does not hold the marker."""
    if MARKER not in text:
        return text
    kept = []
    for line in text.splitlines(keepends=True):
        stripped = _PIECES.sub("", line)
        if stripped.strip(" \t\r\n:") or not line.strip():
            kept.append(line if stripped == line else stripped)
    return "".join(kept)


class _Held(io.TextIOBase):
    """A stand-in for `sys.stderr` that keeps what is written (from any thread)."""

    def __init__(self, real: object):
        self.real, self.parts, self.lock = real, [], threading.Lock()
        self.last_write = time.monotonic()

    def write(self, text: str) -> int:
        with self.lock:
            self.parts.append(text)
            self.last_write = time.monotonic()
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return bool(getattr(self.real, "isatty", lambda: False)())

    def text(self) -> str:
        with self.lock:
            return "".join(self.parts)


@contextlib.contextmanager
def quiet_closed_loop(linger: float = 2.0, quiet: float = 0.3) -> Iterator[None]:
    """Holds `sys.stderr` in the block; at its end (also on an error), when the noise was
    seen, waits until nothing was written for `quiet` seconds (at most `linger`), then
    writes what was held, the noise removed, to the real `sys.stderr`. Off the main
    thread, or nested, it does nothing."""
    real = sys.stderr
    if isinstance(real, _Held) or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = _Held(real)
    sys.stderr = held
    try:
        yield
    finally:
        deadline = time.monotonic() + linger
        while MARKER in held.text() and time.monotonic() < deadline:
            if time.monotonic() - held.last_write >= quiet:
                break
            time.sleep(0.05)
        sys.stderr = real
        text = strip_closed_loop_noise(held.text())
        if text:
            real.write(text)
            real.flush()
