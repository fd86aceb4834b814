"""`purejaxppo train --coordinator HOST:PORT --num-processes N --process-id I`: one agent
over every device of N processes (`drivers.distributed`), each started with the same
arguments but its `--process-id` (`--num-processes auto`: JAX reads all three from the
cluster's environment, e.g. SLURM's).

Order, so that a misconfiguration fails fast in one line (exit 2) and never hangs: the
arguments are checked before JAX starts (`check_arguments`); the processes join with a
bounded wait (`processes.initialize_distributed`); they compare what they were started
with (`differing_fields`: the resolved config, the process count, the run directory,
`--resume` / `--overwrite`) and the env's kind; then they train. A process that loses
another one (killed, crashed) says so in one line and exits `EXIT_PROCESS_LOST` at once,
without waiting for JAX's shutdown barrier, which the dead process never reaches.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from purejaxppo.cli.options import TrainOptions
from purejaxppo.cli.values import EXIT_DIVERGED, error
from purejaxppo.config import PPOConfig

#: Exit code of a process that lost another process of its run (killed, crashed).
EXIT_PROCESS_LOST = 5


def wants_processes(options: TrainOptions) -> bool:
    """True when `purejaxppo train` was given `--coordinator` or `--num-processes`."""
    return options.coordinator is not None or options.num_processes is not None


def check_arguments(options: TrainOptions, config: PPOConfig, run_dir: Path | None) -> int | None:
    """One-line `ValueError`s before JAX starts; returns the process count (None: `auto`).

    Refuses `--num-seeds` / `--devices` (batched runs in one process), a missing
    `--run-dir`, a `--num-processes` that is neither a positive integer nor "auto", a
    missing `--coordinator` or `--process-id` (or either with "auto"), a process id out of
    range, a malformed address, `--local-devices` < 1, `--init-timeout` <= 0, a config the
    driver cannot run (`check_distributed_config`), and `num_envs` that the devices do not
    divide where their count is known (`--local-devices` given).
    """
    from purejaxppo.drivers.distributed import check_distributed_config
    from purejaxppo.processes import check_process_args

    if options.num_seeds != 1 or options.devices is not None:
        raise ValueError(
            "--num-seeds / --devices train batched runs in one process; --coordinator / "
            "--num-processes train one agent over several processes: use one or the other"
        )
    if run_dir is None:
        raise ValueError(
            "a run over several processes needs --run-dir (a directory every process sees)"
        )
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
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"--num-processes {value!r}: must be a positive integer or 'auto'")
        count = int(value)
        if len(given) < 2:
            raise ValueError(
                f"--num-processes {count} needs --coordinator HOST:PORT and --process-id I"
            )
        check_process_args(options.coordinator, count, options.process_id)
    if options.local_devices is not None and options.local_devices < 1:
        raise ValueError(f"--local-devices {options.local_devices}: must be >= 1")
    if not options.init_timeout > 0:
        raise ValueError(f"--init-timeout {options.init_timeout}: must be > 0 seconds")
    if options.heartbeat_timeout < 1:
        raise ValueError(f"--heartbeat-timeout {options.heartbeat_timeout}: must be >= 1 second")
    check_distributed_config(config)
    if count is not None and options.local_devices is not None:
        devices = count * options.local_devices
        if config.num_envs % devices:
            raise ValueError(
                f"num_envs={config.num_envs} does not split over {devices} devices ({count} "
                f"processes x {options.local_devices} local devices): use a multiple of {devices}"
            )
    return count


def check_agreement(options: TrainOptions, config: PPOConfig, run_dir: Path, resume: bool) -> None:
    """After joining: refuses (in every process alike) processes started with different
    arguments, naming the fields, and an env kind that cannot be data-parallel."""
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
    if not kind.supports("data_parallel"):
        message = str(kind.error("data_parallel", config.env_name))
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
    from purejaxppo.drivers.distributed import train_distributed
    from purejaxppo.guards import TrainingDiverged

    try:
        result = train_distributed(
            config,
            run_dir,
            progress=not options.no_progress,
            resume=resume,
            overwrite=options.overwrite,
        )
    except TrainingDiverged as err:
        error(parser, err, EXIT_DIVERGED)
    except Exception as err:
        if processes.is_lost_process_error(err):
            _exit_lost(err, run_dir)
        if isinstance(err, (ValueError, ImportError)):
            error(parser, err)
        raise
    import jax

    if jax.process_index() == 0:
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
    return 0


def _exit_lost(err: BaseException, run_dir: Path) -> None:
    """One line, then out at once: JAX's shutdown would wait for the dead process."""
    import jax

    first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
    sys.stderr.write(
        f"purejaxppo: error: train: process {jax.process_index()} lost another process of "
        f"the run ({first}); the newest complete checkpoint in {run_dir} is kept: restart "
        f"every process with --resume {run_dir}\n"
    )
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(EXIT_PROCESS_LOST)
