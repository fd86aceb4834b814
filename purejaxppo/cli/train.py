"""`purejaxppo train`: one run (`drivers.single`) or several seeds (`drivers.seeds`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from purejaxppo.cli.distributed import train_distributed_command, wants_processes
from purejaxppo.cli.options import TrainOptions, pop_options
from purejaxppo.cli.values import (
    EXIT_DIVERGED,
    error,
    load_config,
)
from purejaxppo.config import PPOConfig

#: Warm-start fields: a resumed run continues its own checkpoint, so `--resume` refuses them.
WARM_START_FIELDS = ("init_from", "init_parts", "init_step")


def train_command(parser: argparse.ArgumentParser, args: dict[str, Any]) -> int:
    """`purejaxppo train`: validate, then one run (or `--num-seeds N` runs); print the result."""
    o = pop_options(TrainOptions, args)
    config_path, run_dir, resume, overwrite = o.config, o.run_dir, o.resume, o.overwrite
    progress, extra_loggers = not o.no_progress, o.logger_names
    num_seeds, devices = o.num_seeds, o.devices
    if o.save_initial:
        _check_save_initial(parser, o)
    if resume is not None and num_seeds != 1:
        error(
            parser,
            f"--resume cannot be combined with --num-seeds {num_seeds}: --resume RUN_DIR "
            "continues every seed a --num-seeds run started with (its seeds.yaml)",
        )
    if resume is not None:
        _check_resume(parser, o, args)
        num_seeds, devices = _resumed_seeds(parser, resume, devices)
        config_path, run_dir = resume / "config.yaml", resume
    config = _train_config(parser, config_path, args, extra_loggers)
    if wants_processes(o):  # one agent over several processes (`cli.distributed`)
        return train_distributed_command(parser, o, config, run_dir, resume is not None)
    if num_seeds != 1 or devices is not None:
        return _train_seeds_command(
            parser, config, run_dir, num_seeds, devices, progress, overwrite, resume=resume
        )
    from purejaxppo import rundir
    from purejaxppo.drivers.single import train_and_log  # imports JAX; keep --help fast
    from purejaxppo.guards import TrainingDiverged

    created = None
    if run_dir is None:  # a fresh, unique directory: never shared with another launch
        run_dir = created = rundir.default_run_dir(config.env_name, config.seed, name=config.name)
    try:
        result = train_and_log(
            config,
            run_dir,
            progress=progress,
            resume=resume is not None,
            overwrite=overwrite,
            save_initial=o.save_initial,
        )
    except (ValueError, ImportError) as err:
        if created is not None:
            rundir.remove_if_empty(created)
        error(parser, err)
    except TrainingDiverged as err:
        error(parser, err, EXIT_DIVERGED)
    final = result.final_return
    if final == final:
        print(
            f"final mean episode_return (newest {result.final_episodes} finished episodes): "
            f"{final:.2f}"
        )
    else:
        print("final mean episode_return: n/a (no episode ended)")
    for line in _last_evaluations(result.metrics, config.eval_episodes):
        print(line)
    print(f"run directory: {result.run_dir}")
    return 0


def _check_resume(parser: argparse.ArgumentParser, o: TrainOptions, args: dict[str, Any]) -> None:
    """Exits (`error`) for `train --resume RUN_DIR` with a config, a run dir,
    `--overwrite` or a warm start, or RUN_DIR not a run directory."""
    resume = o.resume
    if o.config is not None or o.run_dir is not None:
        error(parser, "--resume takes the run's own config and dir")
    if o.overwrite:
        error(parser, "--resume and --overwrite exclude each other")
    warm = [f"--{k.replace('_', '-')}" for k in WARM_START_FIELDS if k in args]
    if warm:
        error(
            parser,
            f"--resume continues {resume} from its own checkpoint; {', '.join(warm)} (a "
            "warm start) is for a new run: drop it, or start a new run with --run-dir",
        )
    if not (resume / "config.yaml").is_file():
        error(parser, f"--resume {resume}: no run directory there (no config.yaml)")


def _train_config(
    parser: argparse.ArgumentParser,
    config_path: Path | None,
    args: dict[str, Any],
    extra_loggers: list[str],
) -> PPOConfig:
    """The config a `train` runs: `load_config` with the `--logger`s added, and
    `total_timesteps` rounded down to whole updates (said on stderr; config.yaml records
    it). Exits (`error`) for a bad config."""
    try:
        config = load_config(config_path, args)
        if extra_loggers:
            loggers = [*config.loggers, *extra_loggers]
            config = config.replace(loggers=list(dict.fromkeys(loggers)))
    except ValueError as err:
        error(parser, err)
    if config.total_timesteps % config.batch_size:  # rounded once; config.yaml records it
        rounded = config.num_updates * config.batch_size
        print(
            f"purejaxppo: total_timesteps={config.total_timesteps} rounded down to {rounded} "
            f"({config.num_updates} updates of num_envs*num_steps = {config.batch_size} env "
            "steps; config.yaml records it)",
            file=sys.stderr,
        )
        config = config.replace(total_timesteps=rounded)
    return config


def _check_save_initial(parser: argparse.ArgumentParser, o: TrainOptions) -> None:
    """Exits 2 in one line unless `--save-initial` asks for a new run of one agent in one
    process (`drivers.single.train_and_log(save_initial=True)`)."""
    if o.resume is not None:
        error(parser, f"--save-initial is for a new run; --resume {o.resume} continues its own")
    if o.num_seeds != 1 or o.devices is not None:
        error(parser, "--save-initial is for one run, not --num-seeds / --devices")
    if wants_processes(o):
        error(parser, "--save-initial is for one run in one process, not --num-processes")


def _last_evaluations(metrics: Any, episodes: int) -> list[str]:
    """One line per eval split: its newest evaluation (`eval/<split>/return` columns), the
    return of `episodes` whole episodes rather than of the training episodes that ended."""
    lines = []
    for column in [c for c in metrics.columns if c.startswith("eval/")]:
        done = metrics[["update", column]].dropna()
        if len(done):
            update, value = done.iloc[-1]
            split = column.split("/")[1]
            lines.append(
                f"last evaluation ({split}, update {int(update)}, {episodes} episodes): {value:.2f}"
            )
    return lines


def _resumed_seeds(
    parser: argparse.ArgumentParser, resume: Path, devices: int | None
) -> tuple[int, int | None]:
    """(num_seeds, devices) of `--resume DIR`: a `--num-seeds` run's seeds and (unless
    `--devices`) device count from its seeds.yaml, or (1, devices) for a single run. A
    seed directory of a `--num-seeds` run is refused: its seeds continue together."""
    from purejaxppo.drivers.seed_checks import read_seeds_root, seeds_root_of

    root = seeds_root_of(resume)
    if root is not None:
        error(
            parser,
            f"--resume {resume}: a seed of the --num-seeds run {root}, whose seeds train as "
            f"one program: continue them together with `purejaxppo train --resume {root}` "
            "(or copy this directory out of it to continue the seed on its own)",
        )
    try:
        spec = read_seeds_root(resume)
    except ValueError as err:
        error(parser, err)
    if spec is None:
        return 1, devices
    return len(spec["seeds"]), spec["num_devices"] if devices is None else devices


def _train_seeds_command(
    parser: argparse.ArgumentParser,
    config: PPOConfig,
    run_dir: Path | None,
    num_seeds: int,
    devices: int | None,
    progress: bool,
    overwrite: bool,
    *,
    resume: Path | None = None,
) -> int:
    """`purejaxppo train --num-seeds N` (or `--resume` of one): validated before the CPU
    device count is set (and JAX started), trained by `drivers.seeds.train_seeds`."""
    from purejaxppo import rundir
    from purejaxppo.drivers.seeds import check_seeds

    try:
        check_seeds(config, num_seeds, devices=devices)
        if run_dir is not None and resume is None:
            rundir.check_fresh(run_dir, overwrite)
    except ValueError as err:
        error(parser, err)
    # Every core by default, as `sweep` and `pbt`: one CPU device per core. Without
    # --devices the driver splits the seeds over min(N, devices) of them
    # (`parallel.runs_mesh`; EnvPool, gymnasium: one device).
    from purejaxppo.platform import configure_cpu_devices

    configure_cpu_devices(devices)
    from purejaxppo.drivers.seeds import train_seeds  # imports JAX; keep --help fast

    try:
        result = train_seeds(
            config,
            run_dir,
            num_seeds,
            devices=devices,
            progress=progress,
            overwrite=overwrite,
            resume=resume is not None,
        )
    except (ValueError, ImportError) as err:
        error(parser, err)
    print(_seeds_summary(result, num_seeds))
    if result.diverged:
        error(
            parser,
            f"{len(result.diverged)} of {num_seeds} seeds diverged (NaN / Inf): seeds "
            f"{sorted(result.diverged)}; see the 'diverged' column of "
            f"{result.run_dir / 'summary.csv'}",
            EXIT_DIVERGED,
        )
    return 0


def _seeds_summary(result: Any, num_seeds: int) -> str:
    """What `purejaxppo train --num-seeds N` prints of a `train_seeds` result: each
    seed's final return, their mean ± std (IQM, min, max) and the run directory."""
    lines = ["final mean episode_return (newest 100 finished episodes) per seed:"]
    for seed, value in zip(result.seeds, result.final_returns, strict=True):
        mark = f" (diverged at update {result.diverged[seed]})" if seed in result.diverged else ""
        lines.append(f"  seed {seed}: {value:.2f}{mark}")
    stats = result.summary.set_index("seed")["final_return"]
    lines.append(
        f"mean ± std over {num_seeds} seeds: {stats['mean']:.2f} ± {stats['std']:.2f} "
        f"(IQM {stats['iqm']:.2f}, min {stats['min']:.2f}, max {stats['max']:.2f})"
    )
    lines.append(f"run directory: {result.run_dir} (seeds in seed_<s>/)")
    return "\n".join(lines)
