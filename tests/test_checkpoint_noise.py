"""A failed checkpoint read is one line: orbax's late "Event loop is closed" tracebacks
(tensorstore callbacks after orbax closed its loop) are held back, nothing else is."""

from __future__ import annotations

import sys

import pytest

from purejaxppo.checkpoint_noise import quiet_closed_loop, strip_closed_loop_noise
from purejaxppo.cli import main

TINY = ["--num-envs", "4", "--num-steps", "16", "--hidden-sizes", "8", "--no-progress"]

# What two threads printed, interleaved, around a real line (seen on a damaged checkpoint).
NOISY = """Traceback (most recent call last):
  File "/usr/lib/python3.11/asyncio/base_events.py", line 806, in call_soon_threadsafe
Traceback (most recent call last):
    self._check_closed()
  File "/usr/lib/python3.11/asyncio/base_events.py", line 519, in _check_closed
    raise RuntimeError('Event loop is closed')
RuntimeError: Event loop is closed
self._check_closed()
purejaxppo: warning: a real line
RuntimeError    raise RuntimeError('Event loop is closed')
: Event loop is closed
"""


def test_the_noise_is_stripped_and_every_other_line_kept():
    assert strip_closed_loop_noise(NOISY) == "purejaxppo: warning: a real line\n"
    # Without the marker nothing is touched, tracebacks included.
    plain = "Traceback (most recent call last):\nRuntimeError: boom\n"
    assert strip_closed_loop_noise(plain) == plain


def test_quiet_closed_loop_holds_stderr_and_writes_the_rest_back(capsys):
    with quiet_closed_loop(linger=0.5, quiet=0.05):
        sys.stderr.write(NOISY)
        print("kept", file=sys.stderr)
    assert capsys.readouterr().err == "purejaxppo: warning: a real line\nkept\n"
    with pytest.raises(ValueError, match="boom"), quiet_closed_loop():
        print("before the error", file=sys.stderr)
        raise ValueError("boom")
    assert capsys.readouterr().err == "before the error\n"


def test_a_damaged_checkpoint_is_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", *TINY, "--total-timesteps", "128", "--run-dir", str(run)]
    assert main(argv) == 0
    for data in (run / "checkpoints" / "last").glob("*/state/d/*"):
        data.write_bytes(b"\x00garbage" * 20)  # every array file of the state: unreadable
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["eval", str(run), "--episodes", "2"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("purejaxppo: error: checkpoint "), err
