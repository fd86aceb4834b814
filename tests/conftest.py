"""Test-wide settings. XLA flags must be set before JAX starts."""

import os

# On jax 0.10.x CPU, vmapped programs were seen to deadlock with the concurrency-optimised
# scheduler; turn it off for the tests (a hang would otherwise hit pytest-timeout).
_flag = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
