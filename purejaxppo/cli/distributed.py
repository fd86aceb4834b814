"""`purejaxppo train --coordinator HOST:PORT --num-processes N --process-id I`: one agent
over every device of N processes (`drivers.single.train_and_log(distributed=True)`),
each started with the same arguments but its `--process-id` (`--num-processes auto`: JAX
reads all three from the cluster's environment, e.g. SLURM's).

Order, so that a misconfiguration fails fast in one line (exit 2) and never hangs: the
arguments are checked before JAX starts, each process its own, so that no process waits
for the others to learn that it cannot run (`check_arguments`: the address, the process
count and id, the timeouts, the config, the env's kind); the processes join with a
bounded wait (`processes.initialize_distributed`, where a second process 0 is named a
duplicate id); they compare what they were started with (`differing_fields`: the
resolved config, the process count, the run directory, `--resume` / `--overwrite`); then
they train. A process that loses another one (killed, crashed) says so in one line and
exits `EXIT_PROCESS_LOST` at once, without waiting for JAX's shutdown barrier, which the
dead process never reaches.

Ctrl-C (`_ctrl_c`): a first one stops every process after the same segment, saved
together (JAX's preemption notice, as SIGTERM), exit 130; a second one stops each process
at once with one line giving its command that continues the run. gloo's connection lines
are kept off stdout (`processes.quiet_gloo`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from purejaxppo.cli.options import TrainOptions
from purejaxppo.cli.values import EXIT_DIVERGED, error
from purejaxppo.config import PPOConfig
from purejaxppo.signals import exit_code

#: Exit code of a process that lost another process of its run (killed, crashed).
EXIT_PROCESS_LOST = 5
#: The env-id prefixes of the kinds without "processes" in the kinds table (`HOST`,
#: `ENVPOOL`, `AGENTS`; the latter also for any `multi_agent` setting), refused by
#: `check_arguments` before any process waits for the others. The table itself cannot be
#: read then: importing it imports the env suites, one of which (gymnax) runs JAX at
#: import, after which no process can join. tests/test_distributed_args.py checks these
#: prefixes against the table.
NOT_DATA_PARALLEL_PREFIXES = ("gymnasium:", "envpool:", "jaxmarl:")


def wants_processes(options: TrainOptions) -> bool:
    """True when `purejaxppo train` was given `--coordinator` or `--num-processes`."""
    return options.coordinator is not None or options.num_processes is not None


def check_arguments(options: TrainOptions, config: PPOConfig, run_dir: Path | None) -> int | None:
    """One-line `ValueError`s before JAX starts; returns the process count (None: `auto`).

    Refuses `--num-seeds` / `--devices` (batched runs in one process), a missing
    `--run-dir`, a `--num-processes` that is neither an integer in [1,
    `processes.MAX_PROCESSES`] nor "auto", a missing `--coordinator` or `--process-id` (or
    either with "auto"), a process id out of range, an address that is not HOST:PORT
    (`processes.parse_address`), `--local-devices` < 1, `--init-timeout` <= 0,
    `upload_checkpoints` without the wandb logger (`check_upload`), an env kind that
    cannot be data-parallel (`NOT_DATA_PARALLEL_PREFIXES`: EnvPool, gymnasium:, JaxMARL),
    and `num_envs` that the devices do not divide where their count is known (`--local-devices` given). Each is
    refused at once, in the process that was given it: no process waits for the others
    to join first.
    """
    from purejaxppo.drivers.record import check_upload

    if options.num_seeds != 1 or options.devices is not None:
        raise ValueError(
            "--num-seeds / --devices train batched runs in one process; --coordinator / "
            "--num-processes train one agent over several processes: use one or the other"
        )
    if run_dir is None:
        raise ValueError(
            "a run over several processes needs --run-dir (a directory every process sees)"
        )
    count = _process_count(options)
    if options.local_devices is not None and options.local_devices < 1:
        raise ValueError(f"--local-devices {options.local_devices}: must be >= 1")
    if not 0 < options.init_timeout < float("inf"):
        raise ValueError(f"--init-timeout {options.init_timeout:g}: must be > 0 seconds (finite)")
    if options.heartbeat_timeout < 1:
        raise ValueError(f"--heartbeat-timeout {options.heartbeat_timeout}: must be >= 1 second")
    check_upload(config)
    if config.env_name.startswith(NOT_DATA_PARALLEL_PREFIXES) or config.multi_agent:
        asked = "processes from the cluster" if count is None else f"{count} processes"
        raise ValueError(
            f"env_name={config.env_name!r}: data-parallel training over several processes "
            f"is not supported for EnvPool, gymnasium: or multi-agent (JaxMARL) envs (asked "
            f"for {asked}): train in one process, without --coordinator / --num-processes"
        )
    if count is not None and options.local_devices is not None:
        devices = count * options.local_devices
        if config.num_envs % devices:
            raise ValueError(
                f"num_envs={config.num_envs} does not split over {devices} devices ({count} "
                f"processes x {options.local_devices} local devices): use a multiple of {devices}"
            )
    return count


def _process_count(options: TrainOptions) -> int | None:
    """`--num-processes` checked with `--coordinator` and `--process-id`: the count, or
    None for "auto" (read from the cluster's environment)."""
    from purejaxppo.processes import MAX_PROCESSES, check_process_args, parse_address

    value = options.num_processes
    if value is None:
        raise ValueError("--coordinator needs --num-processes N (or auto) and --process-id I")
    given = [
        f
        for f, v in (("--coordinator", options.coordinator), ("--process-id", options.process_id))
        if v is not None
    ]
    if value == "auto":
        if given:
            raise ValueError(
                f"--num-processes auto reads the coordinator and the process id from the "
                f"cluster's environment: drop {' and '.join(given)}"
            )
        count = None
    else:
        if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_PROCESSES:
            raise ValueError(
                f"--num-processes {value}: must be an integer in [1, {MAX_PROCESSES}] or 'auto'"
            )
        count = int(value)
        if len(given) < 2:
            raise ValueError(
                f"--num-processes {count} needs --coordinator HOST:PORT and --process-id I"
            )
        parse_address(options.coordinator, "--coordinator")
        check_process_args(options.coordinator, count, options.process_id)
    return count


def check_agreement(options: TrainOptions, config: PPOConfig, run_dir: Path, resume: bool) -> None:
    """After joining: refuses (in every process alike) processes started with different
    arguments, naming the fields, and an env kind that cannot be data-parallel (the kinds
    table; `NOT_DATA_PARALLEL_PREFIXES` refused those known before joining)."""
    import jax

    from purejaxppo import kinds, processes

    fields = dict(config.to_dict())
    fields.update(
        num_processes=options.num_processes,
        run_dir=str(run_dir),
        resume=resume,
        overwrite=bool(options.overwrite),
        local_devices=options.local_devices,
    )
    differ = processes.differing_fields(fields)
    if differ:
        listed = ", ".join(
            f"{name} (process {', '.join(map(str, ids))})" for name, ids in differ.items()
        )
        raise ValueError(
            f"the processes were started with different arguments: {listed} differ from "
            "process 0's; start every process with the same arguments (only --process-id "
            "differs)"
        )
    kind = kinds.kind_of_id(config.env_name, config.multi_agent)
    if not kind.supports("processes"):
        message = str(kind.error("processes", config.env_name))
        asked = f"{jax.process_count()} processes x {jax.local_device_count()} devices"
        raise ValueError(f"{message} (asked for {asked})")


def train_distributed_command(
    parser: argparse.ArgumentParser,
    options: TrainOptions,
    config: PPOConfig,
    run_dir: Path | None,
    resume: bool,
) -> int:
    """`purejaxppo train` over several processes (see the module docstring)."""
    try:
        count = check_arguments(options, config, run_dir)
    except ValueError as err:
        error(parser, err)
    from purejaxppo.processes import claim_process_id, quiet_gloo

    with contextlib.ExitStack() as stack:
        if options.process_id is not None:  # a duplicate id: one line, before joining
            try:
                stack.enter_context(claim_process_id(run_dir, options.process_id, count))
            except ValueError as err:
                error(parser, err)
        with _ctrl_c(run_dir, resume_command(options, run_dir)) as ctrl_c, quiet_gloo():
            return _train(parser, options, config, run_dir, resume, count, ctrl_c)


def _train(
    parser: argparse.ArgumentParser,
    options: TrainOptions,
    config: PPOConfig,
    run_dir: Path,
    resume: bool,
    count: int | None,
    ctrl_c: _CtrlC,
) -> int:
    """`train_distributed_command` once the arguments are checked and Ctrl-C is watched."""
    from purejaxppo import processes

    _join(parser, options, config, run_dir, resume, count)
    from purejaxppo.drivers.single import train_and_log
    from purejaxppo.guards import TrainingDiverged
    from purejaxppo.signals import TrainingInterrupted

    ctrl_c.training = True
    try:
        result = train_and_log(
            config,
            run_dir,
            progress=not options.no_progress,
            resume=resume,
            overwrite=options.overwrite,
            distributed=True,
        )
    except TrainingDiverged as err:
        error(parser, err, EXIT_DIVERGED)
    except TrainingInterrupted as stop:  # JAX's preemption notice: SIGTERM, or our Ctrl-C
        if ctrl_c.requested:
            hint = resume_command(options, run_dir)
            raise TrainingInterrupted(stop.done, "SIGINT", hint, stop.unit) from None
        raise
    except Exception as err:
        if processes.is_lost_process_error(err):
            _exit_lost(err, run_dir)
        if isinstance(err, (ValueError, ImportError)):
            error(parser, err)
        raise
    _report(result)
    return 0


def _join(
    parser: argparse.ArgumentParser,
    options: TrainOptions,
    config: PPOConfig,
    run_dir: Path,
    resume: bool,
    count: int | None,
) -> None:
    """Joins the processes (`jax.distributed`) and checks that they agree on the run; a
    refusal ends the command in one line."""
    from purejaxppo import processes

    try:
        processes.initialize_distributed(
            options.coordinator,
            count,
            options.process_id,
            local_device_count=options.local_devices,
            initialization_timeout=options.init_timeout,
            heartbeat_timeout=options.heartbeat_timeout,
        )
        check_agreement(options, config, run_dir, resume)
    except ValueError as err:
        error(parser, err)


def _report(result) -> None:
    """Process 0 prints the final return and where the run is."""
    import jax

    if jax.process_index() != 0:
        return
    final = result.final_return
    if final == final:
        print(
            f"final mean episode_return (newest {result.final_episodes} finished "
            f"episodes): {final:.2f}"
        )
    else:
        print("final mean episode_return: n/a (no episode ended)")
    spread = f"{jax.process_count()} processes, {jax.device_count()} devices"
    print(f"run directory: {result.run_dir} ({spread})")


def _exit_lost(err: BaseException, run_dir: Path) -> None:
    """One line, then out at once: JAX's shutdown would wait for the dead process."""
    import jax

    first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
    sys.stderr.flush()
    _say(
        f"purejaxppo: error: train: process {jax.process_index()} lost another process of "
        f"the run ({first}); the newest complete checkpoint in {run_dir} is kept: restart "
        f"every process with --resume {run_dir}",
        blank=False,
    )
    from purejaxppo.processes import release_claims

    release_claims()
    os._exit(EXIT_PROCESS_LOST)


def resume_command(options: TrainOptions, run_dir: Path) -> str:
    """The command that continues this run in this process (each process: its own id)."""
    words = ["purejaxppo", "train", "--resume", str(run_dir)]
    if options.coordinator is not None:
        words += ["--coordinator", options.coordinator]
    words += ["--num-processes", str(options.num_processes)]
    if options.process_id is not None:
        words += ["--process-id", str(options.process_id)]
    if options.local_devices is not None:
        words += ["--local-devices", str(options.local_devices)]
    return shlex.join(words)


class _CtrlC:
    """What `_ctrl_c` saw: `requested` once a first SIGINT asked for a stop; `training`
    once the processes train (before, a SIGINT stops the process at once)."""

    def __init__(self) -> None:
        self.requested = False
        self.training = False


@contextlib.contextmanager
def _ctrl_c(run_dir: Path, resume: str) -> Iterator[_CtrlC]:
    """Ctrl-C (SIGINT) in a run over several processes, the same in every process (a
    terminal sends it to all of those it started):

    * before training (joining, comparing arguments): one line, exit 130 at once;
    * the first while training: one line, then the run stops as on SIGTERM (JAX's
      preemption notice, which reaches every process): after the same segment, saved
      together, exit 130 (`TrainingInterrupted`);
    * the second: one line with the command that continues from the newest complete
      checkpoint (or, with none, says so), exit 130 at once, without JAX's shutdown
      barrier (which would wait for processes that are gone).

    Python runs signal handlers in the main thread only, and not while it waits in a
    compiled program or a collective; so the handler does nothing, and a watcher thread
    reads the signal from the wakeup file descriptor (`signal.set_wakeup_fd`) and acts
    at once. Outside the main thread nothing is changed.
    """
    state = _CtrlC()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    read, write = os.pipe()
    os.set_blocking(write, False)

    def watch() -> None:
        while True:
            try:
                data = os.read(read, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum == signal.SIGINT:
                    _on_ctrl_c(state, run_dir, resume)

    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    previous_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="purejaxppo-ctrl-c", daemon=True)
    watcher.start()
    try:
        yield state
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous)
        os.close(write)
        watcher.join(1)
        os.close(read)


