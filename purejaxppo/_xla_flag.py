"""The CPU-scheduler XLA flag that avoids a jax 0.10 CPU deadlock (see `__init__.py`).

Kept import-light: no `jax` import unless the user already imported it.
"""

from __future__ import annotations

import os
import sys
import warnings

FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
SETTING = f"{FLAG}=false"
#: jax versions whose XLA is known to have the flag and the deadlock (major, minor).
AFFECTED = ((0, 10),)

FIX = (
    f'export XLA_FLAGS="{SETTING}" before starting Python, or import purejaxppo before '
    "gymnax / before any JAX computation"
)


def jax_version() -> tuple[int, int] | None:
    """(major, minor) of the installed jax, read from its metadata (jax is not imported)."""
    from importlib import metadata

    try:
        parts = metadata.version("jax").split(".")
        return int(parts[0]), int(parts[1])
    except (metadata.PackageNotFoundError, ValueError, IndexError):
        return None


def backend_started() -> bool:
    """Whether JAX has already started a backend in this process (then XLA_FLAGS changes
    no longer apply). False when jax is not imported yet."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # a private API: if it moved, assume nothing
        return False


def _cpu_backend_in_use() -> bool:
    try:
        import jax

        return jax.default_backend() == "cpu"
    except Exception:
        return False


def apply() -> None:
    """Sets the flag in XLA_FLAGS for affected jax versions; warns once when it is absent
    and the CPU backend already started (the flag can no longer take effect)."""
    if FLAG in os.environ.get("XLA_FLAGS", "") or jax_version() not in AFFECTED:
        return
    if backend_started():
        if _cpu_backend_in_use():
            warnings.warn(
                f"purejaxppo: JAX's CPU backend started before purejaxppo was imported "
                f"(e.g. by `import gymnax`), so {SETTING} cannot take effect; jax 0.10 CPU "
                f"programs may then deadlock. Fix: {FIX}.",
                RuntimeWarning,
                stacklevel=3,
            )
        return
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {SETTING}").strip()
