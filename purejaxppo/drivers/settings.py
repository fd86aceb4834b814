"""The settings of a sweep: grid expansion, random draws, validation (no JAX programs).

Kept apart from `drivers.sweeps` so that the command line can validate a sweep before it
starts JAX's backend (which must wait for `jax.distributed.initialize` and CPU device
settings).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from purejaxppo.config import DRIVER_FIELDS, PPOConfig
from purejaxppo.peer_names import field_hint

#: Distributions accepted by `random=` (name -> number of parameters).
DISTRIBUTIONS = {"uniform": 2, "log_uniform": 2, "int_uniform": 2, "choice": 1}
#: Fields that make no sense to sweep (they do not change training, or have their own knob).
UNSWEEPABLE = ("seed", *DRIVER_FIELDS)


def _check_field(name: Any, where: str) -> None:
    names = [f.name for f in dataclasses.fields(PPOConfig)]
    if name not in names:
        raise ValueError(f"{where}: unknown config field {name!r}{field_hint(name, names)}")
    if name in UNSWEEPABLE:
        why = "pass seeds= instead" if name == "seed" else "it does not change training"
        raise ValueError(f"{where}: field {name!r} cannot be swept ({why})")


def check_field(name: Any, where: str) -> None:
    """Raises `ValueError` (prefixed by `where`) unless `name` is a PPOConfig field that
    may be searched: unknown names get close matches, `seed` and the logging / evaluation
    fields are refused. Shared by `sweep` and `pbt`."""
    _check_field(name, where)


def _is_number(value: Any) -> bool:
    """A finite real number (not a bool)."""
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and bool(np.isfinite(value))
    )


def expand_grid(grid: Mapping[str, Sequence[Any]] | None) -> list[dict[str, Any]]:
    """Cartesian product of `grid` (field -> list of values), in row-major order.

    Raises:
      ValueError: for an unknown or unsweepable field, an empty / non-list value list, or
        a value given twice in one field's list (naming the field and the value).
    """
    if not grid:
        return [{}]
    for name, values in grid.items():
        _check_field(name, "grid")
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"grid[{name!r}]={values!r}: must be a non-empty list of values")
        for i, value in enumerate(values):
            if value in list(values)[:i]:
                raise ValueError(
                    f"grid[{name!r}]: value {value!r} is given twice (it would run the same "
                    "settings twice); list each value once"
                )
    names = list(grid)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*grid.values())]


def sample_random(
    random: Mapping[str, Sequence[Any]] | None, num_samples: int, seed: int = 0
) -> list[dict[str, Any]]:
    """`num_samples` settings drawn from `random` (field -> distribution), numpy-seeded.

    A distribution is `("uniform", low, high)`, `("log_uniform", low, high)`,
    `("int_uniform", low, high)` (inclusive) or `("choice", [values...])`.

    Raises:
      ValueError: for an unknown field or distribution, wrong parameters, or
        num_samples < 1.
    """
    if not random:
        return [{}]
    if num_samples < 1:
        raise ValueError(f"num_samples={num_samples}: must be >= 1 with random=")
    rng = np.random.default_rng(seed)
    for name, spec in random.items():
        _check_field(name, "random")
        if not isinstance(spec, Sequence) or isinstance(spec, str) or not spec:
            raise ValueError(f"random[{name!r}]={spec!r}: must be (distribution, *params)")
        kind, params = spec[0], list(spec[1:])
        if kind not in DISTRIBUTIONS:
            raise ValueError(
                f"random[{name!r}]: unknown distribution {kind!r} (one of {list(DISTRIBUTIONS)})"
            )
        if len(params) != DISTRIBUTIONS[kind]:
            raise ValueError(
                f"random[{name!r}]={spec!r}: {kind} takes {DISTRIBUTIONS[kind]} parameter(s)"
            )
        if kind != "choice" and not all(_is_number(p) for p in params):
            raise ValueError(
                f"random[{name!r}]={spec!r}: the bounds of {kind} must be finite numbers"
            )
        if kind == "int_uniform" and not all(float(p).is_integer() for p in params):
            raise ValueError(f"random[{name!r}]={spec!r}: the bounds of int_uniform are integers")
        if kind == "log_uniform" and not 0 < params[0] <= params[1]:
            raise ValueError(f"random[{name!r}]={spec!r}: needs 0 < low <= high")
        if kind in ("uniform", "int_uniform") and not params[0] <= params[1]:
            raise ValueError(f"random[{name!r}]={spec!r}: needs low <= high")
        if kind == "choice" and (isinstance(params[0], str) or not params[0]):
            raise ValueError(f"random[{name!r}]={spec!r}: choice needs a non-empty list")

    def draw(kind, params):
        if kind == "uniform":
            return float(rng.uniform(params[0], params[1]))
        if kind == "log_uniform":
            return float(np.exp(rng.uniform(np.log(params[0]), np.log(params[1]))))
        if kind == "int_uniform":
            return int(rng.integers(params[0], params[1], endpoint=True))
        return params[0][int(rng.integers(len(params[0])))]

    return [
        {name: draw(spec[0], list(spec[1:])) for name, spec in random.items()}
        for _ in range(num_samples)
    ]


def make_settings(
    config: PPOConfig,
    grid: Mapping[str, Sequence[Any]] | None = None,
    random: Mapping[str, Sequence[Any]] | None = None,
    num_samples: int = 0,
    random_seed: int = 0,
) -> tuple[list[dict[str, Any]], list[PPOConfig]]:
    """The settings of a sweep (grid x random draws) and each one's validated config.

    Raises:
      ValueError: as `expand_grid`, `sample_random`, or for a setting whose config is
        invalid (naming the setting and the field).
    """
    settings = [
        {**g, **r}
        for g in expand_grid(grid)
        for r in sample_random(random, num_samples, random_seed)
    ]
    run_configs = []
    for index, setting in enumerate(settings):
        try:
            run_configs.append(config.replace(**setting))
        except ValueError as err:
            raise ValueError(f"setting {index} {setting}: {err}") from None
    return settings, run_configs


def _seed_list(seeds: int | Sequence[int]) -> list[int]:
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds={seeds}: must be >= 1 (or a list of seeds)")
        return list(range(int(seeds)))
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={seeds}: must be a non-empty list of distinct integers")
    if not all(0 <= s < 2**32 for s in seeds):
        raise ValueError(f"seeds={seeds}: every seed must be in [0, 2**32)")
    return seeds


def check_sweep_options(
    seeds: int | Sequence[int], log_every: int = 1, max_runs_per_chunk: int | None = None
) -> list[int]:
    """The seeds of a sweep (`seeds`: n for 0 .. n-1, or a list), after checking them,
    `log_every` and `max_runs_per_chunk` (None or >= 1: that it splits evenly over the
    devices is `check_chunk`'s, once they are known). Starts no JAX backend: the command
    line calls it before it creates the output directory.

    Raises:
      ValueError: naming the option and its value.
    """
    seed_list = _seed_list(seeds)
    if log_every < 1:
        raise ValueError(f"log_every={log_every}: must be >= 1")
    check_chunk(max_runs_per_chunk)
    return seed_list


def check_chunk(max_runs_per_chunk: int | None, num_devices: int | None = None) -> None:
    """Raises a `ValueError` unless `max_runs_per_chunk` is None or a positive multiple of
    `num_devices` (None: not known yet, only positive)."""
    if max_runs_per_chunk is None:
        return
    if max_runs_per_chunk < 1 or (num_devices is not None and max_runs_per_chunk % num_devices):
        count = (
            "the device count" if num_devices is None else f"the number of devices ({num_devices})"
        )
        raise ValueError(
            f"max_runs_per_chunk={max_runs_per_chunk}: must be a positive multiple of "
            f"{count} so that every device gets the same runs"
        )
