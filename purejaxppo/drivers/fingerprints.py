"""What decides the results of `purejaxppo train`, recorded when a run starts and compared
on `--resume` (`purejaxppo.fingerprint`).

* A single run (`drivers.single`) records `run_fields(config)` in its run directory: the
  resolved config without the driver fields (`checkpoint.RESUME_MAY_CHANGE`: logging,
  saving, evaluation; a resume may change them, as `load_checkpoint` allows).
* A `--num-seeds` run (`drivers.seeds`) records `seeds_fields(...)` in its root (the
  same config fields, the seeds, and the layout of the seeds over the devices) and
  `run_fields` of each seed's config in each `seed_<s>/`.

`purejaxppo train --resume DIR` compares what it would run now with the records and
refuses a change in one line naming the field (`fingerprint.FingerprintMismatch`, a
`ValueError`), e.g. an edited `config.yaml` of the root or of a seed. A directory
without a record (written before records existed) resumes as before.

Imports nothing that starts JAX's backend (the command line checks before it sets the
CPU device count).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from purejaxppo import fingerprint
from purejaxppo.config import DRIVER_FIELDS, PPOConfig

__all__ = ["RESUME", "check_seeds_root", "record_seeds", "run_fields", "seeds_fields"]

#: How a refused resume names itself (the start of its one line).
RESUME = "train --resume"


def run_fields(config: PPOConfig) -> dict[str, Any]:
    """{"config": every field of `config` but the driver ones}: what decides a run's
    numbers (the driver fields, `config.DRIVER_FIELDS`, may change on resume)."""
    return {"config": {k: v for k, v in config.to_dict().items() if k not in DRIVER_FIELDS}}


def seeds_fields(
    config: PPOConfig, seeds: Sequence[int], num_devices: int, num_runs: int
) -> dict[str, Any]:
    """What decides the results of a `--num-seeds` run: `run_fields(config)` (its `seed`
    is the first seed), the seeds `[S]`, and the layout of the `num_runs` batched runs
    (the seeds, padded to a multiple of the device count) over `num_devices` devices."""
    return {
        **run_fields(config),
        "seeds": [int(s) for s in seeds],
        "layout": {
            "num_devices": int(num_devices),
            "seeds_per_device": int(num_runs) // int(num_devices),
            "padding_runs": int(num_runs) - len(seeds),
        },
    }


def check_seeds_root(root: Path, fields: dict[str, Any], seed_dirs: Sequence[Path]) -> None:
    """Compares a `--num-seeds` root and each of its seed directories with their records.

    Args:
      root: the run directory of `train --num-seeds`.
      fields: `seeds_fields(...)` of the run that would resume now.
      seed_dirs: `root/seed_<s>` for every seed, in run order.

    Raises:
      fingerprint.FingerprintMismatch (a ValueError): the root's record differs from
        `fields`, or a seed's `config.yaml` from its record, naming the first field.
      ValueError: a seed directory without a readable `config.yaml`.
    """
    fingerprint.check(root, fields, what=RESUME)
    for seed_dir in seed_dirs:
        path = seed_dir / "config.yaml"
        if not path.is_file():
            raise ValueError(f"{RESUME} {root}: {seed_dir} has no config.yaml")
        try:
            seed_config = PPOConfig.from_yaml(path)
        except ValueError as err:
            raise ValueError(f"{RESUME} {root}: {path}: {err}") from None
        fingerprint.check(seed_dir, run_fields(seed_config), what=RESUME)


def record_seeds(
    root: Path,
    fields: dict[str, Any],
    seed_dirs: Sequence[Path],
    seed_configs: Sequence[PPOConfig],
    *,
    ensure: bool = False,
) -> None:
    """Records `fields` (`seeds_fields`) in `root` and `run_fields` of each seed's config
    in its directory (created); with `ensure`, only where there is no record yet
    (`fingerprint.ensure`: a run started before records existed)."""
    records = [fields, *map(run_fields, seed_configs)]
    for directory, record in zip([root, *seed_dirs], records, strict=True):
        if ensure:
            fingerprint.ensure(directory, record, what=RESUME)
        else:
            Path(directory).mkdir(parents=True, exist_ok=True)
            fingerprint.record(directory, record)
