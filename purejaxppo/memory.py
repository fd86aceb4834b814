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
orders of magnitude. A run vmapped over seeds or settings (sweeps) multiplies it; that is
not counted here.
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

import jax
import numpy as np

#: Above this fraction of the free device memory, `check_memory` warns.
WARN_FRACTION = 0.5


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
    try:
        stats = device.memory_stats() or {}
    except Exception:  # some backends do not report memory
        stats = {}
    if "bytes_limit" not in stats:
        return None, f"{device.platform} memory unknown"
    free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return free, f"free {device.platform} memory"


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
