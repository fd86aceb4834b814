"""What a user gets by default from the command line: every CPU core, a compile cache.

Both are JAX settings that must be made before JAX starts its backend (`jax.devices()`,
the first computation): the CLI calls `configure_cpu_devices` and `enable_compile_cache`
first thing. From Python, the same two lines:

    import jax
    jax.config.update("jax_num_cpu_devices", os.cpu_count())   # before any computation
    jax.config.update("jax_compilation_cache_dir", "~/.cache/purejaxppo/jax")

* **CPU devices.** XLA runs one compiled program per device on one core's worth of
  threads for the small matmuls of PPO, so several runs (seeds, sweep settings,
  population members) on a 2-core CPU take ~2x longer on one device than split over two
  (`benchmarks/README.md`). `configure_cpu_devices` sets the CPU device count to the
  usable cores unless the user chose: `--devices`, `JAX_NUM_CPU_DEVICES`, or an
  `XLA_FLAGS` `--xla_force_host_platform_device_count`.
* **Compile cache.** JAX's persistent compilation cache (`jax_compilation_cache_dir`)
  keeps compiled programs on disk, so the second `purejaxppo train` of the same config
  skips most of the compile. Default directory `$XDG_CACHE_HOME/purejaxppo/jax` (or
  `~/.cache/purejaxppo/jax`); `--no-compile-cache` or `PUREJAXPPO_NO_COMPILE_CACHE=1` turn
  it off, `PUREJAXPPO_COMPILE_CACHE=DIR` moves it. The same on every platform (CPU, GPU,
  TPU): the choice (`compile_cache_setting`) is made before JAX picks its backend and
  never asks which; JAX serialises executables on all three (on a GPU it also keeps its
  autotuning results under the directory). `purejaxppo train` also keeps a single run's
  traced programs under its `programs/` subdirectory (`stored_programs`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from purejaxppo._xla_flag import backend_started

#: Environment variables read here.
NO_CACHE_ENV = "PUREJAXPPO_NO_COMPILE_CACHE"
CACHE_DIR_ENV = "PUREJAXPPO_COMPILE_CACHE"
#: Where `purejaxppo train` keeps a single run's exported programs, under the cache's
#: directory (`stored_programs`).
PROGRAMS_SUBDIRECTORY = "programs"
_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask, else `os.cpu_count()`)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def configure_cpu_devices(requested: int | None = None) -> int | None:
    """Sets JAX's CPU device count before the backend starts; returns the count set.

    `requested` (the CLI's `--devices`) wins; otherwise the number of usable cores, unless
    the user already chose (`JAX_NUM_CPU_DEVICES`, or an `XLA_FLAGS` device count), in
    which case nothing is changed and None is returned. Also None when the backend has
    already started (too late to change) or the machine has one core.

    Raises:
      ValueError: for `requested` < 1.
    """
    if requested is not None and requested < 1:
        raise ValueError(f"--devices={requested}: must be >= 1")
    if requested is None and (
        os.environ.get("JAX_NUM_CPU_DEVICES")
        or _DEVICE_COUNT_FLAG in os.environ.get("XLA_FLAGS", "")
    ):
        return None
    count = requested if requested is not None else usable_cores()
    if count <= 1 and requested is None:
        return None
    if backend_started():
        return None
    import jax

    jax.config.update("jax_num_cpu_devices", count)
    return count


def compile_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The persistent-cache directory (see the module docstring), whether on or off:
    `PUREJAXPPO_COMPILE_CACHE`, else under `$XDG_CACHE_HOME` or `~/.cache` (`environ`:
    default `os.environ`)."""
    environ = os.environ if environ is None else environ
    explicit = environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "purejaxppo" / "jax"


def compile_cache_setting(environ: Mapping[str, str], enabled: bool = True) -> Path | None:
    """The persistent-cache directory a command uses, None for off: a pure function of
    the environment variables (`environ`, e.g. `os.environ`) and `enabled` (False:
    `--no-compile-cache`). Off when `enabled` is False or `PUREJAXPPO_NO_COMPILE_CACHE` is
    anything but "" / "0"; else `PUREJAXPPO_COMPILE_CACHE`, or
    `$XDG_CACHE_HOME/purejaxppo/jax`, or `~/.cache/purejaxppo/jax`. Nothing depends on the
    platform (`JAX_PLATFORMS`, the devices): GPU and TPU runs get the cache as CPU runs do.
    """
    if not enabled or environ.get(NO_CACHE_ENV, "") not in ("", "0"):
        return None
    return compile_cache_dir(environ)


def enable_compile_cache(enabled: bool = True) -> Path | None:
    """Turns on JAX's persistent compilation cache, on every platform; returns its
    directory (None: off, see `compile_cache_setting`).

    Every program is cached, however short its compile (JAX's default skips programs
    that compile in under a second).
    """
    directory = compile_cache_setting(os.environ, enabled)
    if directory is None:
        return None
    import jax

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # read-only home: run without a cache rather than fail
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory
