"""The XLA flags purejaxppo sets before JAX starts (see `__init__.py`):

* the CPU-scheduler flag that avoids a jax 0.10 CPU deadlock (`SETTING`);
* XLA's backend optimisation level 2 instead of its default 3 where only the CPU runs
  (`LEVEL_SETTING`): LLVM's cheaper pipeline, about a fifth less compile time for the
  training program at the same run speed (`docs/benchmarks.md`, "Compile time").

Both only where the user's `XLA_FLAGS` does not already set them. Kept import-light: no
`jax` import unless the user already imported it.
"""

from __future__ import annotations

import os
import sys
import warnings

FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
SETTING = f"{FLAG}=false"
#: jax versions whose XLA is known to have the flag and the deadlock (major, minor).
AFFECTED = ((0, 10),)

#: XLA's backend (LLVM) optimisation level on CPU-only installs (XLA's default is 3).
LEVEL_FLAG = "--xla_backend_optimization_level"
LEVEL_SETTING = f"{LEVEL_FLAG}=2"
#: `jax.jit(..., compiler_options=LEVEL3_OPTIONS)`: one program at XLA's default level 3.
#: Two layouts of one computation (flat and nested epochs, a batched and a per-env step)
#: give the same bits at level 3 but may differ in the last bit at level 2, where LLVM
#: vectorises their sums differently; the tests of those equalities compile at level 3.
LEVEL3_OPTIONS = {"xla_backend_optimization_level": 3}

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


def accelerator_plugin_installed() -> bool:
    """Whether a JAX plugin for another platform (CUDA, ROCm, TPU, ...) is installed, found
    where JAX's own plugins live (the `jax_plugins` namespace package, e.g. jax[cuda12]'s
    `jax_plugins.xla_cuda12`, and `libtpu`), without importing any of them."""
    from importlib import util

    if util.find_spec("libtpu") is not None:
        return True
    try:
        return util.find_spec("jax_plugins") is not None
    except (ImportError, ValueError):
        return False


def cpu_only() -> bool:
    """Whether JAX will run on the CPU alone: `JAX_PLATFORMS=cpu`, or no accelerator
    plugin installed."""
    platforms = os.environ.get("JAX_PLATFORMS", os.environ.get("JAX_PLATFORM_NAME", ""))
    if platforms:
        return platforms.strip().lower() == "cpu"
    return not accelerator_plugin_installed()


def apply() -> None:
    """Sets the XLA flags of this module's docstring in XLA_FLAGS before JAX starts."""
    _apply_scheduler()
    _apply_level()


def _apply_level() -> None:
    """XLA's optimisation level 2 on CPU-only installs, unless the user set a level or
    JAX already started (then it cannot take effect: nothing is set, nothing warned, as
    it only costs compile time)."""
    if LEVEL_FLAG in os.environ.get("XLA_FLAGS", "") or backend_started() or not cpu_only():
        return
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {LEVEL_SETTING}").strip()


def _apply_scheduler() -> None:
    """Sets the scheduler flag in XLA_FLAGS for affected jax versions; warns once when it is
    absent and the CPU backend already started (the flag can no longer take effect)."""
    if FLAG in os.environ.get("XLA_FLAGS", "") or jax_version() not in AFFECTED:
        return
    if backend_started():
        if _cpu_backend_in_use():
            warnings.warn(
                f"purejaxppo: JAX's CPU backend started before purejaxppo was imported "
                f"(e.g. by `import gymnax`), so {SETTING} cannot take effect; jax 0.10 CPU "
                f"programs may then deadlock. Fix: {FIX}.",
                RuntimeWarning,
                stacklevel=4,
            )
        return
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {SETTING}").strip()
