"""The checks of a `--num-seeds` request that need no env: `check_seeds`, and what a
`--resume` of one is (`read_seeds_root`, `seeds_root_of`). The command line calls them
before it sets the CPU device count, so this module imports nothing heavy and starts no
JAX backend."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from purejaxppo.config import PPOConfig

__all__ = ["check_seeds", "read_seeds_root", "seeds_root_of"]

#: The name of a seed's directory in a `--num-seeds` run: seed_<s>.
_SEED_DIR = re.compile(r"seed_(\d+)")


def check_seeds(
    config: PPOConfig,
    num_seeds: int,
    *,
    devices: int | None = None,
) -> list[int]:
    """Returns the seeds `config.seed + k`, k in [0, num_seeds), after checking that
    the request can run as one program; imports nothing heavy and starts no JAX backend.

    Raises:
      ValueError: naming the command-line flag and its value, for `num_seeds` < 1, seeds
        outside [0, 2**32), `devices` < 1, more devices than seeds, `devices` with a
        single seed, and for N > 1 together with `eval_freq`, `video_freq`,
        `collect_freq` or a logger other than csv. (What the env's kind cannot do is
        refused by `train_seeds`, which knows the env suites.)
    """
    if isinstance(num_seeds, bool) or not isinstance(num_seeds, (int, np.integer)):
        raise ValueError(f"--num-seeds {num_seeds!r}: must be an integer >= 1")
    if num_seeds < 1:
        raise ValueError(f"--num-seeds {num_seeds}: must be >= 1")
    if devices is not None:
        _check_devices(num_seeds, devices)
    seeds = [config.seed + k for k in range(num_seeds)]
    if seeds[-1] >= 2**32:
        raise ValueError(
            f"--num-seeds {num_seeds} with --seed {config.seed}: the seeds "
            f"{seeds[0]}..{seeds[-1]} must lie in [0, 2**32)"
        )
    if num_seeds > 1:
        _check_several(config, num_seeds)
    return seeds


def _check_devices(num_seeds: int, devices: int) -> None:
    """`check_seeds`' refusals of `--devices`: < 1, with a single seed, more than seeds."""
    if devices < 1:
        raise ValueError(f"--devices {devices}: must be >= 1")
    if num_seeds == 1:
        raise ValueError(
            f"--devices {devices}: splits the seeds of --num-seeds N > 1 over devices; "
            "a single run uses one device"
        )
    if devices > num_seeds:
        raise ValueError(
            f"--devices {devices} is more than --num-seeds {num_seeds}: every device "
            "needs at least one seed"
        )


def _check_several(config: PPOConfig, num_seeds: int) -> None:
    """`check_seeds`' refusals of N > 1 seeds together with `eval_freq`, `video_freq`,
    `collect_freq` or a logger other than csv."""
    flag = f"--num-seeds {num_seeds}"
    afterwards = {
        "eval_freq": ("evaluation during training", "purejaxppo eval RUN_DIR/seed_<s>"),
        "video_freq": ("videos during training", "purejaxppo eval RUN_DIR/seed_<s> --video F"),
        "collect_freq": ("datasets during training", "purejaxppo collect RUN_DIR/seed_<s>"),
    }
    for field, (what, instead) in afterwards.items():
        value = getattr(config, field)
        if value:
            raise ValueError(
                f"--{field.replace('_', '-')} {value} ({what}) is not available with {flag}; "
                f"set it to 0 and run `{instead}` afterwards"
            )
    others = [name for name in config.loggers if name != "csv"]
    if others:
        raise ValueError(
            f"--logger {','.join(others)} (loggers={list(config.loggers)}) is not available "
            f"with {flag}: only csv (metrics.csv); `purejaxppo sweep` sends one run per seed "
            "to tensorboard / wandb / mlflow / jsonl"
        )


def read_seeds_root(path: str | Path) -> dict[str, Any] | None:
    """The `seeds.yaml` of a `train --num-seeds` run directory `path` (its "seeds" and
    "num_devices", as `drivers.seeds` writes it when the run starts), or None when `path`
    holds no `seeds.yaml` (a single run's directory).

    Raises:
      ValueError: one line naming `path`, for a `seeds.yaml` that does not read back as
        a list of at least two seeds, or a seed without its `seed_<s>` directory.
    """
    path = Path(path)
    file = path / "seeds.yaml"
    if not file.is_file():
        return None
    try:
        spec = yaml.safe_load(file.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"--resume {path}: {file} is unreadable ({err})") from None
    seeds = spec.get("seeds") if isinstance(spec, dict) else None
    if not (
        isinstance(seeds, list) and len(seeds) > 1 and all(type(s) is int for s in seeds)
    ) or not isinstance(spec.get("num_devices"), int):
        raise ValueError(
            f"--resume {path}: {file} holds no seeds list and num_devices of a "
            "purejaxppo train --num-seeds run"
        )
    missing = [f"seed_{s}" for s in seeds if not (path / f"seed_{s}").is_dir()]
    if missing:
        raise ValueError(
            f"--resume {path}: a --num-seeds run of the seeds {seeds} without "
            f"{', '.join(missing)}: it cannot continue as one program"
        )
    return spec


def seeds_root_of(path: str | Path) -> Path | None:
    """The `train --num-seeds` run directory that `path` is a seed directory of
    (`<root>/seed_<s>` beside `<root>/seeds.yaml`), or None."""
    path = Path(path)
    if _SEED_DIR.fullmatch(path.name) and (path.parent / "seeds.yaml").is_file():
        return path.parent
    return None
