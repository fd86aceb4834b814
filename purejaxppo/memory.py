"""A rough memory estimate of one training run, checked before anything compiles.

`hidden_sizes: [100000, 100000, 100000]` would otherwise compile and run for minutes
before the allocator gives up (or the machine swaps). `check_memory` estimates the bytes
one run needs and compares them with what the device has free. The estimate is a sum of
`Part`s, each charged to the field that makes it large; a refusal names the field of the
largest part (`hidden_sizes`, `recurrent_size`, `num_envs`, `update_epochs`, an env's
`num_agents`, ...):

* parameters: float32 `params`, their gradients, Adam's two moments and one temporary
  copy in the update: `6 * 4 * P` bytes for `P` parameters (counted exactly with
  `jax.eval_shape(networks.init)`); those of a recurrent core are charged to
  `recurrent_size` (`transformer_dim`), the others to `hidden_sizes`;
* activations of one minibatch `M = num_envs * num_steps / num_minibatches` (per device)
  through the actor and the critic towers: `4 * M * sum(hidden_sizes) * 2 towers * 3`
  (pre-activation, activation and its gradient), plus `4 * M * W * 6` for a recurrent
  core of width `W` (`recurrent_size * recurrent_layers`, or `transformer_dim *
  transformer_layers * memory_len`);
* the rollout buffer: `4 * num_envs * num_steps * (obs_size + 8)` (observations and the
  per-step scalars), charged to `num_envs` or `num_steps` (whichever is further above its
  default), or to a multi-agent env's agent count (`num_agents`, ...: every agent
  observes the others, so a step's observations grow with its square);
* the epochs: `update_epochs` PRNG keys (`EPOCH_KEY_BYTES` each with
  `jax.random.split`'s temporaries) and, where the epochs' minibatch steps are one flat
  scan (`loops`, the "unrolled" layout), their permutations (`16 * num_envs * num_steps`
  bytes per epoch with the sort's temporaries) and per-step metrics;
* the env states of a suite that registers them in `ENV_PARTS` (`metabbo:`: `num_envs`
  populations of `population_size x num_dims`, `envs.suites.metabbo.memory_parts`; its
  constants are checked when it is built).

`check_episodes` does the same for `num_episodes` episodes played in parallel (eval's
`--episodes`, `eval_episodes`): their env states and observations.

It is an estimate (XLA fuses and rematerialises; CNN / transformer encoders use more than
the dense layers counted here); it is meant to catch sizes that are off by orders of
magnitude. It is of ONE run: runs vmapped over seeds or settings multiply it.
A sweep therefore sizes its chunks itself (`drivers.sweeps.program.chunk_size`): it
measures one run's memory from the compiled program and fits `runs_per_chunk` runs in
the device's free memory (`bytes_limit - bytes_in_use`, `free_bytes`).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from purejaxppo.errors import short

#: Above this fraction of the free device memory, `check_memory` warns.
WARN_FRACTION = 0.5
#: The fraction of a device's free memory a sweep's chunk may fill (`runs_per_chunk`).
CHUNK_FRACTION = 0.7
#: Bytes per epoch of `jax.random.split(key, update_epochs)`: the compiled program holds
#: 16 (its uint32[2] key and a temporary; `memory_analysis()`), and compiling it folds the
#: threefry counters into constants (a process was seen at ~24 GB with 10**9 epochs).
EPOCH_KEY_BYTES = 32
#: Loss metrics stacked per minibatch step by the flat epoch scan (`LossMetrics`, plus the
#: step's stop flag).
FLAT_STEP_METRICS = 12


#: Env suites whose env states are large enough to estimate: id prefix -> `(env_kwargs,
#: num_envs) -> [Part]`, registered by the suite's module (`metabbo`) when it is imported.
ENV_PARTS: dict[str, Callable[[Mapping[str, Any], int], list[Part]]] = {}
#: Env kwargs that count agents, registered by the multi-agent suite's module
#: (`envs.suites.jaxmarl_kwargs`) when it is imported: a multi-agent rollout's
#: observations grow with their square (each agent observes the others).
AGENT_COUNT_KWARGS: list[str] = []


class Part(NamedTuple):
    """One term of a memory estimate: `nbytes` of `what`, charged to the setting `field`
    (given as `value`); `advice` says how to shrink it."""

    field: str
    value: Any
    nbytes: float
    what: str
    advice: str = ""


def _growth(config: Any, name: str) -> float:
    """How far the `PPOConfig` field `name` is above its default (value / default)."""
    default = type(config).__dataclass_fields__[name].default
    return getattr(config, name) / max(1, default)


def _param_parts(config: Any, networks: Any) -> list[Part]:
    """Parameters x 24 bytes (params, gradients, Adam's moments, a temporary): a recurrent
    core's charged to `recurrent_size` / `transformer_dim`, the rest to `hidden_sizes`."""
    shapes = jax.eval_shape(lambda: networks.init(jax.random.key(0)))  # no eager key
    core = dense = 0
    for path, leaf in jax.tree_util.tree_flatten_with_path(shapes)[0]:
        size = math.prod(leaf.shape)
        if any(getattr(key, "key", None) == "core" for key in path):
            core += size
        else:
            dense += size
    parts = [
        Part(
            "hidden_sizes",
            list(config.hidden_sizes),
            6 * 4 * dense,
            "parameters, gradients and Adam state",
        )
    ]
    if core:
        field = "transformer_dim" if config.recurrent == "transformer" else "recurrent_size"
        what = "the recurrent core's parameters, gradients and Adam state"
        parts.append(Part(field, getattr(config, field), 6 * 4 * core, what))
    return parts


def _activation_parts(config: Any, num_envs: int) -> list[Part]:
    batch = num_envs * config.num_steps
    minibatch = max(1, batch // max(1, config.num_minibatches))
    what = f"activations of a minibatch of {minibatch} rows"
    advice = "or more num_minibatches"
    # charged to the widths, or to num_envs / num_steps when the minibatch grew more
    rows = max((_growth(config, n), n) for n in ("num_envs", "num_steps"))
    dense = 4 * minibatch * sum(config.hidden_sizes) * 2 * 3
    field = "hidden_sizes" if sum(config.hidden_sizes) / 128 >= rows[0] else rows[1]
    value = list(config.hidden_sizes) if field == "hidden_sizes" else getattr(config, field)
    parts = [Part(field, value, dense, what, advice)]
    if config.recurrent is not None:
        if config.recurrent == "transformer":
            name = "transformer_dim"
            width = config.transformer_dim * config.transformer_layers * config.memory_len
        else:
            name, width = "recurrent_size", config.recurrent_size * config.recurrent_layers
        parts.append(Part(name, getattr(config, name), 4 * minibatch * width * 6, what, advice))
    return parts


def _rollout_part(config: Any, num_envs: int, obs_size: int) -> Part:
    nbytes = 4 * num_envs * config.num_steps * (obs_size + 8)
    what = f"the rollout's observations, {obs_size} floats per env and step"
    growth, field = max((_growth(config, n), n) for n in ("num_envs", "num_steps"))
    value = getattr(config, field)
    if config.multi_agent is not None:
        for name in AGENT_COUNT_KWARGS:
            count = config.env_kwargs.get(name)
            if isinstance(count, int) and count**2 / 9 > growth:  # vs JaxMARL's 3 agents
                growth, field, value = count**2 / 9, f"env_kwargs.{name}", count
    return Part(field, value, nbytes, what)


def _epoch_part(config: Any, num_envs: int) -> Part:
    from purejaxppo.loops import loop_plan

    per_epoch = EPOCH_KEY_BYTES
    if loop_plan(config.loop_layout).epochs == "flat":
        batch = num_envs * config.num_steps
        # the epoch's permutation with its sort temporaries (measured about 16 bytes per
        # row with its per-step metrics), and the minibatch steps' stacked metrics
        per_epoch += 16 * batch + 4 * FLAT_STEP_METRICS * config.num_minibatches
    what = f"the epochs' keys and minibatch orders, {per_epoch} bytes per epoch"
    return Part("update_epochs", config.update_epochs, config.update_epochs * per_epoch, what)


def estimate_parts(config: Any, networks: Any, num_envs: int, obs_size: int = 0) -> list[Part]:
    """The `Part`s of one run's training estimate (see the module docstring).

    Args:
      config: the `PPOConfig` (hidden_sizes, num_steps, num_minibatches, update_epochs,
        the recurrent core, env_kwargs).
      networks: the run's `Networks` (its `init` is evaluated abstractly, nothing runs).
      num_envs: environments on this device.
      obs_size: float entries of one env's observation (0 when unknown).
    """
    parts = [*_param_parts(config, networks), *_activation_parts(config, num_envs)]
    parts += [_rollout_part(config, num_envs, obs_size), _epoch_part(config, num_envs)]
    prefix = config.env_name.partition(":")[0] if ":" in config.env_name else ""
    if prefix in ENV_PARTS:
        parts += ENV_PARTS[prefix](config.env_kwargs, num_envs)
    return parts


def estimate_bytes(config: Any, networks: Any, num_envs: int, obs_size: int = 0) -> int:
    """Estimated peak bytes of one run's training: the sum of `estimate_parts`."""
    return int(sum(part.nbytes for part in estimate_parts(config, networks, num_envs, obs_size)))


def check_parts(parts: Sequence[Part], doing: str, context: Sequence[Part] = ()) -> int:
    """Refuses `parts` whose bytes together exceed the device's free memory, naming the
    field of the largest part; warns above `WARN_FRACTION` of it. Returns their bytes.

    `doing` says what needs the memory ("training", "building metabbo:DE"); `context`
    are other settings quoted after the named field.

    Raises:
      ValueError: one line, "<field>=<value>, <context>: <doing> needs about N GiB
        (M GiB for <what>), more than the F GiB of <free memory>; use a smaller <field>".
    """
    need = int(sum(part.nbytes for part in parts))
    free, where = available_bytes()
    if free is None or not parts:
        return need
    top = max(parts, key=lambda part: part.nbytes)
    sizes = ", ".join(
        f"{p.field}={_short(p.value)}" for p in (top, *context) if p.field != top.field or p is top
    )
    mostly = f"{_gib(top.nbytes)} for {top.what}"
    if need > free:
        advice = f"use a smaller {top.field}" + (f" {top.advice}" if top.advice else "")
        raise ValueError(
            f"{sizes}: {doing} needs about {_gib(need)} ({mostly}), more than the "
            f"{_gib(free)} of {where} (purejaxppo.memory); {advice}"
        )
    if need > WARN_FRACTION * free:
        warnings.warn(
            f"{sizes}: {doing} needs about {_gib(need)} ({mostly}), over "
            f"{WARN_FRACTION:.0%} of the {_gib(free)} of {where}",
            stacklevel=3,
        )
    return need


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


def _short(value: Any) -> str:
    return short(value, 80)


def check_memory(config: Any, networks: Any, num_envs: int, obs_size: int = 0) -> int:
    """Refuses a run whose estimated memory (`estimate_parts`) exceeds the device's free
    memory; warns above `WARN_FRACTION` of it. Returns the estimate in bytes.

    Raises:
      ValueError: naming the field of the largest part of the estimate first (e.g.
        `recurrent_size=100000`, `update_epochs=1000000000`), then hidden_sizes, num_envs,
        num_steps, num_minibatches and update_epochs, the estimate and the free memory,
        when the estimate is larger than the free memory.
    """
    context = [
        Part("hidden_sizes", list(config.hidden_sizes), 0, ""),
        Part("num_envs", num_envs, 0, ""),
        *(Part(n, getattr(config, n), 0, "") for n in ("num_steps", "num_minibatches")),
        Part("update_epochs", config.update_epochs, 0, ""),
    ]
    parts = estimate_parts(config, networks, num_envs, obs_size)
    return check_parts(parts, "training", context)


def check_episodes(num_episodes: int, env: Any, env_params: Any) -> int:
    """Refuses `num_episodes` episodes played in parallel (`evaluation.evaluate`, eval's
    `--episodes`, `eval_episodes`) whose env states and observations (3 copies: the
    state, the stepped one and the reset one) exceed the device's free memory.

    Raises:
      ValueError: one line naming `num_episodes`, the estimate and the free memory.
    """
    try:
        obs, state = jax.eval_shape(lambda: env.reset(jax.random.key(0), env_params))
    except Exception:  # host envs, envs without a traceable reset
        obs, state = (), ()
    leaves = jax.tree.leaves((obs, obs, state))
    per_episode = 3 * sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in leaves) + 64
    what = f"the episodes' env states and observations, {per_episode} bytes each"
    part = Part("num_episodes", num_episodes, num_episodes * per_episode, what, "(--episodes)")
    return check_parts([part], f"playing {num_episodes} episodes at once")


def observation_size(env: Any, env_params: Any) -> int:
    """Float entries of one observation of a gymnax-style env (0 when it cannot tell)."""
    try:
        obs, _ = jax.eval_shape(lambda: env.reset(jax.random.key(0), env_params))  # no eager key
    except Exception:  # host envs, envs without a traceable reset
        return 0
    return int(sum(np.prod(leaf.shape) for leaf in jax.tree.leaves(obs)))
