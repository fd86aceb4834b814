"""Devices and hosts: the only module that places work on several devices or processes.

Two kinds of parallelism, both with `jax.shard_map` over a one-axis `Mesh` of all devices
(the local ones, or every process's after `initialize_distributed`):

* **Many runs** (`make_runs_program`): a batch of `[R]` independent runs (seeds x
  hyperparameter settings) is split over the devices along the axis `RUNS_AXIS`; each
  device `vmap`s the training function over its `R / D` runs. Runs never communicate,
  so a run's numbers do not depend on the device count. `runs_mesh` decides, for every
  driver and command, which devices a batch may use (the env's kind, the devices asked
  for, the batch size).
* **One agent, data-parallel** (`make_data_parallel_train`): the agent's `num_envs`
  environments are split over the devices along `DATA_AXIS`; every device collects its
  share of the rollout and computes gradients on its share of each minibatch, and the
  gradients (and the statistics that normalise advantages) are averaged over the devices
  (the gradient as one flat vector, `pmean_flat`; statistics as every device's moments,
  `collectives.all_gather_flat`, merged alike everywhere: one all-reduce each), so
  parameters stay identical everywhere. With one device this is the ordinary run.
  `make_data_parallel_run` is the same program in segments, for drivers that log and
  save between them (`purejaxppo train --coordinator ...`, `drivers.program`).

Programs that run once per run (a run's init, the `[R]` runs' init, the data-parallel
run's init: `make_runs_program(..., once=True)`) compile with XLA's cheaper CPU pipeline
(`compiled.jit_once`), bitwise the same output.

Several hosts: call `initialize_distributed` first in every process (`processes`, which
holds what the processes of one run agree on; it wraps `jax.distributed.initialize` and
picks gloo collectives on CPU); the same calls then span all processes' devices. Inputs
are built from host data that every process holds in full (`to_global`); each process
reads back its own rows (`local_rows`) or, for small results, everything (`to_host`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from purejaxppo import stored_programs
from purejaxppo.collectives import pmean_flat
from purejaxppo.compiled import jit_once
from purejaxppo.config import PPOConfig
from purejaxppo.hyperparams import Hyperparams
from purejaxppo.processes import initialize_distributed
from purejaxppo.types import RunnerState, TrainOutput

#: Mesh axis over which independent runs are split (`make_runs_program`).
RUNS_AXIS = "runs"
#: Mesh axis over which one agent's environments are split (`make_data_parallel_train`).
DATA_AXIS = "data"


def make_mesh(devices: Sequence[jax.Device] | int | None, axis_name: str) -> Mesh:
    """A one-axis mesh over `devices`: None for all devices (of all processes), an int
    for the first n local devices, or an explicit list.

    Raises:
      ValueError: for an int that is < 1 or more than the local devices.
    """
    if devices is None:
        devices = jax.devices()
    elif isinstance(devices, int):
        local = jax.local_devices()
        if not 1 <= devices <= len(local):
            raise ValueError(f"devices={devices}: must be in [1, {len(local)}] (local devices)")
        devices = local[:devices]
    return Mesh(np.asarray(list(devices)), (axis_name,))


def runs_mesh(
    env_id: str,
    devices: Sequence[jax.Device] | int | str | None,
    count: int | None = None,
    *,
    pad: bool = False,
) -> Mesh | None:
    """Which devices a batch of `count` independent runs of `env_id` may use: the one-axis
    `RUNS_AXIS` mesh that the batched-runs drivers (seeds, sweeps, PBT) split runs over.

    A JAX env's runs may span devices. An "envpool:" or "gymnasium:" id's runs share one
    pool / vector env on the host, stepped from one device (`runs_on_devices` is refused
    in the env-kind table, `kinds`): by default they get one device, and more are refused.

    Args:
      env_id: the runs' `make_env` id; its kind is read from the prefix
        (`kinds.kind_of_id`).
      devices: as the user gives it:
        None: every device of every process (one device for a kind that cannot span them);
        "auto": the command line's default when it set the CPU device count, the most local
        devices that a batch of `count` runs splits over evenly (the largest d <= the local
        device count that divides `count`; every local device for `count` None). With
        `pad`: min(`count`, local device count), the caller padding the batch to a
        multiple of it;
        an int n: the first n local devices;
        a sequence of `jax.Device`s: those devices.
      count: R, the runs of one batch (a sweep's chunk, a population, the seeds); read by
        "auto" only. An explicit device count that does not divide R is the caller's to
        refuse, in its option's words (`drivers.settings.check_chunk`,
        `drivers.population.options.check_options`).
      pad: the caller pads the batch to a multiple of the device count (seeds), so "auto"
        need not divide `count`.

    Returns:
      A one-axis `Mesh` over `RUNS_AXIS`; None only for "auto" when the kind keeps its
      runs on one device (nothing to choose: the caller keeps its own default).

    Raises:
      ValueError: several devices for a kind that cannot span them (the kind table's
        refusal, one line naming the env, its kind and the device count; for an int,
        before any device is looked up); an int < 1 or above the local device count
        (`make_mesh`); a string other than "auto".
    """
    from purejaxppo import kinds  # the env suites import gymnax: not at import

    spans = kinds.kind_of_id(env_id).supports("runs_on_devices")
    if isinstance(devices, str):
        if devices != "auto":
            raise ValueError(
                f"devices={devices!r}: must be None, 'auto', an int >= 1 or a list of devices"
            )
        if not spans:
            return None
        local = len(jax.local_devices())
        if count is None:
            devices = local
        elif pad:
            devices = min(count, local)
        else:
            devices = max(d for d in range(1, local + 1) if count % d == 0)
    elif isinstance(devices, int):
        kinds.check_runs_devices(env_id, devices)
    elif devices is None and not spans:
        devices = 1
    mesh = make_mesh(devices, RUNS_AXIS)
    kinds.check_runs_devices(env_id, mesh.devices.size)
    return mesh


def to_global(tree: Any, mesh: Mesh, spec: P) -> Any:
    """Host arrays (the same full arrays in every process) -> global `jax.Array`s laid out
    by `spec` on `mesh`; each process places only the pieces its own devices hold."""
    sharding = NamedSharding(mesh, spec)

    def place(x):
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

    return jax.tree.map(place, tree)


def to_host(tree: Any) -> Any:
    """Global arrays -> full numpy arrays in every process (an all-gather across processes
    only for arrays split over several processes; keep them small)."""

    def fetch(x):
        if not isinstance(x, jax.Array) or x.is_fully_addressable:
            return np.asarray(jax.device_get(x))
        if x.is_fully_replicated:
            return np.asarray(x.addressable_data(0))
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))

    return jax.tree.map(fetch, tree)


def local_rows(x: jax.Array) -> tuple[np.ndarray, np.ndarray]:
    """(row indices, rows) of a global array split along its first axis that this
    process's devices hold, in increasing row order, without communication."""
    pieces = {}
    for shard in x.addressable_shards:
        start = shard.index[0].start or 0
        pieces.setdefault(start, np.asarray(shard.data))
    starts = sorted(pieces)
    rows = np.concatenate([pieces[s] for s in starts])
    index = np.concatenate([np.arange(s, s + len(pieces[s])) for s in starts])
    return index, rows


