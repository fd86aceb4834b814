"""A rough memory estimate of one training run, checked before anything compiles.

`hidden_sizes: [100000, 100000, 100000]` would otherwise compile and run for minutes
before the allocator gives up (or the machine swaps). `check_memory` estimates the bytes
one run needs and compares them with what the device has free:

* parameters: float32 `params`, their gradients, Adam's two moments and one temporary
  copy in the update: `6 * 4 * P` bytes for `P` parameters (counted exactly with
  `jax.eval_shape(networks.init)`);
* activations of one minibatch `M = num_envs * num_steps / num_minibatches` (per device)
  through the actor and the critic towers: `4 * M * sum(hidden_sizes) * 2 towers * 3`
  (pre-activation, activation and its gradient);
* the rollout buffer: `4 * num_envs * num_steps * (obs_size + 8)` (observations and the
  per-step scalars).

It is an estimate (XLA fuses and rematerialises; CNN / recurrent / transformer encoders
use more than the dense layers counted here); it is meant to catch sizes that are off by
orders of magnitude. It is of ONE run: runs vmapped over seeds or settings multiply it.
A sweep therefore sizes its chunks itself (`drivers.sweeps.program.chunk_size`): it
measures one run's memory from the compiled program and fits `runs_per_chunk` runs in
the device's free memory (`bytes_limit - bytes_in_use`, `free_bytes`).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

#: Above this fraction of the free device memory, `check_memory` warns.
WARN_FRACTION = 0.5
#: The fraction of a device's free memory a sweep's chunk may fill (`runs_per_chunk`).
CHUNK_FRACTION = 0.7


def estimate_bytes(config: Any, networks: Any, num_envs: int, obs_size: int = 0) -> int:
    """Estimated peak bytes of one run's training (see the module docstring).

    Args:
      config: the `PPOConfig` (hidden_sizes, num_steps, num_minibatches).
      networks: the run's `Networks` (its `init` is evaluated abstractly, nothing runs).
      num_envs: environments on this device.
      obs_size: float entries of one observation (0 when unknown).
    """
    shapes = jax.eval_shape(networks.init, jax.random.key(0))
    num_params = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(shapes))
    batch = num_envs * config.num_steps
    minibatch = max(1, batch // max(1, config.num_minibatches))
    activations = 4 * minibatch * sum(config.hidden_sizes) * 2 * 3
    rollout = 4 * batch * (obs_size + 8)
    return 6 * 4 * num_params + activations + rollout


def available_bytes(device: Any = None) -> tuple[int | None, str]:
    """(free bytes, description) of `device` (default: the first JAX device).

    CPU: the available RAM (`/proc/meminfo`'s MemAvailable, else `os.sysconf`); accelerators:
    `bytes_limit - bytes_in_use` from `device.memory_stats()`. (None, why) when unknown.
    """
    device = device or jax.devices()[0]
    if device.platform == "cpu":
        try:  # Linux: free + reclaimable (page cache), as `free` reports it
            with open("/proc/meminfo") as meminfo:
                for line in meminfo:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024, "available RAM"
        except (OSError, ValueError, IndexError):
            pass
        try:
            pages = os.sysconf("SC_AVPHYS_PAGES")
            return int(pages * os.sysconf("SC_PAGE_SIZE")), "available RAM"
        except (ValueError, OSError, AttributeError):
            return None, "available RAM unknown"
    free = free_bytes(memory_stats(device))
    if free is None:
        return None, f"{device.platform} memory unknown"
    return free, f"free {device.platform} memory"


def memory_stats(device: Any) -> dict[str, Any]:
    """`device.memory_stats()`, or {} where the backend reports none (CPU)."""
    try:
        return dict(device.memory_stats() or {})
    except Exception:  # some backends do not report memory
        return {}


def free_bytes(stats: Mapping[str, Any]) -> int | None:
    """Free bytes of a device from its `memory_stats()`: `bytes_limit - bytes_in_use`
    (the allocator's pool, less its live buffers); None without `bytes_limit`."""
    if "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def runs_per_chunk(
    bytes_per_run: float,
    bytes_limit: float,
    bytes_in_use: float,
    num_runs: int,
    num_devices: int,
    fraction: float = CHUNK_FRACTION,
) -> int:
    """Runs in one chunk of a sweep: as many whole runs per device as fit, each needing
    `bytes_per_run`, in `fraction` of the device's free memory `bytes_limit -
    bytes_in_use` (bytes), times `num_devices`; at least one run per device and at most
    `num_runs` padded to a multiple of `num_devices` (`parallel.pad_runs`).

    Example: 300 MB per run, 10 GB limit, 2 GB in use, 100 runs on 4 devices: 70% of
    8 GB / 300 MB = 18.7 -> 18 runs per device -> 72 runs per chunk.

    Raises:
      ValueError: naming the argument, for `bytes_per_run` or `bytes_limit` <= 0,
        `bytes_in_use` < 0, `num_runs` or `num_devices` < 1, or `fraction` outside (0, 1].
    """
    for name, value in (("bytes_per_run", bytes_per_run), ("bytes_limit", bytes_limit)):
        if not value > 0:
            raise ValueError(f"{name}={value}: must be > 0 bytes")
    if not bytes_in_use >= 0:
        raise ValueError(f"bytes_in_use={bytes_in_use}: must be >= 0 bytes")
    for name, value in (("num_runs", num_runs), ("num_devices", num_devices)):
        if value < 1:
            raise ValueError(f"{name}={value}: must be >= 1")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction={fraction}: must be in (0, 1]")
    free = max(0.0, float(bytes_limit) - float(bytes_in_use))
    # (`parallel.runs_per_chunk_for_memory` and `parallel.pad_runs`, written out here:
    # this module sits below `parallel` in the imports.)
    fit = max(1, int(fraction * free // max(bytes_per_run, 1.0))) * num_devices
    padded = -(-num_runs // num_devices) * num_devices
    return min(fit, padded)


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


def check_memory(config: Any, networks: Any, num_envs: int, obs_size: int = 0) -> int:
    """Refuses a run whose estimated memory exceeds the device's free memory; warns above
    `WARN_FRACTION` of it. Returns the estimate in bytes.

    Raises:
      ValueError: naming hidden_sizes, num_envs, num_steps, the estimate and the free
        memory, when the estimate is larger than the free memory.
    """
    need = estimate_bytes(config, networks, num_envs, obs_size)
    free, what = available_bytes()
    if free is None:
        return need
    sizes = (
        f"hidden_sizes={list(config.hidden_sizes)}, num_envs={num_envs}, "
        f"num_steps={config.num_steps}, num_minibatches={config.num_minibatches}"
    )
    if need > free:
        raise ValueError(
            f"{sizes}: training needs about {_gib(need)} (parameters, Adam state and "
            f"activations; purejaxppo.memory), more than the {_gib(free)} of {what}; use "
            "smaller hidden_sizes / num_envs / num_steps or more num_minibatches"
        )
    if need > WARN_FRACTION * free:
        warnings.warn(
            f"{sizes}: training needs about {_gib(need)}, over "
            f"{WARN_FRACTION:.0%} of the {_gib(free)} of {what}",
            stacklevel=3,
        )
    return need


def observation_size(env: Any, env_params: Any) -> int:
    """Float entries of one observation of a gymnax-style env (0 when it cannot tell)."""
    try:
        obs, _ = jax.eval_shape(env.reset, jax.random.key(0), env_params)
    except Exception:  # host envs, envs without a traceable reset
        return 0
    return int(sum(np.prod(leaf.shape) for leaf in jax.tree.leaves(obs)))
