"""What a run of `drivers.single` runs, on one process or several, and what its
processes agree on.

A `Program` is the local `jit` of `make_train_fns` (`local_program`) or ONE agent
data-parallel over every device of every process (`data_parallel_program`,
`parallel.make_data_parallel_run`); the driver sees one interface (init, segment(length),
place, fetch, hparams). Over several processes, a step that may fail in only some of
them is agreed (`agree`, `processes.together`), and process 0 alone checks and claims the
run directory (`check_run_dir`, `claim_run_dir`), the others learning whether it could.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import jax

from purejaxppo import fingerprint, parallel, processes, rundir, stored_programs
from purejaxppo.config import PPOConfig
from purejaxppo.drivers.fingerprints import RESUME, run_fields
from purejaxppo.train import make_train_fns
from purejaxppo.types import RunnerState

__all__ = [
    "Program",
    "agree",
    "check_run_dir",
    "claim_run_dir",
    "data_parallel_program",
    "local_program",
]

T = TypeVar("T")


class Program(NamedTuple):
    """What `train_and_log` runs: `local_program` or `data_parallel_program`.

    fns: the per-device `TrainFns` (metric names, networks, setup, env kind).
    init: key -> the program's runner state.
    segment: length -> the jitted `(runner, hparams) -> (runner, metrics)` of `length`
      updates.
    hparams: the config's `Hyperparams`, placed as `segment` takes them.
    place: a checkpoint's runner state -> the program's.
    fetch: the program's runner state -> the one to save (over several processes: a host
      copy, in every process alike: an all-gather of the envs).
    local: the program's runner state with `train_state.params` and `update_step`
      readable by this process's own programs (evaluation, videos, the divergence
      check), without communication.
    fetch_metrics: a segment's metrics -> host arrays.
    label: the progress bar's label.
    distributed: over every device of every process: process 0 writes, all agree.
    """

    fns: Any
    init: Callable[[jax.Array], Any]
    segment: Callable[[int], Callable[..., tuple[Any, dict[str, jax.Array]]]]
    hparams: Any
    place: Callable[[RunnerState], Any]
    fetch: Callable[[Any], RunnerState]
    local: Callable[[Any], RunnerState]
    fetch_metrics: Callable[[Any], Any]
    label: str
    distributed: bool


def local_program(config: PPOConfig, init_params: Any = None) -> Program:
    """The run in this process: `jit` of `make_train_fns(config)`'s functions, their
    exports loaded from the store when it is on (`stored_programs.store_in`; never for a warm
    start, whose parameters are constants of the init, or a kind with host calls)."""
    fns = make_train_fns(config, init_params=init_params)
    directory = stored_programs.directory_for(
        host_calls=fns.kind.host_calls, warm_start=init_params is not None
    )

    @functools.cache  # one program per segment length
    def segment(length: int) -> Callable:
        def run(runner: Any, hparams: Any) -> Any:
            return fns.run(runner, hparams, length)

        return stored_programs.program(f"segment/{length}", run, config, directory)

    def same(runner: Any) -> Any:
        return runner

    return Program(
        fns=fns,
        init=stored_programs.program("init", fns.init, config, directory, once=True),
        segment=segment,
        hparams=fns.hparams,  # the config's (`Hyperparams.from_config`)
        place=same,
        fetch=same,
        local=same,
        fetch_metrics=jax.device_get,
        label=config.env_name,
        distributed=False,
    )


def data_parallel_program(config: PPOConfig, init_params: Any = None) -> Program:
    """ONE agent data-parallel over every device of every process
    (`parallel.make_data_parallel_run`), whose runner state carries its PRNG key as key
    data; `place` and `fetch` convert from and to the typed key checkpoints hold."""
    run = parallel.make_data_parallel_run(config, init_params=init_params)

    def place(host: RunnerState) -> Any:
        return run.place(host.replace(key=jax.random.key_data(host.key)))

    def fetch(runner: Any) -> RunnerState:
        host = run.fetch(runner)
        return host.replace(key=jax.random.wrap_key_data(host.key))

    def local(runner: Any) -> RunnerState:  # both replicated: no communication
        params, step = parallel.to_host((runner.train_state.params, runner.update_step))
        return runner.replace(
            train_state=runner.train_state.replace(params=params), update_step=step
        )

    return Program(
        fns=run.fns,
        init=run.init,
        segment=run.segment,
        hparams=run.hparams,
        place=place,
        fetch=fetch,
        local=local,
        fetch_metrics=parallel.to_host,
        label=f"{config.env_name} ({run.mesh.devices.size} devices)",
        distributed=True,
    )


def agree(distributed: bool, what: str, action: Callable[[], T]) -> T:
    """`action()`; over several processes `processes.together` (a failure anywhere
    raises everywhere)."""
    return processes.together(what, action) if distributed else action()


def _by_process_zero(action: Callable[[], Any] | None, failure: str) -> None:
    """Over several processes: `action` in process 0 (None in the others); when it failed
    (`ValueError`, `OSError`), process 0 raises its error and the others `failure`. Every
    process takes the same one collective, whatever fails."""
    error = None
    if action is not None:
        try:
            action()
        except (ValueError, OSError) as err:
            error = err
    if processes.flagged_processes(error is not None):
        raise error or ValueError(f"{failure} (see its error)")


def check_run_dir(
    run_dir: Path, config: PPOConfig, *, resume: bool, overwrite: bool, distributed: bool
) -> None:
    """Before anything is built: a fresh run's directory must be empty (or `overwrite`),
    a resumed one's config the one recorded at its start (none: a run from before
    records). Over several processes process 0 checks it, and the others raise when it
    failed there.

    Raises:
      rundir.DirectoryNotEmpty, fingerprint.FingerprintMismatch (`ValueError`s).
    """

    def check() -> None:
        if not resume:
            rundir.check_fresh(run_dir, overwrite)
        else:
            try:
                fingerprint.check(run_dir, run_fields(config), what=RESUME)
            except fingerprint.FingerprintMismatch as err:  # e.g. more total_timesteps
                hint = f", or train on from its parameters in a new run: --init-from {run_dir}"
                raise fingerprint.FingerprintMismatch(f"{err}{hint}", err.changes) from None

    if not distributed:
        check()
        return
    writer = jax.process_index() == 0
    _by_process_zero(check if writer else None, f"process 0 could not claim {run_dir}")


def claim_run_dir(
    stack: contextlib.ExitStack, run_dir: Path, *, resume: bool, overwrite: bool, distributed: bool
) -> None:
    """Claims `run_dir` for the `stack`'s block (`rundir.claim`: one writer; the old
    contents go under the lock). Over several processes process 0 claims it; then every
    process checks that it sees the claimed directory (a shared file system). Each
    process takes the same two collectives, whatever fails."""

    def claim() -> None:
        stack.enter_context(rundir.claim(run_dir, "run", resume=resume, overwrite=overwrite))

    if not distributed:
        claim()
        return
    writer = jax.process_index() == 0
    _by_process_zero(claim if writer else None, f"process 0 could not claim {run_dir}")
    missing = processes.flagged_processes(rundir.read_marker(run_dir) is None)
    if missing:
        raise ValueError(
            f"run directory {run_dir}: process {', '.join(map(str, missing))} does not see "
            "what process 0 created there: it must be on a file system every process shares"
        )
