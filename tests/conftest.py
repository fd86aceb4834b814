"""Test-wide settings.

Importing purejaxppo turns off XLA's concurrency-optimised CPU scheduler (a known deadlock
of vmapped programs on jax 0.10 CPU); import it here, before any test runs JAX, so the flag
is in force for every test. pytest-timeout (pyproject.toml) fails a hang.
"""

import signal

import pytest

import purejaxppo  # noqa: F401

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
