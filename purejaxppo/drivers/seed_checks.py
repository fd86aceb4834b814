"""The checks of a `--num-seeds` request that need no env: `check_seeds` (the command line
calls it before it sets the CPU device count, so it imports nothing heavy and starts no
JAX backend)."""

from __future__ import annotations

import numpy as np

from purejaxppo.config import PPOConfig

__all__ = ["check_seeds"]


def check_seeds(
    config: PPOConfig,
    num_seeds: int,
    *,
    devices: int | None = None,
    resume: bool = False,
) -> list[int]:
    """Returns the seeds `config.seed + k`, k in [0, num_seeds), after checking that
    the request can run as one program; imports nothing heavy and starts no JAX backend.

    Raises:
      ValueError: naming the command-line flag and its value, for `num_seeds` < 1, seeds
        outside [0, 2**32), `devices` < 1, more devices than seeds, `devices` with a
        single seed, and for N > 1 together with `resume`, `eval_freq`, `video_freq`,
        `collect_freq` or a logger other than csv. (What the env's kind cannot do is
        refused by `train_seeds`, which knows the env suites.)
    """
    if isinstance(num_seeds, bool) or not isinstance(num_seeds, (int, np.integer)):
        raise ValueError(f"--num-seeds {num_seeds!r}: must be an integer >= 1")
    if num_seeds < 1:
        raise ValueError(f"--num-seeds {num_seeds}: must be >= 1")
    if devices is not None:
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
    seeds = [config.seed + k for k in range(num_seeds)]
    if seeds[-1] >= 2**32:
        raise ValueError(
            f"--num-seeds {num_seeds} with --seed {config.seed}: the seeds "
            f"{seeds[0]}..{seeds[-1]} must lie in [0, 2**32)"
        )
    if num_seeds == 1:
        return seeds
    flag = f"--num-seeds {num_seeds}"
    if resume:
        raise ValueError(
            f"--resume cannot be combined with {flag}: every seed directory is a single "
            "run, resume them one at a time (purejaxppo train --resume RUN_DIR/seed_<s>)"
        )
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
    return seeds
