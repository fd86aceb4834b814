"""Each subcommand's options as a dataclass: the fields ARE the flags (as CleanRL's `Args`
with `tyro.cli`, and as the `PPOConfig` flags already are).

A field's metadata holds its argparse settings (`option`); `parser.add_options` turns a
dataclass into flags (`--field-name`, or the field's `flag`), and `pop_options` takes a
parsed subcommand's values back out as an instance. Config overrides (every `PPOConfig`
field) stay in the parsed arguments for `values.load_config`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TypeVar

from purejaxppo.sinks import LOGGERS

T = TypeVar("T")


def option(default: Any = None, *, help: str | None = None, **argparse_kwargs: Any) -> Any:
    """A dataclass field carrying its flag's argparse settings (`type`, `action`,
    `metavar`, `choices`, `required`; `flag` renames the flag, `positional` makes it an
    argument, `group` = (title, description) puts it in an argument group)."""
    metadata = {"help": help, **argparse_kwargs}
    if argparse_kwargs.get("action") == "append":
        return dataclasses.field(default_factory=list, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def pop_options(cls: type[T], args: dict[str, Any]) -> T:
    """`cls` built from (and removed from) the parsed arguments `args`."""
    return cls(**{f.name: args.pop(f.name) for f in dataclasses.fields(cls)})


def _flag(help: str | None = None) -> Any:
    return option(False, action="store_true", help=help)


NO_PROGRESS = "no progress bar"
CONFIG = "YAML file of PPOConfig fields (the base)"
MULTIHOST = ("several hosts", "start one process per host with the same arguments and its own id")


@dataclasses.dataclass
class TrainOptions:
    """`purejaxppo train`."""

    config: Path | None = option(type=Path, help="YAML file of PPOConfig fields")
    run_dir: Path | None = option(
        type=Path, help="output directory (default: runs/<env>-<time>-seed<seed>)"
    )
    resume: Path | None = option(
        type=Path,
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its last checkpoint (uses its config.yaml)",
    )
    overwrite: bool = _flag(
        "replace the contents of an existing --run-dir (deleted once the new run's "
        "config, env and seed are validated, just before training starts)"
    )
    no_progress: bool = _flag(NO_PROGRESS)
    save_initial: bool = _flag(
        "also save a checkpoint of update 0 (the initial params, before any update) when "
        "a new run starts: Policy.load(RUN_DIR, step=0), eval --step 0; keep it beside the "
        "later ones with --keep-checkpoints all"
    )
    num_seeds: int = option(
        1,
        type=int,
        metavar="N",
        help="train the seeds --seed, ..., --seed + N-1 as one program, vmapped and split "
        "over the devices, into one run directory: a single-run directory seed_<s>/ per "
        "seed, plus metrics.csv (all seeds), summary.csv, seeds.yaml and a plot of the "
        "mean with bands (default 1: one run)",
    )
    devices: int | None = option(
        type=int,
        metavar="N",
        help="with --num-seeds: split the seeds over the first N local devices (default: "
        "one CPU device per usable core, at most one per seed)",
    )
    logger_names: list[str] = option(
        flag="--logger",
        action="append",
        metavar="NAME",
        help=f"also log to {' / '.join(n for n in LOGGERS if n != 'csv')} (repeat for more; "
        "adds to the config's loggers; metrics.csv is always written)",
    )
    # One agent over several processes (`cli.distributed`, docs/guides/multi-device.md).
    coordinator: str | None = option(
        metavar="HOST:PORT", help="process 0's address (needs --run-dir)", group=MULTIHOST
    )
    num_processes: str | None = option(
        metavar="N|auto",
        help="processes of the run; auto: read them, the coordinator and this process's "
        "id from the cluster's environment (SLURM, ...)",
        group=MULTIHOST,
    )
    process_id: int | None = option(type=int, metavar="I", group=MULTIHOST)
    local_devices: int | None = option(
        type=int,
        metavar="K",
        help="CPU only: fake this many CPU devices per process",
        group=MULTIHOST,
    )
    init_timeout: float = option(
        120.0,
        type=float,
        metavar="SECONDS",
        help="wait this long for every process to join, then exit in one line (default 120)",
        group=MULTIHOST,
    )
    heartbeat_timeout: int = option(
        30,
        type=int,
        metavar="SECONDS",
        help="a process silent this long counts as dead and the others stop (default 30)",
        group=MULTIHOST,
    )


@dataclasses.dataclass
class EvalOptions:
    """`purejaxppo eval`."""

    run_dir: Path = option(positional=True, type=Path, metavar="RUN_DIR")
    episodes: int = option(100, type=int)
    greedy: bool = _flag("argmax / mean actions")
    seed: int = option(0, type=int)
    env_name: str | None = option(help="evaluate on another env id (same spaces)")
    max_steps: int | None = option(
        type=int,
        metavar="N",
        help="end every episode after N steps (default: the env's time limit; needed for an "
        "env registered without one)",
    )
    video: Path | None = option(
        type=Path,
        metavar="FILE",
        help="also record the first episode evaluated (the same keys; greedy with --greedy, "
        "else sampled; on --env-name's env if given) as FILE.gif or FILE.mp4 (mp4: pip "
        'install "purejaxppo[video]"); an EnvPool MuJoCo run films its gymnasium twin '
        '(pip install "purejaxppo[mujoco]")',
    )
    # the run's checkpoint series (keep_checkpoints: all keeps every one)
    step: int | None = option(
        type=int, metavar="N", help="evaluate the kept checkpoint of update N (default: newest)"
    )
    all_steps: bool = _flag(
        "evaluate every kept checkpoint; write RUN_DIR/eval_steps.csv (update, env_steps, "
        "mean, std, iqm of the return) and eval_steps.png (return against env steps)"
    )
    overwrite: bool = _flag("with --all-steps: replace an existing eval_steps.csv / .png")


@dataclasses.dataclass
class CollectOptions:
    """`purejaxppo collect`."""

    run_dir: Path | None = option(
        positional=True, type=Path, metavar="RUN_DIR", nargs="?", help="the run (required)"
    )
    episodes: int | None = option(type=int, metavar="N", help="episodes to write (required)")
    out: Path | None = option(type=Path, metavar="DIR", help="a new directory (required)")
    greedy: bool = _flag("argmax / mean actions")
    temperature: float | None = option(
        type=float, metavar="T", help="sampling temperature (0: greedy; default 1)"
    )
    step: int | None = option(type=int, metavar="UPDATE", help="checkpoint (default: newest)")
    seed: int = option(0, type=int)
    max_steps: int | None = option(
        type=int,
        metavar="N",
        help="end every episode after N steps, written truncated (default: the env's time "
        "limit; needed for an env registered without one)",
    )
    minari_id: str | None = option(
        metavar="ID", help='e.g. "cartpole/ppo-v0" (pip install "purejaxppo[minari]")'
    )
    info_keys: str = option("", metavar="K1,K2", help="info entries to store per step")
    resume: Path | None = option(
        type=Path,
        metavar="OUT",
        help="continue the partial dataset OUT of a stopped collect (takes the collect's "
        "arguments from OUT/collect.partial; the result is the uninterrupted collect's)",
    )


@dataclasses.dataclass
class SweepOptions:
    """`purejaxppo sweep`."""

    config: Path | None = option(type=Path, help=CONFIG)
    seeds: int = option(8, type=int, help="seeds 0..n-1 per setting")
    grid: list[str] = option(
        action="append",
        metavar="FIELD=V1,V2,...",
        help="grid values of a config field (repeat for more fields)",
    )
    random: list[str] = option(
        action="append",
        metavar="FIELD=DIST:A:B",
        help="random search: uniform:LOW:HIGH, log_uniform:LOW:HIGH, int_uniform:LOW:HIGH or "
        "choice:V1,V2 (repeat for more fields; needs --num-samples)",
    )
    num_samples: int = option(0, type=int, help="random-search draws")
    random_seed: int = option(0, type=int, help="seed of the random draws")
    max_runs_per_chunk: int | None = option(
        type=int,
        help="most runs per program call (a multiple of the device count; default: all, "
        "or what fits in GPU memory)",
    )
    devices: int | None = option(type=int, help="use the first N local devices")
    log_every: int = option(1, type=int, help="table rows every N updates")
    format: str = option("csv", choices=("csv", "parquet"))
    out: Path | None = option(
        type=Path, help="output directory (default: sweeps/<env>-<time>-<random>)"
    )
    resume: Path | None = option(
        type=Path,
        metavar="SWEEP_DIR",
        help="continue a killed sweep: its chunks already on disk are loaded, the rest "
        "computed (takes the sweep's arguments from SWEEP_DIR/request.yaml)",
    )
    overwrite: bool = _flag("replace the contents of an existing --out")
    no_progress: bool = _flag(NO_PROGRESS)
    coordinator: str | None = option(
        metavar="HOST:PORT", help="process 0's address", group=MULTIHOST
    )
    num_processes: int = option(1, type=int, group=MULTIHOST)
    process_id: int = option(0, type=int, group=MULTIHOST)
    local_devices: int | None = option(
        type=int, help="CPU only: fake this many CPU devices per process", group=MULTIHOST
    )


@dataclasses.dataclass
class PbtOptions:
    """`purejaxppo pbt` (the driver's static options are `drivers.population.PBTOptions`)."""

    config: Path | None = option(type=Path, help=CONFIG)
    population: int = option(8, type=int, help="members (default 8)")
    ready_every: int = option(10, type=int, help="updates per generation (default 10)")
    search: list[str] = option(
        action="append",
        metavar="FIELD=DIST:LOW:HIGH",
        help="a traced field's initial distribution and range: uniform:LOW:HIGH or "
        "log_uniform:LOW:HIGH (repeat for more fields)",
    )
    exploit: str = option("truncation", help="truncation (default) or tournament")
    explore: str = option("perturb", help="perturb (default) or resample")
    truncation_fraction: float = option(0.25, type=float)
    tournament_size: int = option(3, type=int)
    resample_probability: float = option(0.25, type=float)
    fitness_window: int | None = option(
        type=int, help="updates averaged for the fitness (default: K)"
    )
    devices: int | None = option(type=int, help="use the first N local devices")
    checkpoint_every: int = option(
        1, type=int, help="generations between population checkpoints in OUT/checkpoints (0: none)"
    )
    resume: Any = option(
        False,
        nargs="?",
        const=True,
        type=Path,
        metavar="OUT",
        help="continue OUT from OUT/checkpoints with the arguments it recorded in "
        "OUT/request.yaml; or, without OUT, --resume --out OUT with the same arguments",
    )
    overwrite: bool = _flag("replace the contents of a non-empty --out written by pbt")
    out: Path | None = option(
        type=Path, help="output directory (default: pbt/<env>-<time>-<random>)"
    )
    no_progress: bool = _flag(NO_PROGRESS)


@dataclasses.dataclass
class ExportOptions:
    """`purejaxppo export`."""

    run_dir: Path = option(positional=True, type=Path, metavar="RUN_DIR")
    to: Path = option(
        type=Path, required=True, metavar="FILE", help="e.g. policy.pt or policy.onnx"
    )
    overwrite: bool = _flag("replace existing files")