def _on_ctrl_c(state: _CtrlC, run_dir: Path, resume: str) -> None:
    """One SIGINT, seen by `_ctrl_c`'s watcher thread."""
    if state.training and not state.requested:
        state.requested = True
        _say(
            "purejaxppo: SIGINT: every process stops after the running segment (saved "
            "together first); Ctrl-C again stops at once"
        )
        os.kill(os.getpid(), signal.SIGTERM)  # JAX's preemption notice: every process
        return
    if _has_checkpoint(run_dir):
        left = f"the newest complete checkpoint is kept; continue with: {resume}"
    elif not state.training:  # the run directory is not claimed yet
        again = shlex.join(["purejaxppo", *sys.argv[1:]])
        left = f"before training started; start again with: {again}"
    else:
        words = sys.argv[1:] + ([] if "--overwrite" in sys.argv else ["--overwrite"])
        again = shlex.join(["purejaxppo", *words])
        left = f"nothing was saved yet; start again with: {again}"
    which = "a second SIGINT" if state.requested else "SIGINT"
    _say(f"purejaxppo: train: stopped at once by {which}; {left}")
    from purejaxppo.processes import release_claims

    release_claims()
    os._exit(exit_code("SIGINT"))


def _has_checkpoint(run_dir: Path) -> bool:
    """Whether `run_dir` holds a complete checkpoint (its step directory renamed into
    place; read without orbax, whose manager may wait for the other processes)."""
    last = run_dir / "checkpoints" / "last"
    try:
        return any(entry.name.isdigit() for entry in last.iterdir())
    except OSError:
        return False


def _say(line: str, blank: bool = True) -> None:
    """`line` on stderr at once (after an empty line with `blank`, below a "^C"):
    straight to file descriptor 2, past any replacement of `sys.stderr` (a checkpoint's
    save holds it) and its buffer, since the process may end right after."""
    sys.stdout.flush()
    os.write(2, (("\n" if blank else "") + line + "\n").encode())