def make_runs_program(
    batched_fn: Callable,
    mesh: Mesh,
    in_specs: Any = None,
    *,
    once: bool = False,
    stored: tuple[str, Any, Path | None] | None = None,
) -> Callable:
    """`jit(shard_map(batched_fn))` over `RUNS_AXIS`: `batched_fn` maps a device's share
    of `[R]` runs (leading axis `[R / D]` on every argument and output) and is called on
    every device; R must be a multiple of the device count. Runs do not communicate.
    Build `batched_fn` with `batch_runs` (or `jax.vmap`). `in_specs` (default: every
    argument split along `RUNS_AXIS`) may give `P()` to an argument every run shares
    (e.g. a warm start's params, replicated on every device). `once`: a program called
    once or twice per process (the runs' init), compiled by `jit_once` instead of
    `jax.jit` (the same output). `stored`: `(name, config, directory)`, the program
    kept in `stored_programs`' store in `directory` (None: not kept; see
    `stored_programs.program`)."""
    in_specs = P(RUNS_AXIS) if in_specs is None else in_specs
    mapped = jax.shard_map(
        batched_fn, mesh=mesh, in_specs=in_specs, out_specs=P(RUNS_AXIS), check_vma=False
    )
    if stored is not None:
        name, config, directory = stored
        placement = jax.tree.map(
            lambda spec: NamedSharding(mesh, spec), in_specs, is_leaf=lambda x: isinstance(x, P)
        )
        return stored_programs.program(
            name, mapped, config, directory, once=once, placement=placement
        )
    return jit_once(mapped) if once else jax.jit(mapped)


