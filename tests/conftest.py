"""Test-wide settings.

Importing purejaxppo turns off XLA's concurrency-optimised CPU scheduler (a known deadlock
of vmapped programs on jax 0.10 CPU); import it here, before any test runs JAX, so the flag
is in force for every test. pytest-timeout (pyproject.toml) fails a hang.
"""

import purejaxppo  # noqa: F401
