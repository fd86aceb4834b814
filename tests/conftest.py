"""Test-wide settings.

Importing purejaxppo turns off XLA's concurrency-optimised CPU scheduler (a known deadlock
of vmapped programs on jax 0.10 CPU); import it here, before any test runs JAX, so the flag
is in force for every test. pytest-timeout (pyproject.toml) fails a hang.

One persistent compile cache serves the whole run: the tests' own programs and every
`purejaxppo` command they start (which inherit `PUREJAXPPO_COMPILE_CACHE`), so a program
compiled by one module is loaded by the next, in CI's cold run as on a laptop. It is the
directory `PUREJAXPPO_COMPILE_CACHE` names if set (`.ci/run` sets one), else a fresh
temporary one removed at the end; the user's own cache (`~/.cache/purejaxppo/jax`) is
neither read nor written. `PUREJAXPPO_NO_COMPILE_CACHE=1 pytest` runs without one.
"""

import os
import shutil
import signal
import tempfile

import pytest

import purejaxppo  # noqa: F401
from purejaxppo.platform import CACHE_DIR_ENV, enable_compile_cache

_OWN_CACHE: list[str] = []  # the temporary cache this run made (removed at its end)


def pytest_configure(config):
    if not os.environ.get(CACHE_DIR_ENV):
        _OWN_CACHE.append(tempfile.mkdtemp(prefix="purejaxppo-tests-jax-cache-"))
        os.environ[CACHE_DIR_ENV] = _OWN_CACHE[0]
    enable_compile_cache()


def pytest_unconfigure(config):
    for directory in _OWN_CACHE:
        shutil.rmtree(directory, ignore_errors=True)


# A process started in the background (`nohup pytest &`, some CI runners) ignores SIGINT;
# the tests of Ctrl-C model an interactive run, where it raises KeyboardInterrupt.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def crash_population_after(monkeypatch):
    """`crash_population_after(g)`: the next PBT population saves its checkpoint once `g`
    generations are done, then dies (KeyboardInterrupt), as if killed;
    `monkeypatch.undo()` disarms it."""
    from purejaxppo.drivers.population import storage

    real_save = storage.save_population

    def arm(crash_generation: int) -> None:
        def save_then_crash(directory, state, generation, history, meta):
            real_save(directory, state, generation, history, meta)
            if generation == crash_generation:
                raise KeyboardInterrupt("killed")

        monkeypatch.setattr(storage, "save_population", save_then_crash)

    return arm