def batch_runs(init: Callable, run: Callable, *, vmap_init: bool = False) -> Callable:
    """`(key_data [R, ...], hparams [R]) -> run(init(key), hparams)` for R runs at once.

    `init` runs through `lax.map` (one run after another) and `run` through `jax.vmap`.
    Initialising under `vmap` would batch the QR decompositions of orthogonal
    initialisation, and XLA:CPU runs a batched QR on its shared intra-op thread pool:
    with several devices per process executing at once, both waited on that pool and
    deadlocked at 0% CPU (jax 0.10.2, 2-process run; seen in gdb). Initialisation is a
    negligible part of a run, and a run's numbers are the same either way.

    `vmap_init=True` vmaps `init` too: for "envpool:" ids (`envs.suites.envpool`), whose
    R runs share one pool that a vmapped reset builds once with R x N envs (a `lax.map`
    would rebuild it R times). Those programs run on one device (`runs_mesh`), where
    the deadlock above cannot happen; the MLP params came out bitwise those of `lax.map`
    (XLA:CPU, jax 0.10.2).
    """

    def batched(key_data: jax.Array, *args: Any) -> Any:
        def init_one(kd: jax.Array) -> Any:
            return init(jax.random.wrap_key_data(kd))

        runners = jax.vmap(init_one)(key_data) if vmap_init else jax.lax.map(init_one, key_data)
        return jax.vmap(run)(runners, *args)

    return batched


def make_data_parallel_train(
    config: PPOConfig,
    devices: Sequence[jax.Device] | int | None = None,
    env: Any = None,
    env_params: Any = None,
    *,
    init_params: Any = None,
) -> Callable[..., TrainOutput]:
    """Builds `train(key, hparams=None) -> TrainOutput` for ONE agent whose `num_envs`
    environments are split over D devices (all devices of all processes by default).

    Each device steps `num_envs / D` envs, computes GAE on its share, and takes the same
    Adam steps as the others on gradients averaged over the devices (`lax.pmean` over
    `DATA_AXIS`); advantage normalisation, episode statistics, losses and explained
    variance use the whole batch. The total batch per update is `num_envs * num_steps` as
    in the one-device run, each minibatch `num_envs * num_steps / num_minibatches`
    transitions spread over the devices. With D = 1 this is `make_train(config)`.

    The returned function is jitted. Its output's `train_state` and `metrics` are
    replicated on all devices; `runner_state.env` holds the `[num_envs]` envs split over
    the devices. Use `to_host` to read them in a multi-process run.

    Args:
      config: the agent's configuration; `num_envs` is the total over all devices.
      devices: None (all devices), an int (the first n local devices) or a device list.
      env, env_params: optional gymnax-API environment (see `make_train`).
      init_params: a warm start (see `make_train`; required with `config.init_from`).

    Raises:
      ValueError: before compiling, for a host env ("gymnasium:<id>"), if D does not
        divide `num_envs`, or if the per-device
        batch `num_envs / D * num_steps` does not split into `num_minibatches`.
    """
    from purejaxppo.kinds import check

    check("data_parallel", config.env_name, env, multi_agent=config.multi_agent)
    from purejaxppo.train import make_train_fns

    mesh = make_mesh(devices, DATA_AXIS)
    num_shards = mesh.devices.size
    fns = make_train_fns(
        config,
        env,
        env_params,
        axis_name=DATA_AXIS,
        num_shards=num_shards,
        init_params=init_params,
    )
    runner_spec = RunnerState(train_state=P(), env=P(DATA_AXIS), key=P(), update_step=P())
    out_spec = TrainOutput(runner_state=runner_spec, metrics=P())

    def per_device(key_data: jax.Array, hparams: Hyperparams) -> TrainOutput:
        return fns.train(jax.random.wrap_key_data(key_data), hparams)

    sharded = jax.jit(
        jax.shard_map(
            per_device, mesh=mesh, in_specs=(P(), P()), out_specs=out_spec, check_vma=False
        )
    )
    default_hparams = Hyperparams.from_config(config)

    def train(key: jax.Array, hparams: Hyperparams | None = None) -> TrainOutput:
        hparams = default_hparams if hparams is None else hparams
        key_data = np.asarray(jax.random.key_data(key))
        return sharded(*to_global((key_data, jax.device_get(hparams)), mesh, P()))

    return train


class DataParallelRun(NamedTuple):
    """ONE agent data-parallel over a mesh, in segments (`make_data_parallel_run`).

    The runner state crosses the programs with its PRNG key as uint32 key data
    (`jax.random.key_data`), the form checkpoints store, so that host copies
    (`fetch`) and placed copies (`place`) are plain arrays.

    mesh: the one-axis mesh over `DATA_AXIS`.
    fns: the per-device functions (`make_train_fns` with `axis_name=DATA_AXIS`).
    init: key -> the global runner state (jitted; params replicated, envs split).
    segment: length -> the jitted program `(runner, hparams) -> (runner, metrics)` of
      `length` updates (one program per length, cached); metrics `[length]`, replicated.
    hparams: the config's `Hyperparams`, replicated on the mesh.
    place: a host runner state (full arrays, key data) -> the global runner state.
    fetch: the global runner state -> a host copy (full arrays in every process: an
      all-gather of the envs across processes).
    """

    mesh: Mesh
    fns: Any
    init: Callable[[jax.Array], RunnerState]
    segment: Callable[[int], Callable[..., tuple[RunnerState, dict[str, jax.Array]]]]
    hparams: Hyperparams
    place: Callable[[RunnerState], RunnerState]
    fetch: Callable[[RunnerState], RunnerState]


def make_data_parallel_run(
    config: PPOConfig,
    devices: Sequence[jax.Device] | int | None = None,
    *,
    init_params: Any = None,
) -> DataParallelRun:
    """The segmented form of `make_data_parallel_train` for drivers that log and save
    between segments (`drivers.program.data_parallel_program`): the same per-device
    functions, the same numbers (a run cut into segments equals the one-call run for the
    same key).

    Raises:
      ValueError: as `make_data_parallel_train` (a host env, D not dividing `num_envs`,
        a per-device batch that does not split into `num_minibatches`).
    """
    from purejaxppo.kinds import check
    from purejaxppo.train import make_train_fns

    check("data_parallel", config.env_name, multi_agent=config.multi_agent)
    mesh = make_mesh(devices, DATA_AXIS)
    fns = make_train_fns(
        config,
        axis_name=DATA_AXIS,
        num_shards=mesh.devices.size,
        init_params=init_params,
    )
    spec = RunnerState(train_state=P(), env=P(DATA_AXIS), key=P(), update_step=P())

    def wire(runner: RunnerState) -> RunnerState:
        return runner.replace(key=jax.random.key_data(runner.key))

    def unwire(runner: RunnerState) -> RunnerState:
        return runner.replace(key=jax.random.wrap_key_data(runner.key))

    def shard(fn: Callable, in_specs: Any, out_specs: Any, once: bool = False) -> Callable:
        mapped = jax.shard_map(
            fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False
        )
        return jit_once(mapped) if once else jax.jit(mapped)

    def init_per_device(key_data: jax.Array) -> RunnerState:
        return wire(fns.init(jax.random.wrap_key_data(key_data)))

    init_program = shard(init_per_device, P(), spec, once=True)  # called once per run

    @functools.cache  # one program per segment length
    def segment(length: int) -> Callable:
        def per_device(runner: RunnerState, hparams: Hyperparams) -> Any:
            runner, metrics = fns.run(unwire(runner), hparams, length)
            return wire(runner), metrics

        return shard(per_device, (spec, P()), (spec, P()))

    def init(key: jax.Array) -> RunnerState:
        return init_program(to_global(np.asarray(jax.random.key_data(key)), mesh, P()))

    def place(runner: RunnerState) -> RunnerState:
        fields = {name: getattr(runner, name) for name in ("train_state", "env", "key")}
        placed = {name: to_global(x, mesh, getattr(spec, name)) for name, x in fields.items()}
        step = to_global(np.asarray(runner.update_step), mesh, P())
        return RunnerState(**placed, update_step=step)

    hparams = to_global(jax.device_get(Hyperparams.from_config(config)), mesh, P())
    return DataParallelRun(
        mesh=mesh,
        fns=fns,
        init=init,
        segment=segment,
        hparams=hparams,
        place=place,
        fetch=to_host,
    )


def pad_runs(num_runs: int, multiple: int) -> int:
    """Smallest multiple of `multiple` that is >= num_runs."""
    return -(-num_runs // multiple) * multiple


def runs_per_chunk_for_memory(
    bytes_per_run: float, bytes_limit: float, num_devices: int, fraction: float = 0.7
) -> int:
    """Largest multiple of `num_devices` runs whose memory fits in `fraction` of each
    device's `bytes_limit`, given `bytes_per_run` measured for one run (at least one run
    per device)."""
    per_device = max(1, int(fraction * bytes_limit // max(bytes_per_run, 1.0)))
    return per_device * num_devices


def device_bytes_limit(mesh: Mesh) -> int | None:
    """Memory limit of the mesh's first local device in bytes, None where JAX reports none
    (CPU)."""
    local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    stats = local[0].memory_stats() if local else None
    return int(stats["bytes_limit"]) if stats and "bytes_limit" in stats else None


__all__ = [
    "DATA_AXIS",
    "DataParallelRun",
    "RUNS_AXIS",
    "device_bytes_limit",
    "initialize_distributed",
    "local_rows",
    "make_data_parallel_run",
    "make_data_parallel_train",
    "make_mesh",
    "make_runs_program",
    "batch_runs",
    "pad_runs",
    "pmean_flat",
    "runs_mesh",
    "runs_per_chunk_for_memory",
    "to_global",
    "to_host",
]
